-- title: Failed SSH logins by source IP
-- description: Counts failed SSH logins per source IP, most first, with the
--   first and last attempt. Parameters: none.
SELECT
  source_ip,
  COUNT(*) AS failures,
  MIN(event_time) AS first_seen,
  MAX(event_time) AS last_seen
FROM security_logs.auth_events
WHERE event_type = 'ssh_login' AND NOT success
GROUP BY source_ip
ORDER BY failures DESC
