package bqtools

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSQLWithoutValues: literals of every form, comments and unknown names
// leave nothing of their text; keywords, known names and operators stay.
func TestSQLWithoutValues(t *testing.T) {
	known := map[string]bool{"select": true, "from": true, "where": true, "and": true, "or": true, "count": true, "as": true, "timestamp": true,
		"security_logs": true, "auth_events": true, "user": true, "source_ip": true, "event_time": true, "limit": true, "not": true, "in": true, "join": true, "using": true}
	keep := func(w string) bool { return known[strings.ToLower(w)] }
	for _, c := range []struct{ sql, want string }{
		{"SELECT user FROM security_logs.auth_events WHERE user = 'svc_backup'", "SELECT user FROM security_logs.auth_events WHERE user = ?"},
		{"select count(*) as svc_backup_are_tests from `security_logs.auth_events` -- svc_backup rows are tests\nwhere source_ip != \"198.51.100.7\"",
			"select count(*) as name_1 from `security_logs.auth_events` where source_ip != ?"},
		{"SELECT user FROM security_logs.auth_events /* exclude svc_backup */ WHERE event_time >= TIMESTAMP '2026-11-20 00:00:00+00' LIMIT 20",
			"SELECT user FROM security_logs.auth_events WHERE event_time >= TIMESTAMP ? LIMIT ?"},
		{"SELECT user FROM security_logs.auth_events # note: svc_backup\nWHERE source_ip IN (r'198\\.51', b'\\x01', '''multi\nline svc_backup''', 3405803785, 0xCB007109)",
			"SELECT user FROM security_logs.auth_events WHERE source_ip IN(?, ?, ?, ?, ?)"},
		{"SELECT t.user, svc_backup.user FROM security_logs.auth_events AS t JOIN `svc_backup.load_test` AS svc_backup USING (user)",
			"SELECT name_1.user, name_2.user FROM security_logs.auth_events AS name_1 JOIN name_3 AS name_2 USING(user)"},
		{"SELECT user FROM security_logs.auth_events WHERE NOT user IN (SELECT `svc backup` FROM security_logs.auth_events) OR user <> source_ip",
			"SELECT user FROM security_logs.auth_events WHERE NOT user IN(SELECT name_1 FROM security_logs.auth_events) OR user <> source_ip"},
	} {
		got, err := SQLWithoutValues(c.sql, keep)
		require.NoError(t, err, c.sql)
		assert.Equal(t, c.want, got)
		for _, leak := range []string{"svc", "198", "2026", "tests", "exclude", "note", "multi", "3405803785", "CB007109"} {
			assert.NotContains(t, got, leak, c.sql)
		}
	}
	for _, bad := range []string{"SELECT 'unclosed", "SELECT 1 /* unclosed"} {
		_, err := SQLWithoutValues(bad, keep)
		assert.Error(t, err, bad)
	}
}
