package bqtools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/secops-agent/investigator/tools"
)

func TestJobIDFromTheCall(t *testing.T) {
	alphabet := regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	valid := func(id string) {
		t.Helper()
		assert.Regexp(t, alphabet, id)
		assert.LessOrEqual(t, len(id), 1024)
	}
	const session = "investigation-7f3a/bq-child"
	id := jobID(session, session+"/step-3#call-2")
	valid(id)
	assert.True(t, strings.HasPrefix(id, sessionPrefix(session)+"step-3_call-2_"), id)
	assert.Regexp(t, `^investigator_[0-9a-f]{24}_step-3_call-2_[0-9a-f]{16}$`, id)
	assert.Equal(t, id, jobID(session, session+"/step-3#call-2"), "the same call, the same job")
	assert.NotEqual(t, jobID("s", "a/b"), jobID("s", "a_b"), "IDs that read alike after the replacement differ by their hash")
	assert.NotEqual(t, sessionPrefix("a"), sessionPrefix("b"))
	assert.False(t, strings.HasPrefix(jobID("wf-1", "wf-1/k"), sessionPrefix("wf")), "no session's prefix starts another's")
	long := strings.Repeat("x/", 3000)
	valid(jobID(session, long))
	assert.NotEqual(t, jobID(session, long), jobID(session, long+"y"), "IDs that differ past the cut differ")
	valid(jobID("ünïcode", "ünïcode / 日本"))
}

// callCtx is a context like the one CallTool gives a tool.
func callCtx(t *testing.T, id string, scanLeft int64) (context.Context, tools.CallInfo) {
	session, _, _ := strings.Cut(id, "/")
	ctx := tools.WithCallInfo(t.Context(), tools.CallInfo{ID: id, Session: session, ScanBytesLeft: scanLeft})
	return ctx, tools.CallInfoFrom(ctx)
}

const countAuth = "SELECT COUNT(*) AS n FROM security_logs.auth_events"

// The emulator keeps jobs by ID, so it shows what a retried activity does:
// the second call with the same tools.CallInfo ID finds the first call's job and
// reads it, and only one query job is ever created.
func TestQueryRetryReattachesToItsJobOnTheEmulator(t *testing.T) {
	f := newFixture(t, nil)
	callID := "session-" + strings.ReplaceAll(t.Name(), "/", "-") + "/bq-3"
	query := f.tools["bigquery_query"]
	f.log.take()

	session, _, _ := strings.Cut(callID, "/")
	ctx, call := callCtx(t, callID, 0)
	first, err := query.Call(ctx, map[string]any{"sql": countAuth})
	require.NoError(t, err)
	reqs := f.log.take()
	assert.Equal(t, 1, count(reqs, "(dry run)"), "%v", reqs)
	assert.Equal(t, 1, count(reqs, "POST")-count(reqs, "(dry run)"), "one query job: %v", reqs)
	assert.Positive(t, call.Scanned(), "the bytes the job processed are recorded")

	ctx, call = callCtx(t, callID, 0) // the retry
	second, err := query.Call(ctx, map[string]any{"sql": countAuth})
	require.NoError(t, err)
	reqs = f.log.take()
	assert.Equal(t, 1, count(reqs, "POST"), "the retry sends only its dry run: %v", reqs)
	require.GreaterOrEqual(t, len(reqs), 2, "%v", reqs)
	assert.Equal(t, "GET /projects/demo-investigator/jobs/"+jobID(session, callID), reqs[1], "and looks up the job first: %v", reqs)
	assert.Equal(t, first, second, "the same result, read from the same job")
	assert.Equal(t, jobID(session, callID), first.(queryResult).Handle)
	assert.Equal(t, [][]any{{int64(30)}}, second.(queryResult).Preview)
	assert.Positive(t, call.Scanned(), "a re-attached call records the bytes too")

	// The emulator holds exactly one job under the call's IDs, with the
	// job timeout and the bytes-billed cap of the configuration.
	var ids []string
	it := f.client.Jobs(t.Context())
	for {
		j, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		require.NoError(t, err)
		if strings.HasPrefix(j.ID(), jobID(session, callID)) {
			ids = append(ids, j.ID())
		}
	}
	assert.Equal(t, []string{jobID(session, callID)}, ids)
	job, err := f.client.JobFromID(t.Context(), jobID(session, callID))
	require.NoError(t, err)
	cfg, err := job.Config()
	require.NoError(t, err)
	qc := cfg.(*bigquery.QueryConfig)
	assert.Equal(t, DefaultJobTimeout, qc.JobTimeout, "the job carries the job timeout")
	assert.Equal(t, DefaultMaxScanBytes, qc.MaxBytesBilled)

	// Without a call ID (a tool run outside an activity) every call is a
	// new job with a random ID.
	out1, err := query.Call(t.Context(), map[string]any{"sql": countAuth})
	require.NoError(t, err)
	out2, err := query.Call(t.Context(), map[string]any{"sql": countAuth})
	require.NoError(t, err)
	assert.NotEqual(t, out1.(queryResult).Handle, out2.(queryResult).Handle)
	reqs = f.log.take()
	assert.Equal(t, 2, count(reqs, "(dry run)"), "%v", reqs)
	assert.Equal(t, 4, count(reqs, "POST"), "two dry runs and two jobs: %v", reqs)
}

func TestQueryJobsOnTheFake(t *testing.T) {
	run := func(e *env, ctx context.Context) (queryResult, error) {
		res, err := runQuery{e}.Call(ctx, map[string]any{"sql": countAuth})
		if err != nil {
			return queryResult{}, err
		}
		return res.(queryResult), nil
	}
	const callID = "s1/k9"
	base := jobID("s1", callID)

	t.Run("BigQuery answers 409 when the job appeared after the look-up", func(t *testing.T) {
		fb := newFakeBackend()
		e := fakeEnv(t, fb, nil)
		ctx, _ := callCtx(t, callID, 0)
		first, err := run(e, ctx)
		require.NoError(t, err)
		fb.raceOnce[base] = true
		second, err := run(e, ctx)
		require.NoError(t, err)
		assert.Equal(t, first.Handle, second.Handle)
		assert.Equal(t, []string{base}, fb.starts, "one job")
		assert.Equal(t, []string{base, base, base}, fb.finds, "look-up, look-up that missed, look-up after the 409")
	})

	t.Run("a job that failed transiently is run again under the next ID", func(t *testing.T) {
		fb := newFakeBackend()
		fb.failWith[base] = &bigquery.Error{Reason: "backendError", Message: "try again"}
		e := fakeEnv(t, fb, nil)
		ctx, _ := callCtx(t, callID, 0)
		_, err := run(e, ctx)
		require.Error(t, err)
		assert.False(t, tools.IsRejection(err), "a transient failure is retried by Temporal: %v", err)
		out, err := run(e, ctx) // the retry
		require.NoError(t, err)
		assert.Equal(t, base+"_2", out.Handle)
		_, err = run(e, ctx) // a later retry finds the second job
		require.NoError(t, err)
		assert.Equal(t, []string{base, base + "_2"}, fb.starts)
	})

	t.Run("a job that failed for good fails the retry the same way, without a new job", func(t *testing.T) {
		fb := newFakeBackend()
		fb.failWith[base] = &bigquery.Error{Reason: "invalidQuery", Message: "division by zero"}
		e := fakeEnv(t, fb, nil)
		ctx, _ := callCtx(t, callID, 0)
		for range 2 {
			_, err := run(e, ctx)
			requireRejection(t, err, "run the query failed (invalidQuery): division by zero")
		}
		assert.Equal(t, []string{base}, fb.starts)
	})

	t.Run("a job that failed is counted by what it billed", func(t *testing.T) {
		fb := newFakeBackend()
		fb.failWith[base] = &bigquery.Error{Reason: "timeout", Message: "Job timed out after 1m0s"}
		e := fakeEnv(t, fb, nil)
		ctx, call := callCtx(t, callID, 0)
		_, err := run(e, ctx)
		requireRejection(t, err, "run the query (job timeout 1m0s) failed (timeout): Job timed out after 1m0s")
		assert.EqualValues(t, fb.bytes, call.Scanned(), "BigQuery bills what the job read before it was stopped")
	})

	t.Run("no replacement runs while the job it replaces cannot be counted", func(t *testing.T) {
		fb := newFakeBackend()
		fb.failWith[base] = &bigquery.Error{Reason: "backendError", Message: "try again"}
		e := fakeEnv(t, fb, nil)
		ctx, _ := callCtx(t, callID, 0)
		_, err := run(e, ctx)
		require.Error(t, err)
		fb.jobs[base].statsErr = &googleapi.Error{Code: http.StatusServiceUnavailable, Message: "unavailable"}
		ctx, call := callCtx(t, callID, 0) // the retry
		_, err = run(e, ctx)
		require.ErrorContains(t, err, "read what the failed query job "+base+" billed")
		assert.False(t, tools.IsRejection(err), "retried by Temporal: %v", err)
		assert.Equal(t, []string{base}, fb.starts, "no second job")
		fb.jobs[base].statsErr = nil
		ctx, call = callCtx(t, callID, 0) // the next retry
		_, err = run(e, ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 2*fb.bytes, call.Scanned(), "the failed job and its replacement")
	})

	t.Run("a job under the ID that holds another query is left alone", func(t *testing.T) {
		fb := newFakeBackend()
		fb.jobs[base] = &fakeJob{opts: jobOptions{id: base}, query: "SELECT 'someone else'"}
		e := fakeEnv(t, fb, nil)
		ctx, _ := callCtx(t, callID, 0)
		out, err := run(e, ctx)
		require.NoError(t, err)
		assert.True(t, strings.HasSuffix(out.Handle, base+"_2"), out.Handle)
	})

	t.Run("the job gets the timeout, the bytes cap and the dry run's location", func(t *testing.T) {
		fb := newFakeBackend()
		fb.dry[countAuth] = fakeDry{tables: []string{auth}, location: "europe-west3"}
		e := fakeEnv(t, fb, func(c *Config) { c.JobTimeout = 5 * time.Second; c.MaxScanBytes = 64 << 20 })
		ctx, _ := callCtx(t, callID, 0)
		out, err := run(e, ctx)
		require.NoError(t, err)
		assert.Equal(t, "europe-west3:"+base, out.Handle)
		assert.Equal(t, jobOptions{id: base, location: "europe-west3", maxBytesBilled: 64 << 20, timeout: 5 * time.Second}, fb.jobs[base].opts)
	})

	t.Run("a dry run that lists 50 tables may not list them all", func(t *testing.T) {
		fb := newFakeBackend()
		var many []string
		for range maxReferencedTables {
			many = append(many, auth)
		}
		fb.dry[countAuth] = fakeDry{tables: many}
		_, err := run(fakeEnv(t, fb, nil), t.Context())
		requireRejection(t, err, "query refused: it reads 50 or more tables, and BigQuery's dry run lists no more than 50")
		fb.dry[countAuth] = fakeDry{tables: many[1:]}
		_, err = run(fakeEnv(t, fb, nil), t.Context())
		require.NoError(t, err)
	})

	t.Run("the scan budget", func(t *testing.T) {
		fb := newFakeBackend()
		fb.bytes = 20 << 20
		e := fakeEnv(t, fb, nil)
		ctx, call := callCtx(t, callID, 20<<20-1)
		_, err := run(e, ctx)
		requireRejection(t, err, "query refused: the investigation's BigQuery scan budget (max_scan_bytes of the investigation) has 20.0 MiB (20971519 bytes) left and this query would scan 20.0 MiB (20971520 bytes)")
		assert.Empty(t, fb.starts)
		assert.Zero(t, call.Scanned())

		ctx, _ = callCtx(t, callID, -1)
		_, err = run(e, ctx)
		requireRejection(t, err, "has 0 bytes left") // a spent budget refuses every query
		assert.Empty(t, fb.starts)

		ctx, call = callCtx(t, callID, 30<<20)
		_, err = run(e, ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 20<<20, call.Scanned(), "the job's bytes count against the budget")
	})
}

// Each job may bill at most the smaller of max_scan_bytes and the share of
// the budget lent to its call, and BigQuery's minimum bill (10 MiB per
// table, whole MiB) must fit under that, or the query is refused before it
// runs.
func TestBillingCapIsWhatIsLeft(t *testing.T) {
	cases := []struct {
		name    string
		cfgCap  int64 // max_scan_bytes
		left    int64 // the call's share: 0 unlimited, -1 spent
		scan    int64 // the dry run's estimate
		tables  []string
		wantCap int64  // the job's MaxBytesBilled; 0: refused
		refusal string // part of the refusal
	}{
		{name: "no budget: the configured cap", cfgCap: 1 << 30, scan: 100, tables: []string{auth}, wantCap: 1 << 30},
		{name: "a share under the cap is the cap", cfgCap: 1 << 30, left: 300 << 20, scan: 100, tables: []string{auth}, wantCap: 300 << 20},
		{name: "the configured cap under the share", cfgCap: 50 << 20, left: 300 << 20, scan: 100, tables: []string{auth}, wantCap: 50 << 20},
		{name: "one table: 10 MiB fits a 10 MiB share", cfgCap: 1 << 30, left: 10 << 20, scan: 100, tables: []string{auth}, wantCap: 10 << 20},
		{name: "one table: a share under 10 MiB is refused", cfgCap: 1 << 30, left: 10<<20 - 1, scan: 100, tables: []string{auth},
			refusal: "would scan 100 bytes, which BigQuery bills as 10.0 MiB (10485760 bytes) (whole MiB, and at least 10 MiB for each of the 1 tables it reads)"},
		{name: "two tables: 20 MiB at least", cfgCap: 1 << 30, left: 15 << 20, scan: 100, tables: []string{auth, procs},
			refusal: "at least 10 MiB for each of the 2 tables it reads"},
		{name: "two tables under the configured cap", cfgCap: 15 << 20, scan: 100, tables: []string{auth, procs},
			refusal: "over the 15.0 MiB (15728640 bytes) limit"},
		{name: "bytes round up to whole MiB", cfgCap: 1 << 30, left: 11 << 20, scan: 11<<20 + 1, tables: []string{auth},
			refusal: "which BigQuery bills as 12.0 MiB"},
		{name: "no table bills nothing, even with the budget spent", cfgCap: 1 << 30, left: -1, scan: 0, wantCap: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fb := newFakeBackend()
			fb.bytes = c.scan
			sql := "SELECT 1 AS one"
			if len(c.tables) > 0 {
				sql = "SELECT a.user FROM security_logs.auth_events a JOIN security_logs.process_events p USING (host)"
			}
			fb.dry[sql] = fakeDry{tables: c.tables}
			e := fakeEnv(t, fb, func(cfg *Config) { cfg.MaxScanBytes = c.cfgCap })
			ctx, _ := callCtx(t, "s/k", c.left)
			_, err := runQuery{e}.Call(ctx, map[string]any{"sql": sql})
			if c.refusal != "" {
				requireRejection(t, err, c.refusal)
				assert.Empty(t, fb.starts, "a refused query never runs")
				return
			}
			require.NoError(t, err)
			require.Len(t, fb.starts, 1)
			assert.Equal(t, c.wantCap, fb.jobs[fb.starts[0]].opts.maxBytesBilled)
		})
	}
	// On the emulator, which reports no tables, the names in the query
	// count: a WITH name is no table.
	got, n := billedEstimate(dryRunInfo{bytes: 5}, "WITH x AS (SELECT * FROM security_logs.auth_events) SELECT * FROM x, security_logs.auth_events, security_logs.process_events")
	assert.Equal(t, 2, n)
	assert.EqualValues(t, 20<<20, got)
}

// BigQuery's REST dry run reports routines and property graphs, which the
// Go client's QueryStatistics drops; the dry run reads them from the REST
// response. A 409 on insert means the job exists.
func TestClientBackendOverREST(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var job struct {
			JobReference  struct{ JobID string }
			Configuration struct {
				DryRun bool
				Query  struct {
					UseLegacySQL *bool `json:"useLegacySql"`
				}
			}
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&job))
		w.Header().Set("Content-Type", "application/json")
		if !job.Configuration.DryRun {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":{"code":409,"message":"Already Exists: Job demo-investigator:EU.` + job.JobReference.JobID + `","errors":[{"reason":"duplicate"}]}}`))
			return
		}
		assert.Equal(t, false, *job.Configuration.Query.UseLegacySQL, "GoogleSQL, never legacy SQL")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"jobReference": map[string]any{"projectId": "demo-investigator", "jobId": job.JobReference.JobID, "location": "EU"},
			"status":       map[string]any{"state": "DONE"},
			"statistics": map[string]any{"totalBytesProcessed": "1234", "query": map[string]any{
				"statementType":            "SELECT",
				"referencedTables":         []any{map[string]any{"projectId": "demo-investigator", "datasetId": "security_logs", "tableId": "auth_events"}},
				"referencedRoutines":       []any{map[string]any{"projectId": "other-proj", "datasetId": "fns", "routineId": "exfil"}},
				"referencedPropertyGraphs": []any{map[string]any{"projectId": "demo-investigator", "datasetId": "g", "propertyGraphId": "net"}},
			}},
		})
	}))
	t.Cleanup(srv.Close)
	client, err := NewClient(t.Context(), "demo-investigator", srv.Listener.Addr().String(), option.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	b := newEnv(client, Config{}).backend.(clientBackend)
	require.NotNil(t, b.rest, "NewClient's clients carry their REST service")

	info, err := b.dryRun(t.Context(), "SELECT 1")
	require.NoError(t, err)
	assert.Equal(t, "SELECT", info.statementType)
	assert.EqualValues(t, 1234, info.bytes)
	assert.Equal(t, "EU", info.location)
	require.Len(t, info.tables, 1)
	assert.Equal(t, "auth_events", info.tables[0].TableID)
	assert.Equal(t, []string{"other-proj.fns.exfil"}, info.routines)
	assert.Equal(t, []string{"demo-investigator.g.net"}, info.graphs)

	_, err = b.startQuery(t.Context(), "SELECT 1", jobOptions{id: "investigator_x", location: "EU"})
	assert.ErrorIs(t, err, errJobExists)

	// A client made elsewhere has no REST service: the Go client's dry run.
	other, err := bigquery.NewClient(t.Context(), "demo-investigator", option.WithEndpoint(srv.URL), option.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	assert.Nil(t, infoOf(other).rest)
	info, err = newEnv(other, Config{}).backend.dryRun(t.Context(), "SELECT 1")
	require.NoError(t, err)
	assert.Equal(t, "auth_events", info.tables[0].TableID)
	assert.Empty(t, info.routines, "the Go client drops referencedRoutines")
}
