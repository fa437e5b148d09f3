package bqtools

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/stretchr/testify/require"
)

// fakeBackend stands in for real BigQuery where the emulator cannot: its dry
// run reports, per query, the referenced tables, routines and property
// graphs that BigQuery's dry run would (set by the test; the emulator
// reports none), and it keeps query jobs in memory, each holding the rows
// of rowsFor. It records every call so tests can tell what reached it.
type fakeBackend struct {
	mu      sync.Mutex
	dry     map[string]fakeDry // by SQL; a query not listed reads nothing
	bytes   int64              // every dry run's estimate and every job's bytes
	dryRuns []string
	starts  []string // IDs of the jobs created
	finds   []string // IDs looked up
	jobs    map[string]*fakeJob
	// raceOnce makes the next look-up of an ID miss, as when another
	// attempt creates the job between the look-up and the insert.
	raceOnce map[string]bool
	// failWith makes the job created under an ID fail with this error.
	failWith map[string]error
	// block makes the jobs it creates run until cancelled.
	block bool
}

// fakeDry is what the fake's dry run reports for one query.
type fakeDry struct {
	statementType      string   // "" means SELECT
	noStatementType    bool     // report none, as statistics without it would
	tables             []string // dataset.table (in demo-investigator) or project.dataset.table
	routines, graphs   []string // project.dataset.name
	location, errorMsg string
	// job, when set, is what the statistics of the query's job report
	// instead (a query that BigQuery ran otherwise than it dry-ran it).
	job *fakeDry
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{dry: map[string]fakeDry{}, bytes: 100, jobs: map[string]*fakeJob{}, raceOnce: map[string]bool{}, failWith: map[string]error{}}
}

func (f *fakeBackend) dryRun(_ context.Context, sql string) (dryRunInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dryRuns = append(f.dryRuns, sql)
	d := f.dry[sql]
	if d.errorMsg != "" {
		return dryRunInfo{}, &bigquery.Error{Reason: "invalidQuery", Message: d.errorMsg}
	}
	return dryRunInfo{queryRefs: d.refs(), bytes: f.bytes, location: d.location}, nil
}

// refs is what the dry run, and the statistics of a job of its query,
// report.
func (d fakeDry) refs() queryRefs {
	r := queryRefs{statementType: d.statementType, routines: d.routines, graphs: d.graphs}
	if r.statementType == "" && !d.noStatementType {
		r.statementType = "SELECT"
	}
	for _, name := range d.tables {
		parts := strings.Split(name, ".")
		if len(parts) == 2 {
			parts = append([]string{"demo-investigator"}, parts...)
		}
		r.tables = append(r.tables, &bigquery.Table{ProjectID: parts[0], DatasetID: parts[1], TableID: parts[2]})
	}
	return r
}

// emulator is false: the fake stands for real BigQuery.
func (f *fakeBackend) emulator() bool { return false }

func (f *fakeBackend) startQuery(_ context.Context, sql string, o jobOptions) (queryJob, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.jobs[o.id]; ok {
		return nil, fmt.Errorf("%w: %s", errJobExists, o.id)
	}
	f.starts = append(f.starts, o.id)
	d := f.dry[sql]
	if d.job != nil {
		d = *d.job
	}
	j := &fakeJob{opts: o, query: sql, bytes: f.bytes, err: f.failWith[o.id], block: f.block, refs: d.refs()}
	f.jobs[o.id] = j
	return j, nil
}

func (f *fakeBackend) findJob(_ context.Context, id, _ string) (queryJob, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finds = append(f.finds, id)
	j, ok := f.jobs[id]
	if !ok || f.raceOnce[id] {
		delete(f.raceOnce, id)
		return nil, fmt.Errorf("%w: %s", errJobNotFound, id)
	}
	return j, nil
}

func (f *fakeBackend) calls() (dryRuns, starts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.dryRuns), len(f.starts)
}

// fakeJob is a finished job whose result is three rows of one column.
type fakeJob struct {
	opts  jobOptions
	query string
	bytes int64
	err   error
	// what the job's statistics report: statement type, referenced tables,
	// routines and graphs
	refs queryRefs
	// block makes wait block until its context ends, as a long job does.
	block     bool
	mu        sync.Mutex
	cancelled int
	// statsErr fails reading the job's statistics; statsRead counts reads.
	statsErr  error
	statsRead int
}

func (j *fakeJob) id() string       { return j.opts.id }
func (j *fakeJob) location() string { return j.opts.location }
func (j *fakeJob) sql() string      { return j.query }

func (j *fakeJob) wait(ctx context.Context) (jobStats, error) {
	j.mu.Lock()
	cancelled := j.cancelled > 0
	j.mu.Unlock()
	if cancelled {
		return jobStats{}, &bigquery.Error{Reason: "stopped", Message: "Job execution was cancelled: User requested cancellation"}
	}
	if j.block {
		<-ctx.Done()
		return jobStats{}, ctx.Err()
	}
	if j.err != nil {
		return jobStats{}, j.err
	}
	return jobStats{processed: j.bytes, billed: j.bytes}, nil
}

// stats reports that the job billed its bytes, whether it finished, failed
// or was cancelled.
func (j *fakeJob) stats(context.Context) (jobStats, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.statsRead++
	if j.statsErr != nil {
		return jobStats{}, j.statsErr
	}
	return jobStats{processed: j.bytes, billed: j.bytes}, nil
}

// cancel records the cancellation; a job that blocks (waitForCancel)
// fails as BigQuery's cancelled jobs do.
func (j *fakeJob) cancel(context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.cancelled++
	return nil
}

func (j *fakeJob) referenced(context.Context) (queryRefs, error) { return j.refs, nil }

func (j *fakeJob) read(_ context.Context, offset, n uint64, maxRows int) (rowsPage, error) {
	rows := [][]any{{int64(1)}, {int64(2)}, {int64(3)}}
	return pageRows(uint64(len(rows)), []string{"n"}, maxRows, offset, n, func(offset, n uint64) ([][]any, bool, error) {
		return rows[offset:min(offset+n, uint64(len(rows)))], false, nil
	})
}

// fakeEnv is an env over testdata/bigquery.yaml (adjusted by adjust) whose
// queries reach fb instead of BigQuery; its client (in demo-investigator)
// sends nothing.
func fakeEnv(t *testing.T, fb *fakeBackend, adjust func(*Config)) *env {
	t.Helper()
	cfg, err := LoadConfig("testdata/bigquery.yaml")
	require.NoError(t, err)
	if adjust != nil {
		adjust(&cfg)
	}
	client, err := NewClient(t.Context(), "demo-investigator", "127.0.0.1:1")
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	e := newEnv(client, cfg.withDefaults())
	e.backend = fb
	return e
}
