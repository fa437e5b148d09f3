package bqtools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"

	"github.com/secops-agent/investigator/internal/size"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/tools"
)

// These tests run the tools against the real goccy/bigquery-emulator,
// started once for the package with testdata/emulator.yaml: two tables in
// security_logs, auth_events (30 rows, with a two-level RECORD column geo)
// and process_events (4 rows, with a REPEATED column).

// The emulator starts on first use (emulator), so that a run that needs
// none, such as each worker of FuzzGuard, starts none.
var (
	emulatorOnce sync.Once
	emulatorHost string
	emulatorErr  error
	emulatorStop func()
)

func emulator(t *testing.T) string {
	t.Helper()
	emulatorOnce.Do(func() {
		emulatorHost, emulatorStop, emulatorErr = testenv.StartBigQuery(testenv.Project, "testdata/emulator.yaml")
	})
	if emulatorErr != nil {
		t.Fatalf("the BigQuery emulator is needed: %v", emulatorErr)
	}
	return emulatorHost
}

func TestMain(m *testing.M) {
	code := m.Run()
	if emulatorStop != nil {
		emulatorStop()
	}
	os.Exit(code)
}

// requestLog is an http.RoundTripper that records every request the
// BigQuery client sends, so tests can tell what reached the emulator.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) RoundTrip(r *http.Request) (*http.Response, error) {
	entry := r.Method + " " + r.URL.Path
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"dryRun":true`)) {
			entry += " (dry run)"
		}
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, entry)
	l.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reqs
	l.reqs = nil
	return r
}

// count returns how many recorded requests contain s.
func count(reqs []string, s string) int {
	n := 0
	for _, r := range reqs {
		if strings.Contains(r, s) {
			n++
		}
	}
	return n
}

type fixture struct {
	client *bigquery.Client
	log    *requestLog
	tools  map[string]tools.Tool
}

// newFixture connects to the emulator through a request log and builds the
// tools from testdata's config and runbooks; adjust may change the config.
func newFixture(t *testing.T, adjust func(*Config)) *fixture {
	t.Helper()
	host := emulator(t)
	cfg, err := LoadConfig("testdata/bigquery.yaml")
	require.NoError(t, err)
	if adjust != nil {
		adjust(&cfg)
	}
	rbs, err := LoadRunbooks("testdata/runbooks")
	require.NoError(t, err)
	log := &requestLog{}
	client, err := NewClient(t.Context(), testenv.Project, host, option.WithHTTPClient(&http.Client{Transport: log}))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	f := &fixture{client: client, log: log, tools: map[string]tools.Tool{}}
	for _, tl := range Tools(client, cfg, rbs) {
		f.tools[tl.Declaration().Name] = tl
	}
	return f
}

// fixtureSession is the session of the fixtures' calls: that of one
// sub-agent, whose handles any worker (any fixture) may read.
const fixtureSession = "test-session"

// call runs a tool and returns its result as generic JSON, as the model
// would see it.
func (f *fixture) call(t *testing.T, name string, args map[string]any) (map[string]any, error) {
	t.Helper()
	tl, ok := f.tools[name]
	require.True(t, ok, "tool %s", name)
	res, err := tl.Call(tools.WithCallInfo(t.Context(), tools.CallInfo{Session: fixtureSession}), args)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m, nil
}

func (f *fixture) mustCall(t *testing.T, name string, args map[string]any) map[string]any {
	t.Helper()
	m, err := f.call(t, name, args)
	require.NoError(t, err, "%s(%v)", name, args)
	return m
}

func (f *fixture) rowCount(t *testing.T, table string) int64 {
	t.Helper()
	it, err := f.client.Query("SELECT COUNT(*) FROM " + table).Read(t.Context())
	require.NoError(t, err)
	var row []bigquery.Value
	require.NoError(t, it.Next(&row))
	return row[0].(int64)
}

func requireRejection(t *testing.T, err error, contains ...string) {
	t.Helper()
	require.Error(t, err)
	require.True(t, tools.IsRejection(err), "want a Rejection (returned to the model), got %T: %v", err, err)
	for _, s := range contains {
		assert.Contains(t, err.Error(), s)
	}
}

func TestToolsOffered(t *testing.T) {
	f := newFixture(t, nil)
	names := func(ts []tools.Tool) []string {
		var out []string
		for _, tl := range ts {
			d := tl.Declaration()
			assert.NotEmpty(t, d.Description, d.Name)
			out = append(out, d.Name)
		}
		return out
	}
	cfg, err := LoadConfig("testdata/bigquery.yaml")
	require.NoError(t, err)
	assert.Equal(t, []string{"bigquery_tables", "bigquery_schema", "bigquery_query", "bigquery_result"}, names(Tools(f.client, cfg, nil)))
	all := Tools(f.client, cfg, []Runbook{{Name: "x", Title: "X", SQL: "SELECT 1"}})
	assert.Equal(t, []string{"bigquery_tables", "bigquery_schema", "bigquery_query", "bigquery_result", "bigquery_runbook"}, names(all))
	reg, err := tools.NewRegistry(all...)
	require.NoError(t, err, "the tools fit the registry")
	assert.Contains(t, reg.Catalog(), "bigquery_query")
}

func TestTablesTool(t *testing.T) {
	f := newFixture(t, nil)
	out := f.mustCall(t, "bigquery_tables", map[string]any{})
	tables := out["tables"].([]any)
	require.Len(t, tables, 2)
	first := tables[0].(map[string]any)
	assert.Equal(t, "security_logs.auth_events", first["table"])
	assert.Contains(t, first["description"], "SSH and sudo")
	assert.NotContains(t, first, "sql_name", "tables in the client's project are named dataset.table")
	assert.Equal(t, "1.0 GiB (1073741824 bytes)", out["scan_limit"])
	assert.Empty(t, f.log.take(), "bigquery_tables needs no request")

	f = newFixture(t, func(c *Config) { c.Project = "other-project" })
	out = f.mustCall(t, "bigquery_tables", nil)
	assert.Equal(t, "`other-project.security_logs.auth_events`", out["tables"].([]any)[0].(map[string]any)["sql_name"])
}

func TestSchemaFlattensNestedFields(t *testing.T) {
	f := newFixture(t, nil)
	out := f.mustCall(t, "bigquery_schema", map[string]any{"table": "security_logs.auth_events"})
	assert.Equal(t, "security_logs.auth_events", out["table"])
	assert.Contains(t, out["description"], "SSH and sudo")
	assert.EqualValues(t, 30, out["row_count"])
	var cols []string
	for _, c := range out["columns"].([]any) {
		m := c.(map[string]any)
		cols = append(cols, fmt.Sprintf("%s %s %s", m["name"], m["type"], m["mode"]))
	}
	assert.Equal(t, []string{
		"event_time TIMESTAMP NULLABLE",
		"host STRING NULLABLE",
		"user STRING NULLABLE",
		"source_ip STRING NULLABLE",
		"event_type STRING NULLABLE",
		"success BOOL NULLABLE",
		"attempt INT64 NULLABLE",
		"geo STRUCT NULLABLE",
		"geo.country STRING NULLABLE",
		"geo.city STRING NULLABLE",
		"geo.coords STRUCT NULLABLE",
		"geo.coords.lat FLOAT64 NULLABLE",
		"geo.coords.lon FLOAT64 NULLABLE",
	}, cols)

	// The project-qualified, quoted form names the same table.
	out = f.mustCall(t, "bigquery_schema", map[string]any{"table": "`demo-investigator.security_logs.process_events`"})
	assert.Equal(t, "security_logs.process_events", out["table"])
	var args map[string]any
	for _, c := range out["columns"].([]any) {
		if c.(map[string]any)["name"] == "args" {
			args = c.(map[string]any)
		}
	}
	assert.Equal(t, map[string]any{"name": "args", "type": "STRING", "mode": "REPEATED"}, args)
}

func TestSchemaRefusesUnconfiguredTable(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Tables = c.Tables[:1] })
	_, err := f.call(t, "bigquery_schema", map[string]any{"table": "security_logs.process_events"})
	requireRejection(t, err, `"security_logs.process_events" is not one of the tables you may use`, "use one of: security_logs.auth_events")
	_, err = f.call(t, "bigquery_schema", map[string]any{"table": "other.secrets"})
	requireRejection(t, err, "use one of: security_logs.auth_events")
	_, err = f.call(t, "bigquery_schema", map[string]any{})
	requireRejection(t, err, `missing required argument "table"`)
	assert.Empty(t, f.log.take(), "a refused table is never looked up")

	// Configured but absent from BigQuery.
	f = newFixture(t, func(c *Config) { c.Tables = append(c.Tables, Table{ID: "security_logs.gone"}) })
	_, err = f.call(t, "bigquery_schema", map[string]any{"table": "security_logs.gone"})
	requireRejection(t, err, "does not exist in BigQuery")
}

// attempts extracts the first column (attempt) of result rows.
func attempts(t *testing.T, rows any) []int {
	t.Helper()
	var out []int
	for _, r := range rows.([]any) {
		out = append(out, int(r.([]any)[0].(float64)))
	}
	return out
}

func TestQueryPreviewAndPaging(t *testing.T) {
	f := newFixture(t, nil)
	out := f.mustCall(t, "bigquery_query", map[string]any{
		"sql":   "SELECT attempt, source_ip, geo, event_time FROM security_logs.auth_events ORDER BY attempt",
		"limit": 7,
	})
	assert.EqualValues(t, 30, out["total_rows"])
	assert.Equal(t, []any{"attempt", "source_ip", "geo", "event_time"}, out["schema"])
	preview := out["preview"].([]any)
	require.Len(t, preview, 7)
	assert.Equal(t, []any{
		float64(1), "198.51.100.23",
		map[string]any{"country": "RU", "city": "Moscow", "coords": map[string]any{"lat": 55.75, "lon": 37.62}},
		"2026-11-20T08:00:07Z",
	}, preview[0], "records become objects, timestamps RFC 3339")
	assert.EqualValues(t, 7, out["next_offset"])
	assert.Contains(t, out["note"], "rows 1-7 of 30")
	handle, _ := out["handle"].(string)
	require.NotEmpty(t, handle)

	reqs := f.log.take()
	assert.Equal(t, 1, count(reqs, "(dry run)"), "one dry run: %v", reqs)
	assert.Equal(t, 2, count(reqs, "POST"), "a dry run and the query job: %v", reqs)

	// Page through the rest: preview + pages hold every row exactly once.
	got := attempts(t, preview)
	next := out["next_offset"]
	pages := 0
	for next != nil {
		page := f.mustCall(t, "bigquery_result", map[string]any{"handle": handle, "offset": next, "limit": 10})
		assert.EqualValues(t, 30, page["total_rows"])
		assert.Equal(t, next, page["offset"])
		assert.Equal(t, out["schema"], page["schema"])
		got = append(got, attempts(t, page["rows"])...)
		next = page["next_offset"]
		pages++
		require.Less(t, pages, 10, "paging does not end")
	}
	assert.Equal(t, 3, pages, "pages of 10 from offset 7: 7-16, 17-26, 27-29")
	want := make([]int, 30)
	for i := range want {
		want[i] = i + 1
	}
	assert.Equal(t, want, got, "every row once, in order")
	assert.Zero(t, count(f.log.take(), "POST"), "paging never runs a query again")

	// A fresh client and fresh tools (as after a worker restart) read the
	// same result by its handle.
	g := newFixture(t, nil)
	page := g.mustCall(t, "bigquery_result", map[string]any{"handle": handle, "offset": 25})
	assert.Equal(t, []int{26, 27, 28, 29, 30}, attempts(t, page["rows"]))
	assert.NotContains(t, page, "next_offset", "no next_offset after the last page")
	assert.Zero(t, count(g.log.take(), "POST"))
}

func TestQueryValuesOfOtherTypes(t *testing.T) {
	f := newFixture(t, nil)
	out := f.mustCall(t, "bigquery_query", map[string]any{
		"sql": "SELECT pid, event_date, args, score FROM security_logs.process_events WHERE pid = 4211",
	})
	assert.Equal(t, []any{[]any{float64(4211), "2026-11-20", []any{"-s", "http://198.51.100.23/x.sh"}, 0.91}}, out["preview"])
	assert.Equal(t, "All 1 rows are in the preview.", out["note"])
	assert.NotContains(t, out, "next_offset")
}

// One huge row (an array of 100,000 numbers, and one of 5,000
// records of 900 bytes, 4.5 MiB) comes back cut to the result size, not
// whole: the row is converted only up to maxRowsJSON.
func TestHugeRowIsCutWhileRead(t *testing.T) {
	f := newFixture(t, nil)
	for _, sql := range []string{
		"SELECT GENERATE_ARRAY(1, 100000) AS a",
		"SELECT ARRAY(SELECT AS STRUCT n, REPEAT('x', 900) AS s FROM UNNEST(GENERATE_ARRAY(1, 5000)) AS n) AS a",
	} {
		out := f.mustCall(t, "bigquery_query", map[string]any{"sql": sql, "limit": 1})
		page := f.mustCall(t, "bigquery_result", map[string]any{"handle": out["handle"], "limit": 1})
		for _, rows := range []any{out["preview"], page["rows"]} {
			b, err := json.Marshal(rows)
			require.NoError(t, err)
			assert.Less(t, len(b), maxRowsJSON+2<<10, sql)
			assert.True(t, strings.Contains(string(b), "the rest of this row"), "the row is cut: %s", sql)
		}
		for _, note := range []any{out["note"], page["note"]} {
			assert.Contains(t, note, "The last row is cut to stay small", "the cut is reported: %s", sql)
		}
	}
}

func TestQueryWithoutRows(t *testing.T) {
	f := newFixture(t, nil)
	out := f.mustCall(t, "bigquery_query", map[string]any{"sql": "SELECT host FROM security_logs.auth_events WHERE attempt > 1000"})
	assert.EqualValues(t, 0, out["total_rows"])
	assert.Equal(t, []any{}, out["preview"])
	assert.Equal(t, "The query returned no rows.", out["note"])
	page := f.mustCall(t, "bigquery_result", map[string]any{"handle": out["handle"]})
	assert.Equal(t, []any{}, page["rows"])
	_, err := f.call(t, "bigquery_result", map[string]any{"handle": out["handle"], "offset": 1})
	requireRejection(t, err, "past the last row", "has 0 rows")
}

func TestQueryRefusalsNeverReachBigQuery(t *testing.T) {
	f := newFixture(t, nil)
	before := f.rowCount(t, "security_logs.auth_events")
	require.EqualValues(t, 30, before)
	f.log.take()
	for sql, reason := range map[string]string{
		"INSERT INTO security_logs.auth_events (host) VALUES ('x')":                                                     "INSERT statement modifies data",
		"DELETE FROM security_logs.auth_events WHERE true":                                                              "DELETE statement modifies data",
		"UPDATE security_logs.auth_events SET host = 'x' WHERE true":                                                    "UPDATE statement modifies data",
		"MERGE security_logs.auth_events t USING security_logs.auth_events s ON false WHEN NOT MATCHED THEN INSERT ROW": "MERGE statement",
		"TRUNCATE TABLE security_logs.auth_events":                                                                      "TRUNCATE statement",
		"CREATE TABLE security_logs.copy AS SELECT * FROM security_logs.auth_events":                                    "CREATE statement",
		"DROP TABLE security_logs.auth_events":                                                                          "DROP statement",
		"SELECT 1; DELETE FROM security_logs.auth_events WHERE true":                                                    "only one statement",
		"WITH x AS (SELECT 1) DELETE FROM security_logs.auth_events WHERE true":                                         "after the WITH clause",
		"/* SELECT */ DELETE FROM security_logs.auth_events WHERE true":                                                 "DELETE statement",
		"SELECT 1 --x\r; DELETE FROM security_logs.auth_events WHERE true":                                              "only one statement",
		"SELECT 1 #x\r\n; DELETE FROM security_logs.auth_events WHERE true":                                             "only one statement",
		"SELECT * FROM EXTERNAL_QUERY('us.conn', 'SELECT * FROM users')":                                                "EXTERNAL_QUERY",
		"SELECT query FROM `region-us`.INFORMATION_SCHEMA.JOBS":                                                         "INFORMATION_SCHEMA",
		"": `argument "sql" must not be empty`,
	} {
		_, err := f.call(t, "bigquery_query", map[string]any{"sql": sql})
		requireRejection(t, err, reason)
		if sql != "" {
			assert.Contains(t, err.Error(), "nothing was sent to BigQuery")
		}
	}
	assert.Empty(t, f.log.take(), "no refused statement reached the emulator, not even as a dry run")
	assert.Equal(t, before, f.rowCount(t, "security_logs.auth_events"), "the table is unchanged")
	_, err := f.client.Dataset("security_logs").Table("copy").Metadata(t.Context())
	assert.Error(t, err, "no table was created")
}

// The emulator's dry run does not estimate a scan the way BigQuery does: it
// executes the query (in a transaction it rolls back) and reports the size
// of the result's cells as TotalBytesProcessed, e.g. 2 bytes for a COUNT(*)
// over the whole table, where real BigQuery reports the bytes of the columns
// it would read. It also ignores MaxBytesBilled. So this test takes the
// emulator's own estimate and checks the refusal logic around it: a limit
// one byte below the estimate refuses (with the estimate and the limit in
// the message, and only the dry run sent), a limit equal to it runs.
func TestQueryOverScanLimit(t *testing.T) {
	const sql = "SELECT * FROM security_logs.auth_events"
	f := newFixture(t, nil)
	dry := f.client.Query(sql)
	dry.DryRun = true
	job, err := dry.Run(t.Context())
	require.NoError(t, err)
	estimate := job.LastStatus().Statistics.TotalBytesProcessed
	require.Positive(t, estimate, "the emulator reports a non-zero estimate for a query with rows")
	t.Logf("the emulator's dry-run estimate for %q: %d bytes", sql, estimate)

	f = newFixture(t, func(c *Config) { c.MaxScanBytes = estimate - 1 })
	_, err = f.call(t, "bigquery_query", map[string]any{"sql": sql})
	requireRejection(t, err,
		fmt.Sprintf("the query would scan %s, over the %s limit", size.Bytes(estimate), size.Bytes(estimate-1)),
		"add a time filter")
	reqs := f.log.take()
	assert.Equal(t, []string{"POST /projects/demo-investigator/jobs (dry run)"}, reqs, "only the dry run was sent")

	f = newFixture(t, func(c *Config) { c.MaxScanBytes = 1 })
	_, err = f.call(t, "bigquery_query", map[string]any{"sql": sql})
	requireRejection(t, err, "over the 1 bytes limit")

	// BigQuery bills at least 10 MiB for each table read: a limit under
	// that refuses a query that scans less, one at it runs.
	require.Less(t, estimate, int64(minBillPerTable))
	f = newFixture(t, func(c *Config) { c.MaxScanBytes = minBillPerTable - 1 })
	_, err = f.call(t, "bigquery_query", map[string]any{"sql": sql})
	requireRejection(t, err, "which BigQuery bills as 10.0 MiB (10485760 bytes) (whole MiB, and at least 10 MiB for each of the 1 tables it reads), over the 10.0 MiB (10485759 bytes) limit")

	f = newFixture(t, func(c *Config) { c.MaxScanBytes = minBillPerTable })
	out := f.mustCall(t, "bigquery_query", map[string]any{"sql": sql, "limit": 0})
	assert.EqualValues(t, 30, out["total_rows"])
	assert.Equal(t, []any{}, out["preview"])
	assert.EqualValues(t, 0, out["next_offset"], "limit 0: nothing previewed, paging starts at 0")
	assert.EqualValues(t, estimate, out["bytes_processed"])
}

func TestQueryErrorsGoBackToTheModel(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.call(t, "bigquery_query", map[string]any{"sql": "SELECT no_such_column FROM security_logs.auth_events"})
	requireRejection(t, err, "dry run of the query failed", "no_such_column")
	_, err = f.call(t, "bigquery_query", map[string]any{"sql": "SELECT * FROM security_logs.missing"})
	requireRejection(t, err, "security_logs.missing")
	_, err = f.call(t, "bigquery_query", map[string]any{"sql": "SELECT 1", "limit": 500})
	requireRejection(t, err, `argument "limit" must be a whole number from 0 to 100`)
	reqs := f.log.take()
	assert.Zero(t, count(reqs, "POST")-count(reqs, "(dry run)"), "a query that fails its dry run is not run: %v", reqs)
}

func TestResultErrors(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.call(t, "bigquery_result", map[string]any{"handle": sessionPrefix(fixtureSession) + "no_such_job"})
	requireRejection(t, err, "no query result for handle", "run the query again")
	_, err = f.call(t, "bigquery_result", map[string]any{"handle": "not a handle"})
	requireRejection(t, err, "not one that bigquery_query returned")
	out := f.mustCall(t, "bigquery_query", map[string]any{"sql": "SELECT attempt FROM security_logs.auth_events", "limit": 1})
	_, err = f.call(t, "bigquery_result", map[string]any{"handle": out["handle"], "offset": 30})
	requireRejection(t, err, "offset 30 is past the last row: the result has 30 rows")
	_, err = f.call(t, "bigquery_result", map[string]any{"handle": out["handle"], "limit": 201})
	requireRejection(t, err, `argument "limit" must be a whole number from 1 to 200`)
}

func TestResultRowsCappedByMaxResultRows(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxResultRows = 12 })
	out := f.mustCall(t, "bigquery_query", map[string]any{"sql": "SELECT attempt FROM security_logs.auth_events ORDER BY attempt", "limit": 5})
	assert.EqualValues(t, 30, out["total_rows"])
	assert.Contains(t, out["note"], "Only the first 12 of the 30 rows can be paged")
	page := f.mustCall(t, "bigquery_result", map[string]any{"handle": out["handle"], "offset": 10, "limit": 10})
	assert.Equal(t, []int{11, 12}, attempts(t, page["rows"]))
	assert.NotContains(t, page, "next_offset")
	_, err := f.call(t, "bigquery_result", map[string]any{"handle": out["handle"], "offset": 12})
	requireRejection(t, err, "of which the first 12 can be paged")
}

func TestRunbookTool(t *testing.T) {
	f := newFixture(t, nil)
	list := f.mustCall(t, "bigquery_runbook", nil)
	assert.Equal(t, []any{
		map[string]any{"name": "failed_ssh_by_ip", "title": "Failed SSH logins by source IP",
			"description": "Counts failed SSH logins per source IP, most first, with the first and last attempt. Parameters: none."},
		map[string]any{"name": "processes_on_host", "title": "Processes started on a host",
			"description": "Lists processes started on one host, newest first. Parameters: replace 'web-server-prod-01' with the host name."},
	}, list["runbooks"])

	rb := f.mustCall(t, "bigquery_runbook", map[string]any{"name": "failed_ssh_by_ip"})
	assert.Equal(t, "Failed SSH logins by source IP", rb["title"])
	sql := rb["sql"].(string)
	assert.True(t, strings.HasPrefix(sql, "SELECT"), sql)

	// The model then runs the runbook's SQL.
	out := f.mustCall(t, "bigquery_query", map[string]any{"sql": sql})
	assert.EqualValues(t, 3, out["total_rows"])
	assert.Equal(t, []any{"source_ip", "failures", "first_seen", "last_seen"}, out["schema"])
	var failures float64
	for _, r := range out["preview"].([]any) {
		failures += r.([]any)[1].(float64)
	}
	assert.EqualValues(t, 24, failures, "24 of the 25 SSH logins failed")

	_, err := f.call(t, "bigquery_runbook", map[string]any{"name": "nope"})
	requireRejection(t, err, `no runbook named "nope"`, "failed_ssh_by_ip, processes_on_host")
}

func TestNewClientNeedsAProjectForTheEmulator(t *testing.T) {
	_, err := NewClient(context.Background(), "", "127.0.0.1:1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "project ID is required")
}

func TestEmulatorHarness(t *testing.T) {
	t.Run("missing from the cache", func(t *testing.T) {
		t.Setenv("BIGQUERY_EMULATOR", "")
		t.Setenv("XDG_CACHE_HOME", t.TempDir())
		_, err := testenv.BigQueryEmulator()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "go tool task setup")
		_, _, err = testenv.StartBigQuery(testenv.Project, "")
		require.Error(t, err)
	})
	t.Run("not executable", func(t *testing.T) {
		p := writeFile(t, t.TempDir(), "bigquery-emulator", "x")
		t.Setenv("BIGQUERY_EMULATOR", p)
		_, err := testenv.BigQueryEmulator()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "BIGQUERY_EMULATOR")
		assert.Contains(t, err.Error(), "not executable")
	})
	emulator(t)
	t.Run("missing data file", func(t *testing.T) {
		_, _, err := testenv.StartBigQuery(testenv.Project, "testdata/none.yaml")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "does not exist")
	})
	t.Run("bad data file", func(t *testing.T) {
		p := writeFile(t, t.TempDir(), "bad.yaml", "projects:\n- id: p\n  datasets:\n  - id: d\n    tables:\n    - id: t\n      columns: [{name: x, type: NOPE}]\n")
		_, _, err := testenv.StartBigQuery(testenv.Project, p)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "exited before it was ready")
	})
	t.Run("start and stop", func(t *testing.T) {
		host, stop, err := testenv.StartBigQuery("demo-other", "")
		require.NoError(t, err)
		resp, err := http.Get("http://" + host + "/bigquery/v2/projects/demo-other/datasets")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		stop()
		stop() // harmless
		_, err = http.Get("http://" + host + "/bigquery/v2/projects/demo-other/datasets")
		assert.Error(t, err, "nothing answers after stop")
	})
}
