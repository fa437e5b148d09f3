package bqtools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"cloud.google.com/go/bigquery"
	bqv2 "google.golang.org/api/bigquery/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// queryBackend is what bigquery_query and bigquery_result need of BigQuery:
// a dry run, query jobs, and their rows. clientBackend is BigQuery itself
// (or the emulator); tests also use a fake that reports what real BigQuery's
// dry run would (referenced tables, routines), which the emulator does not.
type queryBackend interface {
	dryRun(ctx context.Context, sql string) (dryRunInfo, error)
	// startQuery creates a query job; errJobExists if o.id is taken.
	startQuery(ctx context.Context, sql string, o jobOptions) (queryJob, error)
	// findJob returns the job with id; errJobNotFound if there is none.
	findJob(ctx context.Context, id, location string) (queryJob, error)
	// emulator reports whether this is the BigQuery emulator, whose dry
	// runs and jobs report SELECT for any statement and no tables or
	// routines.
	emulator() bool
}

// queryJob is one query job.
type queryJob interface {
	id() string
	location() string
	sql() string // the job's query, "" if it is not a query job
	// wait waits for the job to end; a failed job's error is a *bigquery.Error.
	wait(ctx context.Context) (jobStats, error)
	// stats reads what the job processed and billed, as BigQuery reports
	// it now: a failed or cancelled job may be billed too.
	stats(ctx context.Context) (jobStats, error)
	// read reads up to n rows from offset of the finished job's results, of
	// which the first maxRows can be paged.
	read(ctx context.Context, offset, n uint64, maxRows int) (rowsPage, error)
	// cancel asks BigQuery to stop the job.
	cancel(ctx context.Context) error
	// referenced is what the job's statistics say it was and read: its
	// statement type, and the tables, routines and property graphs it
	// referenced (none on the emulator).
	referenced(ctx context.Context) (queryRefs, error)
}

var (
	errJobExists   = errors.New("a job with this ID already exists")
	errJobNotFound = errors.New("no job with this ID")
)

// queryRefs is what BigQuery's statistics of a query (its dry run's or its
// job's) say it is and reads.
type queryRefs struct {
	statementType string // "" when the statistics carry none
	tables        []*bigquery.Table
	routines      []string // project.dataset.routine
	graphs        []string // project.dataset.graph
}

// refsOf reads a query's statistics as the REST API reports them.
func refsOf(q *bqv2.JobStatistics2) queryRefs {
	var r queryRefs
	if q == nil {
		return r
	}
	r.statementType = q.StatementType
	for _, t := range q.ReferencedTables {
		r.tables = append(r.tables, &bigquery.Table{ProjectID: t.ProjectId, DatasetID: t.DatasetId, TableID: t.TableId})
	}
	for _, rt := range q.ReferencedRoutines {
		r.routines = append(r.routines, rt.ProjectId+"."+rt.DatasetId+"."+rt.RoutineId)
	}
	for _, g := range q.ReferencedPropertyGraphs {
		r.graphs = append(r.graphs, g.ProjectId+"."+g.DatasetId+"."+g.PropertyGraphId)
	}
	return r
}

// dryRunInfo is what a dry run says about a query.
type dryRunInfo struct {
	queryRefs
	bytes    int64 // the estimate
	location string
}

type jobOptions struct {
	id, location   string
	maxBytesBilled int64
	timeout        time.Duration
}

type jobStats struct{ processed, billed int64 }

// bytes is what the job counts against the scan budget.
func (s jobStats) bytes() int64 { return max(s.billed, s.processed) }

// clientBackend reaches BigQuery through the Go client, and through the
// REST API for the dry run and a job's statistics when NewClient made the
// client: the Go client (v1.86.2) drops referencedRoutines and
// referencedPropertyGraphs, which the REST JobStatistics2 carries.
type clientBackend struct {
	client *bigquery.Client
	rest   *bqv2.Service // nil: the Go client's statistics, without routines
	emu    bool          // NewClient made the client for the emulator
}

func (b clientBackend) emulator() bool { return b.emu }

func (b clientBackend) dryRun(ctx context.Context, sql string) (dryRunInfo, error) {
	if b.rest == nil {
		return b.clientDryRun(ctx, sql)
	}
	noLegacy := false
	job := &bqv2.Job{
		JobReference:  &bqv2.JobReference{ProjectId: b.client.Project(), Location: b.client.Location, JobId: randomJobID("dryrun")},
		Configuration: &bqv2.JobConfiguration{DryRun: true, Query: &bqv2.JobConfigurationQuery{Query: sql, UseLegacySql: &noLegacy}},
	}
	res, err := b.rest.Jobs.Insert(b.client.Project(), job).Context(ctx).Do()
	if err != nil {
		return dryRunInfo{}, err
	}
	if res.Status != nil && res.Status.ErrorResult != nil {
		e := res.Status.ErrorResult
		return dryRunInfo{}, &bigquery.Error{Location: e.Location, Message: e.Message, Reason: e.Reason}
	}
	var info dryRunInfo
	if res.JobReference != nil {
		info.location = res.JobReference.Location
	}
	if s := res.Statistics; s != nil {
		info.bytes = s.TotalBytesProcessed
		info.queryRefs = refsOf(s.Query)
	}
	return info, nil
}

// clientDryRun is the Go client's dry run, which reports no routines.
func (b clientBackend) clientDryRun(ctx context.Context, sql string) (dryRunInfo, error) {
	q := b.client.Query(sql)
	q.DryRun = true
	job, err := q.Run(ctx)
	if err != nil {
		return dryRunInfo{}, err
	}
	st := job.LastStatus()
	if st == nil {
		return dryRunInfo{}, errors.New("the dry run returned no job status")
	}
	if err := st.Err(); err != nil {
		return dryRunInfo{}, err
	}
	info := dryRunInfo{location: job.Location()}
	if st.Statistics != nil {
		info.bytes = st.Statistics.TotalBytesProcessed
		if qs, ok := st.Statistics.Details.(*bigquery.QueryStatistics); ok {
			info.statementType, info.tables = qs.StatementType, qs.ReferencedTables
		}
	}
	return info, nil
}

func (b clientBackend) startQuery(ctx context.Context, sql string, o jobOptions) (queryJob, error) {
	q := b.client.Query(sql)
	q.JobID, q.Location = o.id, o.location
	q.MaxBytesBilled, q.JobTimeout = o.maxBytesBilled, o.timeout
	job, err := q.Run(ctx)
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusConflict {
		return nil, fmt.Errorf("%w: %s", errJobExists, o.id)
	}
	if err != nil {
		return nil, err
	}
	return clientJob{job, b.rest}, nil
}

func (b clientBackend) findJob(ctx context.Context, id, location string) (queryJob, error) {
	job, err := b.client.JobFromIDLocation(ctx, id, location)
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: %s", errJobNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return clientJob{job, b.rest}, nil
}

type clientJob struct {
	job  *bigquery.Job
	rest *bqv2.Service // nil: the Go client's statistics, without routines
}

func (j clientJob) id() string       { return j.job.ID() }
func (j clientJob) location() string { return j.job.Location() }

func (j clientJob) sql() string {
	cfg, err := j.job.Config()
	if q, ok := cfg.(*bigquery.QueryConfig); ok && err == nil {
		return q.Q
	}
	return ""
}

func (j clientJob) cancel(ctx context.Context) error { return j.job.Cancel(ctx) }

// referenced reads the job's statistics anew over REST, for its routines
// too; without the REST service, from the status last fetched (Wait and
// JobFromIDLocation fetch it).
func (j clientJob) referenced(ctx context.Context) (queryRefs, error) {
	if j.rest == nil {
		st := j.job.LastStatus()
		if st == nil || st.Statistics == nil {
			return queryRefs{}, nil
		}
		qs, ok := st.Statistics.Details.(*bigquery.QueryStatistics)
		if !ok {
			return queryRefs{}, nil
		}
		return queryRefs{statementType: qs.StatementType, tables: qs.ReferencedTables}, nil
	}
	res, err := j.rest.Jobs.Get(j.job.ProjectID(), j.job.ID()).Location(j.job.Location()).
		Fields("statistics(query(statementType,referencedTables,referencedRoutines,referencedPropertyGraphs))").Context(ctx).Do()
	if err != nil {
		return queryRefs{}, err
	}
	if res.Statistics == nil {
		return queryRefs{}, nil
	}
	return refsOf(res.Statistics.Query), nil
}

func (j clientJob) wait(ctx context.Context) (jobStats, error) {
	status, err := j.job.Wait(ctx)
	if err != nil {
		return jobStats{}, err
	}
	if err := status.Err(); err != nil {
		return jobStats{}, err
	}
	return statsOf(status), nil
}

func (j clientJob) stats(ctx context.Context) (jobStats, error) {
	status, err := j.job.Status(ctx)
	if err != nil {
		return jobStats{}, err
	}
	return statsOf(status), nil
}

func statsOf(status *bigquery.JobStatus) jobStats {
	var s jobStats
	if st := status.Statistics; st != nil {
		s.processed = st.TotalBytesProcessed
		if qs, ok := st.Details.(*bigquery.QueryStatistics); ok {
			s.billed = qs.TotalBytesBilled
		}
	}
	return s
}

// read pages on the server where it honours startIndex; see Tools.
func (j clientJob) read(ctx context.Context, offset, n uint64, maxRows int) (rowsPage, error) {
	it, err := j.job.Read(ctx)
	if err != nil {
		return rowsPage{}, err
	}
	schema := make([]string, len(it.Schema))
	for i, f := range it.Schema {
		schema[i] = f.Name
	}
	return pageRows(it.TotalRows, schema, maxRows, offset, n, func(offset, n uint64) ([][]any, bool, error) {
		return collectRows(it, offset, n, it.TotalRows)
	})
}

// randomJobID is prefix_ and 32 random hex digits.
func randomJobID(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return prefix + "_" + hex.EncodeToString(b)
}

// collectRows reads up to n converted rows from offset. It asks the server
// for exactly that window; if the first page shows that the server ignored
// startIndex (it sent more rows than remain after offset, as the emulator
// does), it skips the first offset rows itself. It stops early once the rows
// would exceed maxRowsJSON bytes of JSON, and then reports cut. A row is
// converted only up to what is left of that budget (jsonRowWithin), so a
// huge first row comes back cut, not whole, and is reported cut too; the
// page BigQuery sent is still held whole, as
// the Go client's RowIterator has a row count per page but no byte budget.
func collectRows(it *bigquery.RowIterator, offset, n, total uint64) (rows [][]any, cut bool, err error) {
	it.StartIndex = offset
	it.PageInfo().MaxSize = int(n)
	var skip uint64
	first := true
	size := 0
	for uint64(len(rows)) < n {
		var row []bigquery.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		if first {
			first = false
			if offset > 0 && uint64(1+it.PageInfo().Remaining()) > total-offset {
				skip = offset
			}
		}
		if skip > 0 {
			skip--
			continue
		}
		// A row gets what the rows before it left of the budget; one it cuts
		// ends the page: kept when it is the first, so a page is never empty.
		r, rowCut := jsonRowWithin(row, it.Schema, maxRowsJSON-size)
		if rowCut {
			if len(rows) == 0 {
				rows = append(rows, r)
			}
			return rows, true, nil
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, false, fmt.Errorf("encode a result row: %w", err)
		}
		if len(rows) > 0 && size+len(b) > maxRowsJSON {
			return rows, true, nil
		}
		size += len(b)
		rows = append(rows, r)
	}
	return rows, false, nil
}
