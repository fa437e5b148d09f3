package bqtools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/secops-agent/investigator/tools"
)

// maxJobsPerCall bounds the jobs one tool call may create: one, and one
// more each time an earlier one failed with a transient BigQuery error.
const maxJobsPerCall = 5

// runJob runs sql as a query job that may bill at most maxBilled bytes,
// and waits for it. Its ID derives from the session and the tool call's ID
// (jobID), so that a retry of the activity, which has the same call ID,
// finds the job an earlier attempt created, waits for it and reads it,
// instead of running (and billing) the query again, and so that
// bigquery_result can tell this session's jobs (sessionPrefix). Without a
// call ID the job gets a random one. A job that an earlier attempt left
// failed with a transient error, or cancelled, is passed over for the next
// ID (base_2, base_3, ...), as is, defensively, a job under the ID that
// holds another query. When ctx ends while the job runs (the activity is
// cancelled or times out), the job is cancelled. Every job it waited for
// counts against the call's scan budget (tools.CallInfo.AddScanned), a
// failed or passed-over one by its statistics, since BigQuery may bill a
// cancelled job; a job this attempt cancelled is counted by the attempt
// that passes it over. Errors are classified for the tool.
func (e *env) runJob(ctx context.Context, sql, location string, maxBilled int64) (queryJob, jobStats, error) {
	o := jobOptions{location: location, maxBytesBilled: maxBilled, timeout: e.cfg.JobTimeout}
	call := tools.CallInfoFrom(ctx)
	session := e.session(ctx)
	if call.ID == "" {
		o.id = randomJobID(strings.TrimSuffix(sessionPrefix(session), "_"))
		job, err := e.backend.startQuery(ctx, sql, o)
		if err != nil {
			return nil, jobStats{}, classify("run the query", err, false)
		}
		stats, err := waitJob(ctx, job)
		if err != nil {
			if cerr := countEnded(ctx, job, call); cerr != nil {
				return nil, jobStats{}, cerr
			}
			return nil, jobStats{}, e.jobError(err)
		}
		call.AddScanned(stats.bytes())
		return job, stats, nil
	}
	base := jobID(session, call.ID)
	for n := 1; n <= maxJobsPerCall; n++ {
		o.id = base
		if n > 1 {
			o.id = fmt.Sprintf("%s_%d", base, n)
		}
		job, earlier, err := e.findOrStart(ctx, sql, o)
		if err != nil {
			return nil, jobStats{}, classify("run the query", err, false)
		}
		if job == nil {
			continue // the ID holds another query
		}
		stats, err := waitJob(ctx, job)
		if err == nil {
			call.AddScanned(stats.bytes())
			return job, stats, nil
		}
		if cerr := countEnded(ctx, job, call); cerr != nil {
			return nil, jobStats{}, cerr
		}
		var be *bigquery.Error
		if earlier && ctx.Err() == nil && errors.As(err, &be) && (transientReasons[be.Reason] || be.Reason == "stopped") {
			continue // an earlier attempt's job failed transiently or was cancelled: run it again
		}
		return nil, jobStats{}, e.jobError(err)
	}
	return nil, jobStats{}, fmt.Errorf("run the query: the %d jobs of this call (%s...) all failed or were taken", maxJobsPerCall, base)
}

// countEnded counts what a job that ended without rows was billed, as its
// statistics say. Nothing is counted while ctx has ended (this attempt
// cancelled the job; the next one counts it); a job whose statistics
// cannot be read fails the call (a retryable error when BigQuery's is), so
// that no replacement runs uncounted.
func countEnded(ctx context.Context, job queryJob, call tools.CallInfo) error {
	if ctx.Err() != nil {
		return nil
	}
	stats, err := job.stats(ctx)
	if err != nil {
		return classify("read what the failed query job "+job.id()+" billed", err, false)
	}
	call.AddScanned(stats.bytes())
	return nil
}

// cancelTimeout bounds the request that cancels a job after its activity
// ended.
const cancelTimeout = 10 * time.Second

// waitJob waits for job. If ctx ends first, because the activity was
// cancelled (a stop or cancel reaches it through its heartbeat) or timed
// out, it cancels the job, so that BigQuery stops running and billing it:
// nobody will read its rows.
func waitJob(ctx context.Context, job queryJob) (jobStats, error) {
	stats, err := job.wait(ctx)
	if err != nil && ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
		defer cancel()
		if cerr := job.cancel(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cancel the job %s: %w", job.id(), cerr))
		}
	}
	return stats, err
}

// findOrStart returns the job o.id names if it exists (earlier is true),
// or creates it. A job that exists under o.id but holds another query is
// returned as nil.
func (e *env) findOrStart(ctx context.Context, sql string, o jobOptions) (job queryJob, earlier bool, err error) {
	job, err = e.backend.findJob(ctx, o.id, o.location)
	if errors.Is(err, errJobNotFound) {
		job, err = e.backend.startQuery(ctx, sql, o)
		if !errors.Is(err, errJobExists) {
			return job, false, err
		}
		// Created between the look-up and the insert (BigQuery answers
		// 409): it is the one to wait for.
		job, err = e.backend.findJob(ctx, o.id, o.location)
	}
	if err != nil {
		return nil, false, err
	}
	if job.sql() != sql {
		return nil, true, nil
	}
	return job, true, nil
}

// jobError classifies a query job's failure, naming the job timeout when
// BigQuery ended the job for running too long.
func (e *env) jobError(err error) error {
	var be *bigquery.Error
	if errors.As(err, &be) && (be.Reason == "timeout" || strings.Contains(strings.ToLower(be.Message), "timeout") || strings.Contains(strings.ToLower(be.Message), "timed out")) {
		return classify(fmt.Sprintf("run the query (job timeout %s)", e.cfg.JobTimeout), err, false)
	}
	return classify("run the query", err, false)
}

// sessionPrefix starts the ID of every job that session's queries create:
// investigator_, 24 hex digits of a hash of the session (the workflow ID),
// and _. bigquery_result reads only jobs whose ID has its session's prefix,
// so a handle from another session, or one made up, is refused before
// anything reaches BigQuery.
func sessionPrefix(session string) string {
	sum := sha256.Sum256([]byte("bigquery session\x00" + session))
	return "investigator_" + hex.EncodeToString(sum[:12]) + "_"
}

// jobID makes a BigQuery job ID from the session and a tool call's ID: the
// session's prefix, the call ID with every character outside
// [A-Za-z0-9_-] replaced by _, cut to 200 bytes, and a hash of the whole
// call ID, so that two call IDs that read alike after the replacement
// ("a/b", "a_b") or the cut never share a job. BigQuery allows up to 1024
// characters of that alphabet.
func jobID(session, callID string) string {
	clean := []byte(strings.TrimPrefix(callID, session+"/"))
	for i, c := range clean {
		if !(c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			clean[i] = '_'
		}
	}
	if len(clean) > 200 {
		clean = clean[:200]
	}
	sum := sha256.Sum256([]byte(callID))
	return sessionPrefix(session) + string(clean) + "_" + hex.EncodeToString(sum[:8])
}
