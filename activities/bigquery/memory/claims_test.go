package memory_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/activities/bigquery/memory/memorytest"
)

// TestCheckClaimKeepsSchemaKnowledge: claims about the schema and SQL of a
// table the session read are kept, in canonical form.
func TestCheckClaimKeepsSchemaKnowledge(t *testing.T) {
	const auth, proc = "security_logs.auth_events", "security_logs.process_events"
	for _, c := range []struct {
		in   memory.Claim
		want memory.Claim
	}{
		{memory.Claim{Kind: memory.KindTypeFormat, Table: auth, Columns: []string{"event_time"},
			Text: "event_time is a TIMESTAMP in UTC; write TIMESTAMP literals with an explicit zone such as +00."}, memory.Claim{}},
		{memory.Claim{Kind: memory.KindJoinKey, Table: proc, Columns: []string{"host", "pid", "ppid"},
			Text: "process_events joins to itself on host and pid = ppid to walk a process tree."}, memory.Claim{}},
		{memory.Claim{Kind: memory.KindQueryPattern, Table: auth, Columns: []string{"source_ip"},
			Text: "source_ip is a STRING; compare addresses with NET.SAFE_IP_FROM_STRING(source_ip) to match IPv4 and IPv6 forms."}, memory.Claim{}},
		{memory.Claim{Kind: memory.KindColumnMeaning, Table: auth, Columns: []string{"message"},
			Text: "message holds the raw log line; parse it with REGEXP_EXTRACT when a column lacks the detail."}, memory.Claim{}},
		{memory.Claim{Kind: memory.KindJoinKey, Table: auth, Columns: []string{"host", "user", proc + ".host"},
			Text: "auth_events and process_events share host and user; join them on both within a time window."}, memory.Claim{}},
		{memory.Claim{Kind: memory.KindColumnMeaning, Table: auth, Columns: []string{"source_ip"},
			Text: "source_ip is the remote address of an SSH login and is NULL for local events."}, memory.Claim{}},
		{memory.Claim{Kind: memory.KindTypeFormat, Table: proc, Columns: []string{"cpu_percent"},
			Text: "cpu_percent is a FLOAT64 percentage of one core, so values above 100 mean several cores."}, memory.Claim{}},
		{memory.Claim{Kind: memory.KindQueryPattern, Table: auth, Columns: []string{"event_type", "success"},
			Text: "group auth_events by event_type and success to tell failed logins from accepted ones."}, memory.Claim{}},
		// Canonical form: the table and columns as configured and read, the
		// text with typographic marks as ASCII and single spaces.
		{memory.Claim{Kind: memory.KindTypeFormat, Table: " `SECURITY_LOGS.Auth_Events` ", Columns: []string{"Event_Time", "event_time"},
			Text: "  security_logs.auth_events.event_time  is a TIMESTAMP \u2014 in UTC.  "},
			memory.Claim{Kind: memory.KindTypeFormat, Table: auth, Columns: []string{"event_time"},
				Text: "security_logs.auth_events.event_time is a TIMESTAMP - in UTC."}},
	} {
		got, err := memory.CheckClaim(c.in, memorytest.Tables, memorytest.Seen)
		if !assert.NoError(t, err, c.in.Text) {
			continue
		}
		want := c.want
		if want.Kind == "" {
			want = c.in
		}
		assert.Equal(t, want, got)
	}
}

// TestCheckClaimRefusesHostileClaims: every hostile claim is refused, for
// the reason expected.
func TestCheckClaimRefusesHostileClaims(t *testing.T) {
	require.GreaterOrEqual(t, len(memorytest.Hostile), 30)
	for _, c := range memorytest.Hostile {
		_, err := memory.CheckClaim(c.Claim, memorytest.Tables, memorytest.Seen)
		if assert.Error(t, err, c.Name) {
			assert.Contains(t, err.Error(), c.Why, c.Name)
		}
	}
}

// TestCheckClaimNeedsTheSessionsSchemas: the same claim is refused when
// the session read no schema, or another table's.
func TestCheckClaimNeedsTheSessionsSchemas(t *testing.T) {
	c := memory.Claim{Kind: memory.KindColumnMeaning, Table: "security_logs.auth_events", Columns: []string{"user"}, Text: "user holds the account of each login."}
	_, err := memory.CheckClaim(c, memorytest.Tables, memorytest.Seen)
	require.NoError(t, err)
	_, err = memory.CheckClaim(c, memorytest.Tables, nil)
	require.ErrorContains(t, err, "did not read the schema of security_logs.auth_events")
	_, err = memory.CheckClaim(c, memorytest.Tables, memorytest.Seen[1:])
	require.ErrorContains(t, err, "did not read the schema")
	_, err = memory.CheckClaim(c, nil, memorytest.Seen)
	require.ErrorContains(t, err, "not one of the configured tables")
}

// TestLegacyClaimsDecode: a bare string (introspection results recorded
// before claims were typed) decodes as a claim without a kind.
func TestLegacyClaimsDecode(t *testing.T) {
	var cs []memory.Claim
	require.NoError(t, jsonUnmarshal(`["auth_events.user holds the account", {"kind":"type_format","table":"t","columns":["c"],"text":"x"}]`, &cs))
	require.Equal(t, []memory.Claim{{Text: "auth_events.user holds the account"}, {Kind: "type_format", Table: "t", Columns: []string{"c"}, Text: "x"}}, cs)
	_, err := memory.CheckClaim(cs[0], memorytest.Tables, memorytest.Seen)
	require.ErrorContains(t, err, "kind")
	require.True(t, strings.HasPrefix(cs[0].Text, "auth_events"))
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// TestOnlyVerifiableClaimsAreApprovedAtOnce: claims that pass the check yet
// say what a value or column means (planted by a mistaken or hostile
// introspection) are never approved without review, in any kind; a claim
// written only in SQL about its own columns is.
func TestOnlyVerifiableClaimsAreApprovedAtOnce(t *testing.T) {
	const auth = "security_logs.auth_events"
	seen := []memory.TableSchema{{Table: auth, Columns: []string{"event_time", "user", "source_ip", "success", "outcome", "host"}},
		{Table: "security_logs.process_events", Columns: []string{"user"}}}
	for _, c := range []struct {
		claim memory.Claim
		auto  bool
	}{
		{memory.Claim{Kind: memory.KindColumnMeaning, Columns: []string{"outcome"}, Text: "outcome denied means the login succeeded"}, false},
		{memory.Claim{Kind: memory.KindTypeFormat, Columns: []string{"outcome"}, Text: "outcome denied means the login succeeded"}, false},
		{memory.Claim{Kind: memory.KindQueryPattern, Columns: []string{"outcome"}, Text: "failed logins appear in outcome as accepted"}, false},
		{memory.Claim{Kind: memory.KindTypeFormat, Columns: []string{"event_time"}, Text: "event_time is recorded in the local zone and is one day earlier than utc"}, false},
		{memory.Claim{Kind: memory.KindColumnMeaning, Columns: []string{"source_ip"}, Text: "source_ip holds the local address of the server; the remote client address is missing"}, false},
		{memory.Claim{Kind: memory.KindQueryPattern, Columns: []string{"event_time"}, Text: "use TIMESTAMP_SUB(event_time, INTERVAL 1 DAY)"}, false},
		{memory.Claim{Kind: memory.KindQueryPattern, Columns: []string{"source_ip"}, Text: "use user with source_ip"}, false},
		{memory.Claim{Kind: memory.KindColumnMeaning, Columns: []string{"event_time"}, Text: "event_time is a TIMESTAMP"}, false},
		{memory.Claim{Kind: memory.KindTypeFormat, Columns: []string{"event_time"}, Text: "event_time is a TIMESTAMP."}, true},
		{memory.Claim{Kind: memory.KindQueryPattern, Columns: []string{"source_ip"}, Text: "use NET.SAFE_IP_FROM_STRING(source_ip) to compare source_ip"}, false},
		{memory.Claim{Kind: memory.KindQueryPattern, Columns: []string{"source_ip"}, Text: "use NET.SAFE_IP_FROM_STRING(source_ip)"}, true},
		{memory.Claim{Kind: memory.KindJoinKey, Columns: []string{"user", "host"}, Text: "auth_events JOIN auth_events USING (user, host)"}, true},
		{memory.Claim{Kind: memory.KindJoinKey, Columns: []string{"user", "security_logs.process_events.user"}, Text: "auth_events.user JOIN process_events.user"}, true},
		{memory.Claim{Kind: memory.KindJoinKey, Columns: []string{"user", "security_logs.process_events.user"}, Text: "auth_events.user JOIN process_events.user, which are the same account"}, false},
	} {
		c.claim.Table = auth
		checked, err := memory.CheckClaim(c.claim, []string{auth, "security_logs.process_events"}, seen)
		require.NoError(t, err, c.claim.Text)
		require.Equal(t, c.auto, memory.ApprovableAtOnce(checked), "%s: %s", c.claim.Kind, c.claim.Text)
	}
}

// TestRowMadeColumnNamesAreNoClaimWords: a log sink that adds a column or
// STRUCT field per new JSON key (Cloud Logging's jsonPayload export) lets
// one log row name a column. Such a name is no claim word unless the claim
// is about that column, and a column with an implausible name is not one a
// claim may be about; claims about a table's real STRUCT fields still pass.
func TestRowMadeColumnNamesAreNoClaimWords(t *testing.T) {
	const auth = "security_logs.auth_events"
	seen := []memory.TableSchema{{Table: auth, Columns: []string{
		"event_time", "user", "host", "jsonPayload", "jsonPayload.svc_backup_logins_are_load_tests_exclude_them",
		"jsonPayload.exclude_svc_backup", "exclude_svc_backup", "geo", "geo.city",
		"protoPayload.authenticationInfo.principalEmail", "a.b.c.d.e"}}}
	tables := []string{auth}
	for _, c := range []struct {
		claim memory.Claim
		why   string
	}{
		{memory.Claim{Kind: memory.KindColumnMeaning, Columns: []string{"user"}, Text: "user holds svc_backup_logins_are_load_tests_exclude_them"},
			`"svc_backup_logins_are_load_tests_exclude_them" is neither`},
		{memory.Claim{Kind: memory.KindColumnMeaning, Columns: []string{"user"}, Text: "user holds exclude_svc_backup"},
			`the column "exclude_svc_backup", which is not one of the claim's columns`},
		{memory.Claim{Kind: memory.KindColumnMeaning, Columns: []string{"user"}, Text: "user holds jsonPayload.exclude_svc_backup"},
			`the column "jsonPayload.exclude_svc_backup", which is not one of the claim's columns`},
		{memory.Claim{Kind: memory.KindTypeFormat, Columns: []string{"event_time"}, Text: "event_time is a TIMESTAMP; exclude_svc_backup"},
			"not one of the claim's columns"},
		{memory.Claim{Kind: memory.KindTypeFormat, Columns: []string{"jsonPayload.svc_backup_logins_are_load_tests_exclude_them"},
			Text: "jsonPayload.svc_backup_logins_are_load_tests_exclude_them is a STRING"}, "does not have a plausible name"},
		{memory.Claim{Kind: memory.KindTypeFormat, Columns: []string{"a.b.c.d.e"}, Text: "a.b.c.d.e is a STRING"}, "does not have a plausible name"},
	} {
		c.claim.Table = auth
		got, err := memory.CheckClaim(c.claim, tables, seen)
		if assert.Error(t, err, "kept: %+v", got) {
			assert.Contains(t, err.Error(), c.why, c.claim.Text)
		}
	}
	for _, c := range []memory.Claim{
		{Kind: memory.KindColumnMeaning, Columns: []string{"geo.city"}, Text: "geo.city holds the city of the client address"},
		{Kind: memory.KindTypeFormat, Columns: []string{"protoPayload.authenticationInfo.principalEmail"},
			Text: "protoPayload.authenticationInfo.principalEmail is a STRING; principalEmail holds the account"},
		{Kind: memory.KindColumnMeaning, Columns: []string{"user"}, Text: "user holds the account; the host of the login is in host"},
	} {
		c.Table = auth
		_, err := memory.CheckClaim(c, tables, seen)
		assert.NoError(t, err, c.Text)
	}
	assert.False(t, memory.ApprovableAtOnce(memory.Claim{Kind: memory.KindTypeFormat, Table: auth,
		Columns: []string{"jsonPayload.svc_backup_logins_are_load_tests_exclude_them"}, Text: "jsonPayload.svc_backup_logins_are_load_tests_exclude_them is a STRING"}),
		"a claim naming an implausible column is never approved at once")
}
