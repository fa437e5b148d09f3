-- title: Failed then successful SSH logins by source IP
-- description: For each source IP and host, failed and successful SSH logins in a time window, the users tried and who got in; a success after many failures (brute_force_succeeded) suggests a brute force that worked. Edit the time window in the params CTE.
WITH params AS (
  SELECT
    TIMESTAMP '2026-11-19 00:00:00+00' AS start_time,
    TIMESTAMP '2026-11-21 06:00:00+00' AS end_time
),
ssh AS (
  SELECT a.event_time, a.host, a.user, a.source_ip, a.event_type, a.auth_method
  FROM `security_logs.auth_events` AS a
  CROSS JOIN params AS p
  WHERE a.event_time >= p.start_time
    AND a.event_time < p.end_time
    AND a.event_type IN ('ssh_failed', 'ssh_accepted')
    AND a.source_ip IS NOT NULL
),
per_source AS (
  SELECT
    source_ip,
    host,
    COUNTIF(event_type = 'ssh_failed') AS failures,
    COUNTIF(event_type = 'ssh_accepted') AS successes,
    COUNT(DISTINCT IF(event_type = 'ssh_failed', user, NULL)) AS users_tried,
    MIN(IF(event_type = 'ssh_failed', event_time, NULL)) AS first_failure,
    MAX(IF(event_type = 'ssh_failed', event_time, NULL)) AS last_failure,
    MIN(IF(event_type = 'ssh_accepted', event_time, NULL)) AS first_success,
    STRING_AGG(DISTINCT IF(event_type = 'ssh_accepted', CONCAT(user, ' (', auth_method, ')'), NULL), ', ') AS accepted
  FROM ssh
  GROUP BY source_ip, host
)
SELECT
  source_ip,
  host,
  failures,
  successes,
  users_tried,
  first_failure,
  last_failure,
  first_success,
  accepted,
  (failures >= 10 AND successes > 0 AND first_success > first_failure) AS brute_force_succeeded
FROM per_source
WHERE failures > 0
ORDER BY brute_force_succeeded DESC, failures DESC
LIMIT 100
