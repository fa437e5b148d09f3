package bqtools

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
)

func TestTableRefs(t *testing.T) {
	for _, tc := range []struct {
		sql         string
		names, ctes []string
	}{
		{"SELECT 1", nil, nil},
		{"SELECT * FROM security_logs.auth_events", []string{"security_logs.auth_events"}, nil},
		{"SELECT * FROM `security_logs.auth_events` AS a", []string{"security_logs.auth_events"}, nil},
		{"SELECT * FROM `security_logs`.`auth_events` a", []string{"security_logs.auth_events"}, nil},
		{"SELECT * FROM security_logs . auth_events", []string{"security_logs.auth_events"}, nil},
		{"SELECT * FROM demo-investigator.security_logs.auth_events", []string{"demo-investigator.security_logs.auth_events"}, nil},
		{"SELECT * FROM `demo-investigator`.security_logs.auth_events", []string{"demo-investigator.security_logs.auth_events"}, nil},
		{"SELECT * FROM `demo-investigator.security_logs`.auth_events", []string{"demo-investigator.security_logs.auth_events"}, nil},
		{"SELECT * FROM my-project-123.ds.t", []string{"my-project-123.ds.t"}, nil},
		{"SELECT * FROM ds.auth_* WHERE _TABLE_SUFFIX > 'a'", []string{"ds.auth_*"}, nil},
		{"SELECT * FROM d.a, d.b AS x, `d.c` y", []string{"d.a", "d.b", "d.c"}, nil},
		{"SELECT * FROM d.a JOIN d.b ON a.x = b.x LEFT OUTER JOIN d.c USING (x, y) CROSS JOIN d.d", []string{"d.a", "d.b", "d.c", "d.d"}, nil},
		{"SELECT * FROM (d.a JOIN d.b USING (x)), d.c", []string{"d.a", "d.b", "d.c"}, nil},
		{"SELECT * FROM ((d.a), d.b)", []string{"d.a", "d.b"}, nil},
		{"SELECT * FROM (UNNEST([1, 2]) AS x, d.b)", []string{"d.b"}, nil},
		{"SELECT * FROM ((SELECT x, y FROM d.a) AS s, d.b)", []string{"d.a", "d.b"}, nil},
		{"SELECT a, b FROM (SELECT x AS a, y AS b FROM d.a), d.b", []string{"d.a", "d.b"}, nil},
		{"SELECT (SELECT MAX(x) FROM d.b), y FROM d.a WHERE z IN (SELECT z FROM d.c)", []string{"d.b", "d.a", "d.c"}, nil},
		{"SELECT x FROM d.a WHERE EXISTS (SELECT 1 FROM d.b WHERE b.x = a.x) GROUP BY x, y ORDER BY x, y", []string{"d.a", "d.b"}, nil},
		{"SELECT 1 FROM d.a UNION ALL SELECT 2 FROM d.b, d.c", []string{"d.a", "d.b", "d.c"}, nil},
		{"WITH p AS (SELECT 1), q AS (SELECT * FROM d.a) SELECT * FROM q CROSS JOIN p", []string{"d.a", "q", "p"}, []string{"p", "q"}},
		{"WITH RECURSIVE t AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT * FROM t", []string{"t", "t"}, []string{"t"}},
		{"SELECT * FROM (WITH x AS (SELECT 1) SELECT * FROM x)", []string{"x"}, []string{"x"}},
		{"SELECT a FROM d.p AS e, UNNEST(e.args) AS a WITH OFFSET AS o, d.q", []string{"d.p", "d.q"}, nil},
		{"SELECT a FROM d.p AS e CROSS JOIN UNNEST(e.args) AS a", []string{"d.p"}, nil},
		{"SELECT a FROM d.p AS e, e.args AS a", []string{"d.p", "e.args"}, nil}, // refused: a path the fallback cannot tell from a table
		{"SELECT EXTRACT(HOUR FROM event_time) AS h, a IS DISTINCT FROM b FROM d.a", []string{"d.a"}, nil},
		{"SELECT EXTRACT(DATE FROM (SELECT MAX(t) FROM d.b)) FROM d.a", []string{"d.b", "d.a"}, nil},
		{"SELECT * FROM d.a FOR SYSTEM_TIME AS OF TIMESTAMP '2026-11-20', d.b TABLESAMPLE SYSTEM (10 PERCENT), d.c", []string{"d.a", "d.b", "d.c"}, nil},
		{"SELECT * FROM d.a WINDOW w AS (PARTITION BY x ORDER BY y), v AS (w)", []string{"d.a"}, nil},
		{"SELECT * FROM ML.PREDICT(MODEL d.m, TABLE d.a), ml.evaluate(MODEL d.m, (SELECT * FROM d.b))", []string{"d.a", "d.b"}, nil},
		{"SELECT * FROM other.tvf(1), d.a", []string{"d.a"}, nil},
		{"SELECT * FROM d.a |> JOIN d.b USING (x) |> SELECT x, y |> LEFT JOIN d.c ON TRUE", []string{"d.a", "d.b", "d.c"}, nil},
		{"SELECT * FROM d.a JOIN d.b ON a.x | 1 = b.x, d.c", []string{"d.a", "d.b", "d.c"}, nil},
		{"SELECT * FROM (FROM d.a |> WHERE x > 1)", []string{"d.a"}, nil},
		{"SELECT * FROM d.a -- FROM other.secrets\n, /* JOIN other.x */ d.b", []string{"d.a", "d.b"}, nil},
		{"SELECT 'FROM other.secrets' FROM d.a", []string{"d.a"}, nil},
	} {
		names, ctes, err := tableRefs(tc.sql)
		require.NoError(t, err, tc.sql)
		assert.Equal(t, tc.names, names, tc.sql)
		assert.Equal(t, tc.ctes, ctes, tc.sql)
	}
}

// testEnv is an env over the tables of configFile, with a client (never
// used to send anything) in clientProject.
func testEnv(t *testing.T, configFile, clientProject string) *env {
	t.Helper()
	cfg, err := LoadConfig(configFile)
	require.NoError(t, err)
	client, err := NewClient(t.Context(), clientProject, "127.0.0.1:1")
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	return newEnv(client, cfg)
}

// The lexical fallback lets through every query the project ships or
// scripts: the example runbooks (over examples/bigquery/tables.yaml), the
// test runbooks, and the queries of the e2e test and of this package's tests.
func TestCheckTablesAcceptsTheProjectsQueries(t *testing.T) {
	examples := testEnv(t, "../../../examples/bigquery/tables.yaml", "demo-investigator")
	rbs, err := LoadRunbooks("../../../examples/bigquery/runbooks")
	require.NoError(t, err)
	require.NotEmpty(t, rbs)
	for _, rb := range rbs {
		assert.NoError(t, checkSQL(rb.SQL, examples.policy()), "runbook %s", rb.Name)
	}

	e := testEnv(t, "testdata/bigquery.yaml", "demo-investigator")
	rbs, err = LoadRunbooks("testdata/runbooks")
	require.NoError(t, err)
	for _, rb := range rbs {
		assert.NoError(t, checkSQL(rb.SQL, e.policy()), "runbook %s", rb.Name)
	}
	for _, sql := range []string{
		// e2e/bigquery_test.go
		"SELECT source_ip, COUNT(*) AS n FROM `security_logs.auth_events` WHERE event_type = 'ssh_failed' AND host = 'web-server-prod-01' GROUP BY source_ip ORDER BY n DESC",
		"SELECT event_time, user FROM `security_logs.auth_events` WHERE event_type = 'ssh_accepted' AND source_ip = '198.51.100.23'",
		// tools_test.go and the tool's own example
		"SELECT attempt, source_ip, geo, event_time FROM security_logs.auth_events ORDER BY attempt",
		"SELECT pid, event_date, args, score FROM security_logs.process_events WHERE pid = 4211",
		"SELECT source_ip, COUNT(*) AS failures FROM security_logs.auth_events WHERE NOT success AND event_time >= TIMESTAMP '2026-11-20 00:00:00' GROUP BY source_ip ORDER BY failures DESC",
		"SELECT 1",
		// other ways to write the configured tables
		"SELECT * FROM `demo-investigator.security_logs.auth_events`",
		"SELECT * FROM demo-investigator.security_logs.auth_events a JOIN `demo-investigator`.security_logs.process_events p ON a.host = p.host",
		"SELECT a FROM security_logs.process_events AS e CROSS JOIN UNNEST(e.args) AS a",
		"WITH recent AS (SELECT * FROM security_logs.auth_events WHERE attempt > 20) SELECT COUNT(*) FROM RECENT",
	} {
		assert.NoError(t, checkSQL(sql, e.policy()), sql)
	}
}

func TestCheckTablesRefusesOtherTables(t *testing.T) {
	e := testEnv(t, "testdata/bigquery.yaml", "demo-investigator")
	const allowed = "(security_logs.auth_events, security_logs.process_events)"
	for sql, name := range map[string]string{
		"SELECT * FROM other_ds.secrets":                                                       "other_ds.secrets",
		"SELECT * FROM `other_ds.secrets`":                                                     "other_ds.secrets",
		"SELECT * FROM `other-project.security_logs.auth_events`":                              "other-project.security_logs.auth_events",
		"SELECT * FROM security_logs.users":                                                    "security_logs.users",
		"SELECT * FROM security_logs.AUTH_EVENTS":                                              "security_logs.AUTH_EVENTS",
		"SELECT * FROM security_logs.auth_*":                                                   "security_logs.auth_*",
		"SELECT * FROM auth_events":                                                            "auth_events",
		"SELECT * FROM security_logs.auth_events a, other_ds.secrets s":                        "other_ds.secrets",
		"SELECT * FROM security_logs.auth_events JOIN other_ds.secrets USING (host)":           "other_ds.secrets",
		"SELECT (SELECT MAX(k) FROM other_ds.secrets) FROM security_logs.auth_events":          "other_ds.secrets",
		"SELECT * FROM security_logs.auth_events WHERE host IN (SELECT h FROM other_ds.hosts)": "other_ds.hosts",
		"WITH secrets AS (SELECT 1) SELECT * FROM other_ds.secrets":                            "other_ds.secrets",
		"WITH `other_ds.secrets` AS (SELECT 1) SELECT * FROM `other_ds.secrets`":               "other_ds.secrets",
		"SELECT * FROM ML.PREDICT(MODEL d.m, TABLE other_ds.secrets)":                          "other_ds.secrets",
		"SELECT EXTRACT(HOUR FROM event_time) FROM security_logs.auth_events, other_ds.x":      "other_ds.x",
	} {
		err := checkSQL(sql, e.policy())
		require.ErrorContains(t, err, "it reads "+name+", which is not one of the tables you may query "+allowed, sql)
	}

	// An array column written as a path gets a hint to use UNNEST.
	err := checkSQL("SELECT a FROM security_logs.process_events AS e, e.args AS a", e.policy())
	require.ErrorContains(t, err, "it reads e.args, which is not one of the tables you may query "+allowed+"; if e.args is an array column, flatten it with UNNEST(e.args)")

	// Tables in another project than the client's: dataset.table would name
	// the client's project's table, so only the project-qualified name passes.
	other := testEnv(t, "testdata/bigquery.yaml", "client-project")
	other.cfg.Project = "demo-investigator"
	require.ErrorContains(t, checkSQL("SELECT * FROM security_logs.auth_events", other.policy()),
		"it reads security_logs.auth_events, which is not one of the tables you may query (`demo-investigator.security_logs.auth_events`, `demo-investigator.security_logs.process_events`)")
	assert.NoError(t, checkSQL("SELECT * FROM `demo-investigator.security_logs.auth_events`", other.policy()))
}

// When BigQuery names the referenced tables, they decide, not the SQL text.
func TestCheckTablesTrustsReferencedTables(t *testing.T) {
	e := testEnv(t, "testdata/bigquery.yaml", "demo-investigator")
	ref := func(project, dataset, table string) *bigquery.Table {
		return &bigquery.Table{ProjectID: project, DatasetID: dataset, TableID: table}
	}

	assert.NoError(t, e.checkTables([]*bigquery.Table{ref("demo-investigator", "security_logs", "process_events")}))
	for _, r := range []*bigquery.Table{
		ref("demo-investigator", "other_ds", "secrets"),
		ref("other-project", "security_logs", "auth_events"),
		ref("demo-investigator", "security_logs", "Auth_Events"),
	} {
		refs := []*bigquery.Table{ref("demo-investigator", "security_logs", "auth_events"), r}
		err := e.checkTables(refs)
		requireRejection(t, err, "it reads "+r.ProjectID+"."+r.DatasetID+"."+r.TableID+", which is not one of the tables you may query")
	}
}

// fakeDryRun answers a dry run as real BigQuery does, with the referenced
// tables of each query, and refuses to run any query for real.
type fakeDryRun map[string][]map[string]string // SQL -> referencedTables

func (f fakeDryRun) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var job struct {
		Configuration struct {
			DryRun bool
			Query  struct{ Query string }
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&job); err != nil || !job.Configuration.DryRun {
		http.Error(w, `{"error":{"code":400,"message":"fake: only dry runs are served"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jobReference":  map[string]any{"projectId": "demo-investigator", "jobId": "dry"},
		"configuration": map[string]any{"dryRun": true, "query": map[string]any{"query": job.Configuration.Query.Query}},
		"status":        map[string]any{"state": "DONE"},
		"statistics": map[string]any{"totalBytesProcessed": "10", "query": map[string]any{
			"statementType": "SELECT", "totalBytesProcessed": "10", "referencedTables": f[job.Configuration.Query.Query],
		}},
	})
}

func TestQueryRefusesReferencedTablesFromTheDryRun(t *testing.T) {
	// secret names a configured table that BigQuery resolves to another
	// (a view, say): only the dry run can tell.
	const secret, allowed = "SELECT s FROM security_logs.process_events", "SELECT host FROM security_logs.auth_events"
	srv := httptest.NewServer(fakeDryRun{
		secret:  {{"projectId": "demo-investigator", "datasetId": "other_ds", "tableId": "secrets"}},
		allowed: {{"projectId": "demo-investigator", "datasetId": "security_logs", "tableId": "auth_events"}},
	})
	t.Cleanup(srv.Close)
	client, err := NewClient(t.Context(), "demo-investigator", srv.Listener.Addr().String(), option.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	cfg, err := LoadConfig("testdata/bigquery.yaml")
	require.NoError(t, err)
	query := runQuery{newEnv(client, cfg)}

	_, err = query.Call(t.Context(), map[string]any{"sql": secret})
	requireRejection(t, err, "query refused: it reads demo-investigator.other_ds.secrets, which is not one of the tables you may query")
	_, err = query.Call(t.Context(), map[string]any{"sql": allowed})
	requireRejection(t, err, "run the query failed: fake: only dry runs are served")
	assert.NotContains(t, err.Error(), "tables you may query", "%q passes the table check", allowed)
}

// The goccy emulator leaves ReferencedTables empty, so locally the lexical
// fallback is what keeps queries to the configured tables.
func TestEmulatorReportsNoReferencedTables(t *testing.T) {
	f := newFixture(t, nil)
	q := f.client.Query("SELECT host FROM security_logs.auth_events JOIN security_logs.process_events USING (host)")
	q.DryRun = true
	job, err := q.Run(t.Context())
	require.NoError(t, err)
	qs, ok := job.LastStatus().Statistics.Details.(*bigquery.QueryStatistics)
	require.True(t, ok)
	assert.Empty(t, qs.ReferencedTables, "the emulator now reports referenced tables: the lexical fallback is no longer the only local guard")
}

func TestQueryRefusesUnconfiguredTablesOnTheEmulator(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Tables = c.Tables[:1] }) // process_events exists but is not configured
	for _, sql := range []string{
		"SELECT pid, command FROM security_logs.process_events",
		"SELECT a.host FROM security_logs.auth_events a JOIN `demo-investigator.security_logs.process_events` p ON a.host = p.host",
		"SELECT host FROM security_logs.auth_events WHERE host IN (SELECT host FROM security_logs.process_events)",
	} {
		_, err := f.call(t, "bigquery_query", map[string]any{"sql": sql})
		requireRejection(t, err, "process_events, which is not one of the tables you may query (security_logs.auth_events)")
		assert.Empty(t, f.log.take(), "nothing was sent: %q", sql)
	}

	// Tables configured in another project: dataset.table names the
	// client's own, which is refused.
	f = newFixture(t, func(c *Config) { c.Project = "other-project" })
	_, err := f.call(t, "bigquery_query", map[string]any{"sql": "SELECT host FROM security_logs.auth_events"})
	requireRejection(t, err, "it reads security_logs.auth_events, which is not one of the tables you may query (`other-project.security_logs.auth_events`")

	// Arrays: a correlated path is refused with a hint, UNNEST runs.
	f = newFixture(t, nil)
	_, err = f.call(t, "bigquery_query", map[string]any{"sql": "SELECT a FROM security_logs.process_events AS e, e.args AS a"})
	requireRejection(t, err, "flatten it with UNNEST(e.args)")
	out := f.mustCall(t, "bigquery_query", map[string]any{"sql": "SELECT a FROM security_logs.process_events AS e CROSS JOIN UNNEST(e.args) AS a WHERE e.pid = 4211"})
	assert.Equal(t, []any{[]any{"-s"}, []any{"http://198.51.100.23/x.sh"}}, out["preview"])
	assert.True(t, strings.HasPrefix(out["note"].(string), "All 2 rows"), out["note"])
}
