package bqtools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/size"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

// runQuery is bigquery_query: a guarded query and a preview of its rows.
type runQuery struct{ e *env }

func (runQuery) Purpose() string {
	return "Run one read-only SELECT over the configured tables and preview its rows."
}

func (runQuery) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: toolcall.BigQueryQuery,
		Description: "Run one read-only GoogleSQL query (SELECT, or WITH ... SELECT) on the tables bigquery_tables lists. " +
			"Anything else (INSERT, UPDATE, DELETE, MERGE, CREATE, DROP, EXPORT, scripts, several statements, other tables, EXTERNAL_QUERY, INFORMATION_SCHEMA, " +
			"ML., AI. and OBJ. functions, models, user-defined and table-valued functions) is refused; built-in functions such as REGEXP_CONTAINS, NET.HOST and SAFE.PARSE_TIMESTAMP are fine. " +
			"A dry run first estimates the bytes the query scans; a query over the scan limit is refused with the estimate, " +
			"so filter on time columns and select only the columns you need (avoid SELECT *). Prefer aggregations (COUNT, GROUP BY) to reading many rows. " +
			"Returns {handle, total_rows, bytes_processed, schema:[column names], preview:[[values in schema order]], next_offset, note}: " +
			"preview holds the first `limit` rows; read more with bigquery_result(handle, offset). " +
			"Example: sql \"SELECT source_ip, COUNT(*) AS failures FROM security_logs.auth_events WHERE NOT success " +
			"AND event_time >= TIMESTAMP '2026-11-20 08:00:00+00' GROUP BY source_ip ORDER BY failures DESC\", limit 10.",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"sql":   {Type: genai.TypeString, Description: "One GoogleSQL SELECT statement. Name tables as dataset.table (or as sql_name from bigquery_tables)."},
				"limit": {Type: genai.TypeInteger, Description: fmt.Sprintf("Rows to include in the preview, 0-%d, default %d.", previewMax, previewDefault)},
			},
			Required: []string{"sql"},
		},
	}
}

type queryResult struct {
	Handle         string   `json:"handle"`
	TotalRows      uint64   `json:"total_rows"`
	BytesProcessed int64    `json:"bytes_processed"`
	Schema         []string `json:"schema"`
	Preview        [][]any  `json:"preview"`
	NextOffset     *uint64  `json:"next_offset,omitempty"`
	Note           string   `json:"note"`
}

func (t runQuery) Call(ctx context.Context, args map[string]any) (any, error) {
	sql, err := tools.StringArg(args, "sql", true, maxSQLBytes)
	if err != nil {
		return nil, err
	}
	limit, err := tools.IntArg(args, "limit", previewDefault, 0, previewMax)
	if err != nil {
		return nil, err
	}
	// Guard 1: only a single SELECT of built-in functions; a refusal never
	// reaches BigQuery.
	if err := checkSQL(sql, t.e.policy()); err != nil {
		return nil, tools.Reject("query refused (nothing was sent to BigQuery): %v", err)
	}
	// Guard 2: a dry run, for the statement type, the tables and routines it
	// reads, and the scan estimate.
	dry, err := t.e.backend.dryRun(ctx, sql)
	if err != nil {
		return nil, classify("dry run of the query", err, true)
	}
	// Guard 3: a SELECT of only the configured tables and table functions,
	// as the dry run reports them (checkSQL held the names in the text to
	// them too).
	if err := t.e.checkRefs(dry.queryRefs, false); err != nil {
		return nil, err
	}
	if dry.bytes > t.e.cfg.MaxScanBytes {
		return nil, tools.Reject("query refused: the query would scan %s, over the %s limit; add a time filter (on a partition column if the table has one) or select fewer columns",
			size.Bytes(dry.bytes), size.Bytes(t.e.cfg.MaxScanBytes))
	}
	// Guard 4: the job may bill no more than the smaller of max_scan_bytes
	// and the share of the investigation's budget lent to this call, and
	// what BigQuery will bill at least must fit under that.
	call := tools.CallInfoFrom(ctx)
	billed, tables := billedEstimate(dry, sql)
	billCap := t.e.cfg.MaxScanBytes
	if call.ScanBytesLeft != 0 {
		left := max(call.ScanBytesLeft, 0)
		if billed > left {
			return nil, tools.Reject("query refused: the investigation's BigQuery scan budget (max_scan_bytes of the investigation) has %s left and this query would scan %s%s; narrow it with a time filter or fewer columns, or answer from the results you have",
				size.Bytes(left), size.Bytes(dry.bytes), minimumNote(billed, dry.bytes, tables))
		}
		billCap = min(billCap, left)
	}
	if billed > billCap {
		return nil, tools.Reject("query refused: the query would scan %s%s, over the %s limit; read fewer tables",
			size.Bytes(dry.bytes), minimumNote(billed, dry.bytes, tables), size.Bytes(billCap))
	}

	// Guard 5: the job runs under that cap and the job timeout, and a
	// retried call finds its earlier job. A cap of 0 would mean none: a
	// query that bills nothing (no table) gets 1 byte. runJob counts what
	// its jobs billed, those that failed too.
	job, stats, err := t.e.runJob(ctx, sql, dry.location, max(billCap, 1))
	if err != nil {
		return nil, err
	}
	// What the job ran and read, as its statistics say, before any row is
	// returned: the same check as bigquery_result's.
	if err := t.e.recheck(ctx, job); err != nil {
		return nil, err
	}
	out := queryResult{Handle: encodeHandle(job.location(), job.id()), BytesProcessed: dry.bytes}
	if stats.processed > 0 {
		out.BytesProcessed = stats.processed
	}
	page, err := job.read(ctx, 0, uint64(limit), t.e.cfg.MaxResultRows)
	if err != nil {
		return nil, classify("read the query results", err, false)
	}
	out.TotalRows, out.Schema, out.Preview, out.NextOffset = page.total, page.schema, page.rows, page.next
	switch {
	case page.total == 0:
		out.Note = "The query returned no rows."
	case page.next == nil && uint64(len(page.rows)) == page.total:
		out.Note = fmt.Sprintf("All %d rows are in the preview.", page.total)
	case len(page.rows) == 0:
		out.Note = fmt.Sprintf("No rows previewed (limit 0) of %d. Read them with bigquery_result(handle, offset 0).", page.total)
	case page.next != nil:
		out.Note = fmt.Sprintf("The preview shows rows 1-%d of %d. Read more with bigquery_result(handle, offset %d).", len(page.rows), page.total, *page.next)
	default:
		out.Note = fmt.Sprintf("The preview shows rows 1-%d of %d.", len(page.rows), page.total)
	}
	if page.note != "" {
		out.Note += " " + page.note
	}
	return out, nil
}

// BigQuery's on-demand billing: bytes rounded up to the next MiB, and at
// least 10 MiB for each table the query references.
const (
	billingUnit     = 1 << 20
	minBillPerTable = 10 << 20
)

// billedEstimate is the least BigQuery will bill for the query whose dry
// run is dry: its bytes rounded up to a MiB, and no less than 10 MiB per
// table it reads (those the dry run reports, or the distinct names the
// query reads as tables when it reports none, as on the emulator). It also
// returns the number of tables.
func billedEstimate(dry dryRunInfo, sql string) (int64, int) {
	seen := map[string]bool{}
	for _, t := range dry.tables {
		seen[t.ProjectID+"."+t.DatasetID+"."+t.TableID] = true
	}
	if len(seen) == 0 {
		names, ctes, _ := tableRefs(sql)
		for _, n := range names {
			if !slices.ContainsFunc(ctes, func(c string) bool { return strings.EqualFold(c, n) }) {
				seen[n] = true
			}
		}
	}
	rounded := (max(dry.bytes, 0) + billingUnit - 1) / billingUnit * billingUnit
	return max(rounded, int64(len(seen))*minBillPerTable), len(seen)
}

// minimumNote explains a bill above the scan, or says nothing.
func minimumNote(billed, scanned int64, tables int) string {
	if billed <= scanned {
		return ""
	}
	return fmt.Sprintf(", which BigQuery bills as %s (whole MiB, and at least 10 MiB for each of the %d tables it reads)", size.Bytes(billed), tables)
}
