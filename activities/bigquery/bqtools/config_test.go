package bqtools

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/googleapi"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/tools"
)

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func TestLoadConfig(t *testing.T) {
	cfg, err := LoadConfig("testdata/bigquery.yaml")
	require.NoError(t, err)
	assert.Equal(t, "demo-investigator", cfg.Project)
	assert.Equal(t, int64(1<<30), cfg.MaxScanBytes)
	assert.Equal(t, 10000, cfg.MaxResultRows)
	require.Len(t, cfg.Tables, 2)
	assert.Equal(t, "security_logs.auth_events", cfg.Tables[0].ID)
	assert.Contains(t, cfg.Tables[0].Description, "SSH and sudo")

	dir := t.TempDir()
	cfg, err = LoadConfig(writeFile(t, dir, "min.yaml", "tables:\n  - table: logs.events\n"))
	require.NoError(t, err)
	assert.Equal(t, "", cfg.Project, "an empty project means the client's")
	assert.Equal(t, DefaultMaxScanBytes, cfg.MaxScanBytes)
	assert.Equal(t, DefaultMaxResultRows, cfg.MaxResultRows)
	assert.Equal(t, 60*time.Second, cfg.JobTimeout, "the default job timeout")
	assert.Empty(t, cfg.AllowedTableFunctions, "no table function is allowed by default")

	cfg, err = LoadConfig(writeFile(t, dir, "fns.yaml", "job_timeout: 90s\nallowed_table_functions: [security_logs.recent_logins, APPENDS]\ntables:\n  - table: logs.events\n"))
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, cfg.JobTimeout)
	assert.Equal(t, []string{"security_logs.recent_logins", "APPENDS"}, cfg.AllowedTableFunctions)
	cfg, err = LoadConfig(writeFile(t, dir, "longest.yaml", "job_timeout: 4m\ntables:\n  - table: logs.events\n"))
	require.NoError(t, err, "a minute below the attempt is the longest")
	assert.Equal(t, MaxJobTimeout, cfg.JobTimeout)
}

func TestLoadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, body, want string }{
		{"empty.yaml", "", "no tables are configured"},
		{"notables.yaml", "project: p\ntables: []\n", "no tables are configured"},
		{"bad.yaml", "tables: [\n", "not valid YAML"},
		{"unknown.yaml", "max_scan_byte: 10\ntables:\n  - table: a.b\n", `line 1: unknown field "max_scan_byte"`},
		// The value, maybe the start of a pasted secret, is not quoted; one line.
		{"secret.yaml", "max_scan_bytes: sk-live-0123456789\nbogus: 1\ntables:\n  - table: a.b\n", `is not valid YAML for this format: line 1: a !!str value where int64 belongs; line 2: unknown field "bogus"`},
		{"wrongtype.yaml", "max_scan_bytes: lots\ntables:\n  - table: a.b\n", "not valid YAML"},
		{"nodot.yaml", "tables:\n  - table: auth_events\n", `table "auth_events" is not of the form dataset.table`},
		{"threeparts.yaml", "tables:\n  - table: p.ds.t\n", `table "p.ds.t" is not of the form dataset.table`},
		{"emptypart.yaml", "tables:\n  - table: ds.\n", "not of the form dataset.table"},
		{"baddataset.yaml", "tables:\n  - table: my-ds.t\n", "not of the form dataset.table"},
		{"dup.yaml", "tables:\n  - table: a.b\n  - table: a.b\n", "listed twice"},
		{"negative.yaml", "max_scan_bytes: -1\ntables:\n  - table: a.b\n", "must not be negative"},
		{"negrows.yaml", "max_result_rows: -5\ntables:\n  - table: a.b\n", "must not be negative"},
		{"timeout.yaml", "job_timeout: soon\ntables:\n  - table: a.b\n", "not valid YAML"},
		{"negtimeout.yaml", "job_timeout: -1s\ntables:\n  - table: a.b\n", "job_timeout must be a positive duration"},
		// Above the attempt a job would always be cancelled and run again.
		{"longtimeout.yaml", "job_timeout: 10m\ntables:\n  - table: a.b\n", "job_timeout must be at most 4m0s, so that a query job ends within the 5m0s each BigQuery tool call may take; got 10m0s"},
		{"attempttimeout.yaml", "job_timeout: 5m\ntables:\n  - table: a.b\n", "job_timeout must be at most 4m0s"},
		{"fnname.yaml", "allowed_table_functions: [p.ds.fn]\ntables:\n  - table: a.b\n", `"p.ds.fn" is neither dataset.function nor a built-in table function's name`},
		{"fnml.yaml", "allowed_table_functions: [ML.PREDICT]\ntables:\n  - table: a.b\n", "ML.PREDICT cannot be allowed: ML.PREDICT calls a BigQuery ML model"},
		{"fnext.yaml", "allowed_table_functions: [external_query]\ntables:\n  - table: a.b\n", "external_query cannot be allowed: EXTERNAL_QUERY sends SQL"},
		{"fnvec.yaml", "allowed_table_functions: [VECTOR_SEARCH]\ntables:\n  - table: a.b\n", "VECTOR_SEARCH cannot be allowed"},
		{"fndup.yaml", "allowed_table_functions: [d.f, d.f]\ntables:\n  - table: a.b\n", "d.f is listed twice"},
	} {
		p := writeFile(t, dir, tc.name, tc.body)
		_, err := LoadConfig(p)
		if assert.Error(t, err, tc.name) {
			assert.Contains(t, err.Error(), tc.want, tc.name)
			assert.Contains(t, err.Error(), p, "the error names the file")
			assert.NotContains(t, err.Error(), "sk-", tc.name)
			assert.NotContains(t, err.Error(), "\n", tc.name)
		}
	}
	_, err := LoadConfig(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.yaml does not exist")
}

func TestLoadRunbooks(t *testing.T) {
	rbs, err := LoadRunbooks("testdata/runbooks")
	require.NoError(t, err)
	require.Len(t, rbs, 2, "only *.sql files count")
	assert.Equal(t, "failed_ssh_by_ip", rbs[0].Name)
	assert.Equal(t, "Failed SSH logins by source IP", rbs[0].Title)
	assert.Equal(t, "Counts failed SSH logins per source IP, most first, with the first and last attempt. Parameters: none.", rbs[0].Description)
	assert.True(t, len(rbs[0].SQL) > 0 && rbs[0].SQL[:6] == "SELECT", "the SQL starts after the header: %q", rbs[0].SQL)
	assert.NotContains(t, rbs[0].SQL, "title:")
	assert.Equal(t, "processes_on_host", rbs[1].Name)
	assert.Equal(t, "Lists processes started on one host, newest first. Parameters: replace 'web-server-prod-01' with the host name.", rbs[1].Description)
	assert.Contains(t, rbs[1].SQL, "-- the host", "comments inside the SQL stay")

	rbs, err = LoadRunbooks(filepath.Join(t.TempDir(), "none"))
	require.NoError(t, err, "a missing directory means no runbooks")
	assert.Empty(t, rbs)
}

func TestLoadRunbooksErrors(t *testing.T) {
	for _, tc := range []struct{ file, body, want string }{
		{"untitled.sql", "-- description: no title here\nSELECT 1\n", "no title"},
		{"plain.sql", "SELECT 1\n", "no title"},
		{"nosql.sql", "-- title: Nothing\n-- description: header only\n", "no SQL"},
		{"dml.sql", "-- title: Sneaky\nDELETE FROM t WHERE true\n", "its SQL is refused: a DELETE statement"},
		{"multi.sql", "-- title: Two\nSELECT 1; SELECT 2\n", "only one statement"},
	} {
		dir := t.TempDir()
		writeFile(t, dir, "good.sql", "-- title: Good\nSELECT 1\n")
		writeFile(t, dir, tc.file, tc.body)
		_, err := LoadRunbooks(dir)
		if assert.Error(t, err, tc.file) {
			assert.Contains(t, err.Error(), tc.want, tc.file)
			assert.Contains(t, err.Error(), filepath.Join(dir, tc.file), "the error names the file")
		}
	}
	notDir := writeFile(t, t.TempDir(), "file", "x")
	_, err := LoadRunbooks(notDir)
	assert.Error(t, err, "a file where the directory should be is an error")
}

func TestParseRunbookHeader(t *testing.T) {
	rb, err := parseRunbook("x", "\n-- Maintainer notes: ignored before any key\n-- TITLE:  Spaced title  \n--\n-- a plain comment after a blank comment line\n-- Description: first\n-- second line\n\nWITH a AS (SELECT 1) SELECT * FROM a")
	require.NoError(t, err)
	assert.Equal(t, "Spaced title", rb.Title)
	assert.Equal(t, "first second line", rb.Description)
	assert.Equal(t, "WITH a AS (SELECT 1) SELECT * FROM a", rb.SQL)
}

func TestJSONValue(t *testing.T) {
	rat := big.NewRat(314, 100)
	geo := &bigquery.FieldSchema{Name: "geo", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{
		{Name: "city", Type: bigquery.StringFieldType},
		{Name: "coords", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{
			{Name: "lat", Type: bigquery.FloatFieldType}, {Name: "lon", Type: bigquery.FloatFieldType},
		}},
	}}
	hops := &bigquery.FieldSchema{Name: "hops", Type: bigquery.RecordFieldType, Repeated: true, Schema: bigquery.Schema{
		{Name: "ip", Type: bigquery.StringFieldType},
	}}
	long := make([]byte, 3000)
	for i := range long {
		long[i] = 'x'
	}
	for _, tc := range []struct {
		v    bigquery.Value
		f    *bigquery.FieldSchema
		want string
	}{
		{nil, nil, `null`},
		{true, nil, `true`},
		{int64(42), nil, `42`},
		{1.5, nil, `1.5`},
		{math.NaN(), nil, `"NaN"`},
		{math.Inf(-1), nil, `"-Infinity"`},
		{"web-01", nil, `"web-01"`},
		{[]byte("hi"), nil, `"aGk="`},
		{time.Date(2026, 11, 20, 8, 5, 31, 500, time.FixedZone("X", 3600)), nil, `"2026-11-20T07:05:31.0000005Z"`},
		{civil.Date{Year: 2026, Month: 11, Day: 20}, nil, `"2026-11-20"`},
		{civil.Time{Hour: 8, Minute: 5, Second: 31}, nil, `"08:05:31"`},
		{civil.DateTime{Date: civil.Date{Year: 2026, Month: 11, Day: 20}, Time: civil.Time{Hour: 8}}, nil, `"2026-11-20T08:00:00"`},
		{rat, &bigquery.FieldSchema{Type: bigquery.NumericFieldType}, `"3.14"`},
		{big.NewRat(3, 1), &bigquery.FieldSchema{Type: bigquery.BigNumericFieldType}, `"3"`},
		{[]bigquery.Value{"Moscow", []bigquery.Value{55.75, 37.62}}, geo, `{"city":"Moscow","coords":{"lat":55.75,"lon":37.62}}`},
		{[]bigquery.Value{[]bigquery.Value{"1.2.3.4"}, []bigquery.Value{"5.6.7.8"}}, hops, `[{"ip":"1.2.3.4"},{"ip":"5.6.7.8"}]`},
		{[]bigquery.Value{"a", "b"}, &bigquery.FieldSchema{Type: bigquery.StringFieldType, Repeated: true}, `["a","b"]`},
		{[]bigquery.Value{"a", int64(1)}, nil, `["a",1]`},
		{map[string]bigquery.Value{"k": int64(1)}, nil, `{"k":1}`},
		{&bigquery.RangeValue{Start: civil.Date{Year: 2026, Month: 1, Day: 1}}, nil, `{"end":null,"start":"2026-01-01"}`},
		{string(long), nil, `"` + clip.String(string(long), maxValueBytes) + `"`},
	} {
		b, err := json.Marshal(jsonValue(tc.v, tc.f))
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(b), "%#v", tc.v)
	}
}

func TestHandles(t *testing.T) {
	assert.Equal(t, "job_1", encodeHandle("", "job_1"))
	assert.Equal(t, "EU:job_1", encodeHandle("EU", "job_1"))
	for h, want := range map[string][2]string{
		"job_1":                  {"", "job_1"},
		"EU:job_1":               {"EU", "job_1"},
		"europe-west1:abc-DEF_9": {"europe-west1", "abc-DEF_9"},
	} {
		loc, id, err := decodeHandle(h)
		require.NoError(t, err, h)
		assert.Equal(t, want, [2]string{loc, id}, h)
	}
	for _, h := range []string{"job 1", "a:b:c", ":job", "EU:", "../x", "job;DROP"} {
		_, _, err := decodeHandle(h)
		assert.True(t, tools.IsRejection(err), "%q should be rejected, got %v", h, err)
	}
}

func TestClassify(t *testing.T) {
	retry := func(err error) { t.Helper(); assert.False(t, tools.IsRejection(err), "%v should be retried", err) }
	reject := func(err error) {
		t.Helper()
		assert.True(t, tools.IsRejection(err), "%v should go back to the model", err)
	}

	retry(classify("x", &googleapi.Error{Code: 503, Message: "unavailable"}, false))
	retry(classify("x", &googleapi.Error{Code: 429}, true))
	retry(classify("x", &googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "rateLimitExceeded"}}}, false))
	reject(classify("x", &googleapi.Error{Code: 403, Message: "Access Denied", Errors: []googleapi.ErrorItem{{Reason: "accessDenied"}}}, false))
	reject(classify("x", &googleapi.Error{Code: 400, Message: "Syntax error"}, false))
	reject(classify("x", &googleapi.Error{Code: 404, Message: "Not found: Table p:d.t"}, false))
	retry(classify("x", &bigquery.Error{Reason: "backendError"}, false))
	reject(classify("x", &bigquery.Error{Reason: "jobInternalError", Message: "Table not found"}, true))
	reject(classify("x", &bigquery.Error{Reason: "bytesBilledLimitExceeded", Message: "Query exceeded limit for bytes billed"}, false))
	reject(classify("x", &bigquery.Error{Reason: "invalidQuery", Message: "Unrecognized name: foo"}, false))
	retry(classify("x", errors.New("connection reset"), false))
	err := classify("run the query", &googleapi.Error{Code: 400, Message: "Unrecognized name: foo at [1:8]"}, false)
	assert.EqualError(t, err, "run the query failed: Unrecognized name: foo at [1:8]")
	err = classify("run the query", &googleapi.Error{Code: 400, Message: "Unrecognized name: foo", Errors: []googleapi.ErrorItem{{Reason: "invalidQuery"}}}, false)
	assert.EqualError(t, err, "run the query failed (invalidQuery): Unrecognized name: foo")
	err = classify("dry run of the query", &bigquery.Error{Reason: "invalidQuery", Message: "Bad int64 value: x"}, true)
	assert.EqualError(t, err, "dry run of the query failed (invalidQuery): Bad int64 value: x")
}

// TestFailureKind: every refusal of these tools reads as its kind from a
// fixed set, and no word of BigQuery's message (which can quote a row)
// comes through, whatever it says.
func TestFailureKind(t *testing.T) {
	const row = "success is set for failed login attempts"
	for msg, want := range map[string]string{
		"query refused (nothing was sent to BigQuery): " + row:                                                         "refused by the SQL guard before BigQuery saw the query",
		"query refused: BigQuery reads it as a INSERT statement; only a SELECT query is allowed":                       "refused after the dry run: not a SELECT statement",
		"query refused: it reads p.other.t, which is not one of the tables you may query (x)":                          "refused after the dry run: it reads a table, routine or property graph that is not allowed",
		"query refused: it calls the routine p.d.f, which is not listed":                                               "refused after the dry run: it reads a table, routine or property graph that is not allowed",
		"query refused: the query would scan 2.0 GiB, over the 1.0 GiB limit; add a time filter":                       "refused: over the scan limit of a query (max_scan_bytes)",
		"query refused: the investigation's BigQuery scan budget (max_scan_bytes of the investigation) has 1 MiB left": "refused: over what is left of the investigation's scan budget",
		"run the query failed (invalidQuery): Bad int64 value: " + row:                                                 "BigQuery failed the query job (invalidQuery)",
		"run the query (job timeout 1m0s) failed (timeout): " + row:                                                    "BigQuery failed the query job (timeout)",
		"dry run of the query failed (notFound): Not found: Table p:d.t":                                               "BigQuery failed the dry run (notFound)",
		"dry run of the query failed: " + row:                                                                          "BigQuery failed the dry run (no reason given)",
		"run the query failed (successIsSetForFailedLogins): " + row:                                                   "BigQuery failed the query job (an unknown reason)",
		"read the schema of security_logs.auth_events failed (accessDenied): " + row:                                   "BigQuery failed reading a schema (accessDenied)",
		"read the query result failed (quotaExceeded): " + row:                                                         "BigQuery failed reading the results (quotaExceeded)",
		`table "x" is not one of the tables you may use; use one of: a.b`:                                              "refused: the table is not one of the configured tables",
		"table d.t is configured but does not exist in BigQuery project p":                                             "the configured table does not exist in BigQuery",
		`handle "x" is not one that bigquery_query returned`:                                                           "refused: the handle is not one of this session's results",
		`no query result for handle "x" (results are kept for about a day)`:                                            "no result for the handle (results are kept for about a day)",
		"the query behind this handle is refused now: " + row:                                                          "refused: the query behind the handle does not pass the SQL guard",
		`no runbook named "` + row + `"; the runbooks are: a`:                                                          "no runbook of that name",
		`argument "limit" must be a whole number from 0 to 100, got 500`:                                               "an argument was refused",
	} {
		kind, ok := FailureKind(msg)
		assert.True(t, ok, msg)
		assert.Equal(t, want, kind, msg)
	}
	for _, msg := range []string{row, "query failed: " + row, "Bad int64 value: " + row, "x run the query failed (invalidQuery): " + row} {
		_, ok := FailureKind(msg)
		assert.False(t, ok, msg)
	}
}
