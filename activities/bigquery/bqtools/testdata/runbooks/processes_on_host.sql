-- title: Processes started on a host
-- description: Lists processes started on one host, newest first. Parameters: replace
-- 'web-server-prod-01' with the host name.
SELECT event_time, pid, command, args
FROM security_logs.process_events
WHERE host = 'web-server-prod-01'  -- the host
ORDER BY event_time DESC;
