-- title: DNS queries by domain with beaconing regularity
-- description: For each queried domain and host in a time window, the number of queries, first and last time, and the average and spread (standard deviation) of the seconds between consecutive queries; many queries at a steady interval to a domain no other host asks for suggest command-and-control beaconing. Edit the time window in the params CTE (and add a domain filter if you like).
WITH params AS (
  SELECT
    TIMESTAMP '2026-11-19 00:00:00+00' AS start_time,
    TIMESTAMP '2026-11-21 06:00:00+00' AS end_time
),
queries AS (
  SELECT
    n.host,
    n.dns_query AS domain,
    n.event_time,
    TIMESTAMP_DIFF(
      n.event_time,
      LAG(n.event_time) OVER (PARTITION BY n.host, n.dns_query ORDER BY n.event_time),
      SECOND) AS gap_seconds
  FROM `security_logs.network_events` AS n
  CROSS JOIN params AS p
  WHERE n.dns_query IS NOT NULL
    AND n.event_time >= p.start_time
    AND n.event_time < p.end_time
)
SELECT
  domain,
  host,
  COUNT(*) AS queries,
  MIN(event_time) AS first_seen,
  MAX(event_time) AS last_seen,
  ROUND(AVG(gap_seconds), 1) AS avg_gap_seconds,
  ROUND(STDDEV(gap_seconds), 1) AS stddev_gap_seconds
FROM queries
GROUP BY domain, host
ORDER BY queries DESC, domain
LIMIT 200
