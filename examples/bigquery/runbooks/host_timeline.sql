-- title: Timeline of one host around a suspicious login
-- description: Logins, sudo, process starts and network connections of one host in a time window, merged in time order, one line per event; run it from a suspicious login onwards to see what the session did (commands, downloads, persistence, outbound connections, DNS). Edit the host and the time window in the params CTE; keep the window short (an hour or two).
WITH params AS (
  SELECT
    'web-server-prod-01' AS host,
    TIMESTAMP '2026-11-20 08:14:00+00' AS start_time,
    TIMESTAMP '2026-11-20 09:15:00+00' AS end_time
)
SELECT event_time, source, actor, detail
FROM (
  SELECT
    a.event_time,
    'auth' AS source,
    a.user AS actor,
    CONCAT(a.event_type, IFNULL(CONCAT(' from ', a.source_ip), ''), ': ', IFNULL(a.message, '')) AS detail
  FROM `security_logs.auth_events` AS a
  CROSS JOIN params AS p
  WHERE a.host = p.host AND a.event_time >= p.start_time AND a.event_time < p.end_time
  UNION ALL
  SELECT
    e.event_time,
    'process' AS source,
    e.user AS actor,
    CONCAT('pid ', CAST(e.pid AS STRING), ' <- ', IFNULL(e.parent_process, '?'), ' ', CAST(e.ppid AS STRING), ': ', e.command_line) AS detail
  FROM `security_logs.process_events` AS e
  CROSS JOIN params AS p
  WHERE e.host = p.host AND e.event_time >= p.start_time AND e.event_time < p.end_time
  UNION ALL
  SELECT
    n.event_time,
    'network' AS source,
    CAST(NULL AS STRING) AS actor,
    CONCAT(n.direction, ' ', n.protocol, ' ', n.src_ip, ':', CAST(n.src_port AS STRING), ' -> ', n.dst_ip, ':', CAST(n.dst_port AS STRING),
      IFNULL(CONCAT(' dns ', n.dns_query), ''),
      ' sent ', CAST(n.bytes_sent AS STRING), ' B, received ', CAST(n.bytes_received AS STRING), ' B') AS detail
  FROM `security_logs.network_events` AS n
  CROSS JOIN params AS p
  WHERE n.host = p.host AND n.event_time >= p.start_time AND n.event_time < p.end_time
)
ORDER BY event_time, source
LIMIT 500
