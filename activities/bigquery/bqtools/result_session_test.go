package bqtools

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"

	"github.com/secops-agent/investigator/tools"
)

// bigquery_result reads only jobs that this session's queries started, and
// holds their query to the guard again before it returns a row.
func TestResultOnlyForThisSessionsJobs(t *testing.T) {
	fb := newFakeBackend()
	fb.dry[countAuth] = fakeDry{tables: []string{auth}}
	e := fakeEnv(t, fb, nil)
	ctxA, _ := callCtx(t, "session-a/k1", 0)
	res, err := runQuery{e}.Call(ctxA, map[string]any{"sql": countAuth})
	require.NoError(t, err)
	handle := res.(queryResult).Handle
	read := func(ctx context.Context, handle string) error {
		_, err := readResult{e}.Call(ctx, map[string]any{"handle": handle})
		return err
	}
	require.NoError(t, read(ctxA, handle), "the session that ran the query reads it")

	// Another session's handle, and made-up ones, never reach BigQuery.
	ctxB, _ := callCtx(t, "session-b/k1", 0)
	fb.jobs["analyst_job"] = &fakeJob{opts: jobOptions{id: "analyst_job"}, query: "SELECT salary FROM hr.salaries"}
	fb.finds = nil
	for ctx, h := range map[context.Context]string{
		ctxB:           handle,
		ctxA:           "analyst_job",
		t.Context():    handle, // no session: the env's own, which ran nothing
		context.TODO(): "investigator_" + strings.Repeat("0", 24) + "_k1_0123456789abcdef",
	} {
		requireRejection(t, read(ctx, h), "is not a result of this session's queries")
	}
	assert.Empty(t, fb.finds, "no refused handle was looked up")

	// A job with this session's prefix (planted by someone who can create
	// jobs, or from an older configuration) is read only if its query
	// passes the guard now and its statistics show a SELECT of the tables.
	plant := func(id, sql, stmt string, tables ...string) string {
		j := &fakeJob{opts: jobOptions{id: sessionPrefix("session-a") + id}, query: sql, refs: queryRefs{statementType: stmt}}
		for _, name := range tables {
			ds, tb, _ := strings.Cut(name, ".")
			j.refs.tables = append(j.refs.tables, &bigquery.Table{ProjectID: "demo-investigator", DatasetID: ds, TableID: tb})
		}
		fb.jobs[j.opts.id] = j
		return j.opts.id
	}
	requireRejection(t, read(ctxA, plant("p1", "SELECT * FROM other_ds.secrets", "SELECT")), "the query behind this handle is refused now", "other_ds.secrets")
	requireRejection(t, read(ctxA, plant("p2", "SELECT * FROM security_logs.auth_events |> EXPORT DATA OPTIONS(uri='gs://x/*')", "SELECT")), "refused now", "|> EXPORT")
	requireRejection(t, read(ctxA, plant("p3", countAuth, "SELECT", "other_ds.secrets")), "it reads demo-investigator.other_ds.secrets, which is not one of the tables")
	requireRejection(t, read(ctxA, plant("p4", countAuth, "INSERT")), "ran a INSERT statement")
	requireRejection(t, read(ctxA, plant("p5", "", "")), "not a query")
	require.NoError(t, read(ctxA, plant("p6", countAuth, "SELECT", auth)))
}

// The same on the emulator: a handle from another session is refused
// without a request, and the one that ran the query pages it.
func TestResultRefusesOtherSessionsOnTheEmulator(t *testing.T) {
	f := newFixture(t, nil)
	out := f.mustCall(t, "bigquery_query", map[string]any{"sql": countAuth, "limit": 0})
	handle := out["handle"].(string)
	f.log.take()
	other := tools.WithCallInfo(t.Context(), tools.CallInfo{Session: "another-investigation/bq-child"})
	_, err := f.tools["bigquery_result"].Call(other, map[string]any{"handle": handle})
	requireRejection(t, err, "is not a result of this session's queries")
	assert.Empty(t, f.log.take(), "nothing reached the emulator")
	page := f.mustCall(t, "bigquery_result", map[string]any{"handle": handle})
	assert.Equal(t, []any{[]any{float64(30)}}, page["rows"])
}

// When the activity's context ends while its job runs (a cancelled or
// timed-out activity), the job is cancelled. The goccy emulator runs every
// query to its end inside jobs.insert and its jobs.cancel does nothing, so
// this runs on the fake backend, and the request itself on a fake REST
// server below.
func TestCancelledActivityCancelsItsJob(t *testing.T) {
	fb := newFakeBackend()
	fb.block = true
	e := fakeEnv(t, fb, nil)
	attemptCtx, _ := callCtx(t, "s/k1", 0)
	ctx, cancel := context.WithCancel(attemptCtx)
	done := make(chan error, 1)
	go func() {
		_, err := runQuery{e}.Call(ctx, map[string]any{"sql": countAuth})
		done <- err
	}()
	require.Eventually(t, func() bool { _, starts := fb.calls(); return starts == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the query did not return after its context was cancelled")
	}
	require.ErrorIs(t, err, context.Canceled)
	job := fb.jobs[fb.starts[0]]
	job.mu.Lock()
	assert.Equal(t, 1, job.cancelled, "the job was cancelled once")
	job.mu.Unlock()

	// A retry of the activity (a call of its own, as every attempt's is)
	// finds the cancelled job and runs the query again under the next ID,
	// counting what the cancelled job billed as well as the new one: a
	// cancelled job may be billed.
	fb.block = false
	retryCtx, retry := callCtx(t, "s/k1", 0)
	out, err := runQuery{e}.Call(retryCtx, map[string]any{"sql": countAuth})
	require.NoError(t, err)
	assert.Equal(t, fb.starts[0]+"_2", out.(queryResult).Handle)
	assert.EqualValues(t, 2*fb.bytes, retry.Scanned(), "the cancelled job's bytes and the new job's")
}

// clientJob.cancel sends BigQuery's jobs.cancel: a fake REST server whose
// job never ends sees the cancel once the context that waited ends.
func TestClientBackendCancelsTheJobWhenTheWaitEnds(t *testing.T) {
	var mu sync.Mutex
	var cancels []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, "/bigquery/v2")
		w.Header().Set("Content-Type", "application/json")
		ref := map[string]any{"projectId": "p", "jobId": "j1"}
		running := map[string]any{"jobReference": ref, "configuration": map[string]any{"query": map[string]any{"query": "SELECT 1"}}, "status": map[string]any{"state": "RUNNING"}}
		switch {
		case strings.HasSuffix(path, "/cancel"):
			mu.Lock()
			cancels = append(cancels, r.Method+" "+path)
			mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"job": running})
		case strings.HasPrefix(path, "/projects/p/queries/"):
			_ = json.NewEncoder(w).Encode(map[string]any{"jobReference": ref, "jobComplete": false})
		default:
			_ = json.NewEncoder(w).Encode(running)
		}
	}))
	t.Cleanup(srv.Close)
	client, err := NewClient(t.Context(), "p", srv.Listener.Addr().String(), option.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	b := clientBackend{client: client}
	job, err := b.startQuery(t.Context(), "SELECT 1", jobOptions{id: "j1"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = waitJob(ctx, job)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"POST /projects/p/jobs/j1/cancel"}, cancels)
}
