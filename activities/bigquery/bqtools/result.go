package bqtools

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/tools"
)

// readResult is bigquery_result: pages of an earlier query's rows.
type readResult struct{ e *env }

func (readResult) Purpose() string {
	return "Page through the rows of an earlier query."
}

func (readResult) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: "bigquery_result",
		Description: "Read a page of rows of an earlier bigquery_query result, without running the query again. " +
			"Returns {handle, offset, total_rows, schema:[column names], rows:[[values in schema order]], next_offset, note}; " +
			"next_offset is absent after the last page. Example: handle \"8f2c1e...\" (from bigquery_query), offset 20, limit 50.",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"handle": {Type: genai.TypeString, Description: "The handle bigquery_query returned."},
				"offset": {Type: genai.TypeInteger, Description: "Index of the first row to return (0 is the first row); default 0."},
				"limit":  {Type: genai.TypeInteger, Description: fmt.Sprintf("Rows to return, 1-%d, default %d.", pageMax, pageDefault)},
			},
			Required: []string{"handle"},
		},
	}
}

type resultPage struct {
	Handle     string   `json:"handle"`
	Offset     int      `json:"offset"`
	TotalRows  uint64   `json:"total_rows"`
	Schema     []string `json:"schema"`
	Rows       [][]any  `json:"rows"`
	NextOffset *uint64  `json:"next_offset,omitempty"`
	Note       string   `json:"note,omitempty"`
}

func (t readResult) Call(ctx context.Context, args map[string]any) (any, error) {
	handle, err := tools.StringArg(args, "handle", true, 1200)
	if err != nil {
		return nil, err
	}
	location, jobID, err := decodeHandle(handle)
	if err != nil {
		return nil, err
	}
	offset, err := tools.IntArg(args, "offset", 0, 0, t.e.cfg.MaxResultRows)
	if err != nil {
		return nil, err
	}
	limit, err := tools.IntArg(args, "limit", pageDefault, 1, pageMax)
	if err != nil {
		return nil, err
	}
	// Only this session's jobs: a handle from another session, or a made-up
	// one, never reaches BigQuery.
	if !strings.HasPrefix(jobID, sessionPrefix(t.e.session(ctx))) {
		return nil, tools.Reject("handle %q is not a result of this session's queries; run the query with bigquery_query", handle)
	}
	job, err := t.e.backend.findJob(ctx, jobID, location)
	if err != nil {
		if errors.Is(err, errJobNotFound) {
			return nil, tools.Reject("no query result for handle %q (results are kept for about a day); run the query again with bigquery_query", handle)
		}
		return nil, classify("find the query result", err, false)
	}
	if err := t.e.recheck(ctx, job); err != nil {
		return nil, err
	}
	page, err := job.read(ctx, uint64(offset), uint64(limit), t.e.cfg.MaxResultRows)
	if err != nil {
		return nil, classify("read the query result", err, false)
	}
	if page.offsetPastEnd {
		return nil, tools.Reject("offset %d is past the last row: the result has %d rows%s", offset, page.total, page.pageableNote())
	}
	out := resultPage{Handle: handle, Offset: offset, TotalRows: page.total, Schema: page.schema, Rows: page.rows, NextOffset: page.next, Note: page.note}
	return out, nil
}

// recheck holds a job's query to the guard again before its rows are
// read, by bigquery_query and bigquery_result alike: checkSQL with the
// configuration as it is now, and what the job's statistics say it was
// and read (checkRefs: statement type, referenced tables, routines and
// property graphs). A job that is not a query is refused.
func (e *env) recheck(ctx context.Context, job queryJob) error {
	sql := job.sql()
	if sql == "" {
		return tools.Reject("the job behind this handle is not a query; run the query with bigquery_query")
	}
	if err := checkSQL(sql, e.policy()); err != nil {
		return tools.Reject("the query behind this handle is refused now: %v", err)
	}
	refs, err := job.referenced(ctx)
	if err != nil {
		return classify("read what the query job read", err, false)
	}
	return e.checkRefs(refs, true)
}

// Reading rows.

type rowsPage struct {
	total         uint64
	pageable      uint64 // rows that can be paged: min(total, MaxResultRows)
	schema        []string
	rows          [][]any
	next          *uint64 // nil when there is nothing after this page
	note          string
	offsetPastEnd bool
}

func (p rowsPage) pageableNote() string {
	if p.pageable < p.total {
		return fmt.Sprintf(", of which the first %d can be paged", p.pageable)
	}
	return ""
}

// pageRows makes the page of up to n rows from offset of a result of total
// rows, of which the first maxRows can be paged; fetch reads the rows of a
// window (and reports a page cut short to stay small).
func pageRows(total uint64, schema []string, maxRows int, offset, n uint64, fetch func(offset, n uint64) ([][]any, bool, error)) (rowsPage, error) {
	p := rowsPage{total: total, schema: schema, rows: [][]any{}}
	p.pageable = min(p.total, uint64(maxRows))
	if offset > 0 && offset >= p.pageable {
		p.offsetPastEnd = true
		return p, nil
	}
	n = min(n, p.pageable-offset) // offset < pageable, or both are 0
	cut := false
	if n > 0 {
		var rows [][]any
		var err error
		rows, cut, err = fetch(offset, n)
		if err != nil {
			return rowsPage{}, err
		}
		p.rows = rows
	}
	if end := offset + uint64(len(p.rows)); end < p.pageable {
		p.next = &end
	}
	switch {
	case cut && p.next != nil:
		p.note = fmt.Sprintf("This page stops after %d rows to stay small; continue from next_offset.", len(p.rows))
	case cut: // nothing left to page: the last row itself was cut
		p.note = "The last row is cut to stay small; select fewer or narrower columns to see it whole."
	}
	if p.pageable < p.total {
		p.note = joinText(p.note, fmt.Sprintf("Only the first %d of the %d rows can be paged; aggregate or filter to see the rest.", p.pageable, p.total))
	}
	return p, nil
}

// Handles.

var (
	jobIDPattern    = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	locationPattern = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
)

// encodeHandle makes a result handle from a job's location and ID:
// "location:jobID", or the job ID alone when the location is empty (as on
// the emulator). Neither part can contain ':'.
func encodeHandle(location, jobID string) string {
	if location == "" {
		return jobID
	}
	return location + ":" + jobID
}

func decodeHandle(h string) (location, jobID string, err error) {
	jobID = h
	if loc, id, ok := strings.Cut(h, ":"); ok {
		location, jobID = loc, id
		if !locationPattern.MatchString(location) {
			return "", "", tools.Reject("handle %q is not one that bigquery_query returned", h)
		}
	}
	if !jobIDPattern.MatchString(jobID) {
		return "", "", tools.Reject("handle %q is not one that bigquery_query returned", h)
	}
	return location, jobID, nil
}
