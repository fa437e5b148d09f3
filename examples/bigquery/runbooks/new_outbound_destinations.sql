-- title: New outbound destinations per host
-- description: Outbound connections from each host to public (non-private) addresses in a time window, per destination and port, with flows, bytes and first/last time, and whether the host had contacted that address during the baseline period before the window (new_destination); a new destination on an unusual port with steady hourly flows (e.g. 3333) suggests a mining pool, a large download from a new address a payload. DNS lookups are excluded (see the DNS runbook). Edit the baseline and the window in the params CTE.
WITH params AS (
  SELECT
    TIMESTAMP '2026-11-19 00:00:00+00' AS baseline_start,
    TIMESTAMP '2026-11-19 12:00:00+00' AS start_time,
    TIMESTAMP '2026-11-21 06:00:00+00' AS end_time
),
outbound AS (
  SELECT n.event_time, n.host, n.dst_ip, n.dst_port, n.protocol, n.bytes_sent, n.bytes_received
  FROM `security_logs.network_events` AS n
  WHERE n.direction = 'outbound'
    AND n.dns_query IS NULL
    AND NOT (
      STARTS_WITH(n.dst_ip, '10.')
      OR STARTS_WITH(n.dst_ip, '192.168.')
      OR STARTS_WITH(n.dst_ip, '169.254.')
      OR REGEXP_CONTAINS(n.dst_ip, r'^172\.(1[6-9]|2[0-9]|3[01])\.')
    )
),
baseline AS (
  SELECT DISTINCT o.host, o.dst_ip
  FROM outbound AS o
  CROSS JOIN params AS p
  WHERE o.event_time >= p.baseline_start AND o.event_time < p.start_time
)
SELECT
  o.host,
  o.dst_ip,
  o.dst_port,
  o.protocol,
  COUNT(*) AS flows,
  SUM(o.bytes_sent) AS bytes_sent,
  SUM(o.bytes_received) AS bytes_received,
  MIN(o.event_time) AS first_seen,
  MAX(o.event_time) AS last_seen,
  LOGICAL_AND(b.dst_ip IS NULL) AS new_destination
FROM outbound AS o
CROSS JOIN params AS p
LEFT JOIN baseline AS b ON b.host = o.host AND b.dst_ip = o.dst_ip
WHERE o.event_time >= p.start_time AND o.event_time < p.end_time
GROUP BY o.host, o.dst_ip, o.dst_port, o.protocol
ORDER BY new_destination DESC, bytes_received + bytes_sent DESC
LIMIT 200
