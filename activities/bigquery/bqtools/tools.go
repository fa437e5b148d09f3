package bqtools

import (
	"context"
	"slices"
	"strings"

	"cloud.google.com/go/bigquery"

	"github.com/secops-agent/investigator/tools"
)

// Limits of the tools' arguments and results.
const (
	previewDefault  = 20
	previewMax      = 100
	pageDefault     = 50
	pageMax         = 200
	maxSQLBytes     = 64 << 10
	maxSchemaFields = 300
	// maxRowsJSON bounds the JSON size of the rows of one preview or page,
	// so that tool results stay small in the workflow history; a page that
	// would be larger ends early and next_offset says where to go on.
	maxRowsJSON = 48 << 10
)

// Tools returns the BigQuery sub-agent's tools: bigquery_tables,
// bigquery_schema, bigquery_query, bigquery_result, and bigquery_runbook when
// there are runbooks. Zero limits in cfg get the defaults.
//
// Paging. bigquery_query returns a handle, the BigQuery job ID (prefixed with
// the job's location when it has one, "EU:job_abc"), and bigquery_result
// reads pages back from the job's results with client.JobFromIDLocation and
// Job.Read. The rows therefore live in BigQuery itself (real BigQuery keeps
// a query's results in a temporary table for about 24 hours; the emulator
// keeps its jobs for its lifetime), nothing is held in the worker, and any
// worker can serve any page after a restart. No query is re-run to page.
//
// Real BigQuery pages on the server: RowIterator.StartIndex becomes
// getQueryResults' startIndex and the page size its maxResults. The
// goccy/bigquery-emulator (v0.6.6) ignores both and always returns every row
// from the first. readRows detects that (the first page holds more rows than
// are left after offset, which a server that honours startIndex never sends)
// and skips the first offset rows itself, so paging is correct on both, and
// only as costly as it must be on each.
func Tools(client *bigquery.Client, cfg Config, runbooks []Runbook) []tools.Tool {
	cfg = cfg.withDefaults()
	if cfg.Project == "" {
		cfg.Project = client.Project()
	}
	e := newEnv(client, cfg)
	ts := []tools.Tool{listTables{e}, tableSchema{e}, runQuery{e}, readResult{e}}
	if len(runbooks) > 0 {
		ts = append(ts, runbookTool{slices.Clone(runbooks)})
	}
	return ts
}

// newEnv reaches BigQuery through client (and its REST service, when
// NewClient made it).
func newEnv(client *bigquery.Client, cfg Config) *env {
	info := infoOf(client)
	return &env{client: client, cfg: cfg, backend: clientBackend{client: client, rest: info.rest, emu: info.emulator}, anonymous: randomJobID("tools")}
}

type env struct {
	client  *bigquery.Client
	cfg     Config
	backend queryBackend
	// anonymous is the session of calls that name none (a tool run outside
	// an activity): only this env's own calls share it.
	anonymous string
}

// session is the session of the tool call that ctx carries.
func (e *env) session(ctx context.Context) string {
	if s := tools.CallInfoFrom(ctx).Session; s != "" {
		return s
	}
	return e.anonymous
}

// sqlName is how a query names the table id.
func (e *env) sqlName(id string) string { return e.policy().sqlName(id) }

func (e *env) tableIDs() []string {
	ids := make([]string, len(e.cfg.Tables))
	for i, t := range e.cfg.Tables {
		ids[i] = t.ID
	}
	return ids
}

// lookup finds a configured table by "dataset.table", optionally quoted or
// prefixed with the configured project.
func (e *env) lookup(name string) (Table, bool) {
	name = strings.ReplaceAll(strings.TrimSpace(name), "`", "")
	if p, rest, ok := strings.Cut(name, "."); ok && strings.Count(name, ".") == 2 && p == e.cfg.Project {
		name = rest
	}
	for _, t := range e.cfg.Tables {
		if t.ID == name {
			return t, true
		}
	}
	for _, t := range e.cfg.Tables {
		if strings.EqualFold(t.ID, name) {
			return t, true
		}
	}
	return Table{}, false
}
