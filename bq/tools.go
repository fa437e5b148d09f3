package bq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/genai"

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
	e := &env{client: client, cfg: cfg}
	ts := []tools.Tool{listTables{e}, tableSchema{e}, runQuery{e}, readResult{e}}
	if len(runbooks) > 0 {
		ts = append(ts, runbookTool{slices.Clone(runbooks)})
	}
	return ts
}

type env struct {
	client *bigquery.Client
	cfg    Config
}

// sqlName is how a query names the table: dataset.table when the tables
// live in the client's project, else `project.dataset.table`.
func (e *env) sqlName(id string) string {
	if e.cfg.Project == e.client.Project() {
		return id
	}
	return "`" + e.cfg.Project + "." + id + "`"
}

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

// ---- bigquery_tables

type listTables struct{ e *env }

func (listTables) Purpose() string {
	return "List the BigQuery tables that may be queried, with their descriptions."
}

func (listTables) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: "bigquery_tables",
		Description: "List the BigQuery tables you may query, with what each holds. No arguments. " +
			"Returns {tables:[{table, description, sql_name}], scan_limit, note}; sql_name (when present) is how to write the table in SQL. " +
			"Use bigquery_schema next for a table's columns, e.g. {tables:[{table:\"security_logs.auth_events\", description:\"SSH and sudo authentication events\"}], scan_limit:\"1.0 GiB\"}.",
		Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{}},
	}
}

type tableEntry struct {
	Table       string `json:"table"`
	Description string `json:"description,omitempty"`
	SQLName     string `json:"sql_name,omitempty"`
}

func (t listTables) Call(ctx context.Context, args map[string]any) (any, error) {
	out := struct {
		Tables    []tableEntry `json:"tables"`
		ScanLimit string       `json:"scan_limit"`
		Note      string       `json:"note"`
	}{
		ScanLimit: formatBytes(t.e.cfg.MaxScanBytes),
		Note:      "Only these tables can be described. Queries whose dry run would scan more than scan_limit are refused: filter on time columns and select only the columns you need.",
	}
	for _, tb := range t.e.cfg.Tables {
		en := tableEntry{Table: tb.ID, Description: tb.Description}
		if n := t.e.sqlName(tb.ID); n != tb.ID {
			en.SQLName = n
		}
		out.Tables = append(out.Tables, en)
	}
	return out, nil
}

// ---- bigquery_schema

type tableSchema struct{ e *env }

func (tableSchema) Purpose() string {
	return "Show one table's columns and types."
}

func (tableSchema) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: "bigquery_schema",
		Description: "Describe one table listed by bigquery_tables: its columns and size. " +
			"Returns {table, description, row_count, size, partitioned_by, clustered_by, columns:[{name, type, mode, description}]}; " +
			"fields of STRUCT columns appear as dotted paths (geo.city), and columns or fields with mode REPEATED are arrays that need UNNEST in SQL. " +
			"Example: table \"security_logs.auth_events\".",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"table": {Type: genai.TypeString, Description: "The table as dataset.table, one of those bigquery_tables lists."},
			},
			Required: []string{"table"},
		},
	}
}

type column struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Mode        string `json:"mode"`
	Description string `json:"description,omitempty"`
}

type schemaResult struct {
	Table         string   `json:"table"`
	Description   string   `json:"description,omitempty"`
	Type          string   `json:"type,omitempty"`
	RowCount      *uint64  `json:"row_count,omitempty"`
	Size          string   `json:"size,omitempty"`
	PartitionedBy string   `json:"partitioned_by,omitempty"`
	ClusteredBy   []string `json:"clustered_by,omitempty"`
	Columns       []column `json:"columns"`
	Note          string   `json:"note,omitempty"`
}

func (t tableSchema) Call(ctx context.Context, args map[string]any) (any, error) {
	name, err := tools.StringArg(args, "table", true, 1100)
	if err != nil {
		return nil, err
	}
	tb, ok := t.e.lookup(name)
	if !ok {
		return nil, tools.Reject("table %q is not one of the tables you may use; use one of: %s", name, strings.Join(t.e.tableIDs(), ", "))
	}
	ds, id, _ := strings.Cut(tb.ID, ".")
	md, err := t.e.client.DatasetInProject(t.e.cfg.Project, ds).Table(id).Metadata(ctx)
	if err != nil {
		if isNotFound(err) {
			return nil, tools.Reject("table %s is configured but does not exist in BigQuery project %s", tb.ID, t.e.cfg.Project)
		}
		return nil, classify("read the schema of "+tb.ID, err, false)
	}
	out := schemaResult{Table: tb.ID, Description: tb.Description}
	if md.Description != "" && md.Description != tb.Description {
		out.Description = joinText(tb.Description, md.Description)
	}
	if md.Type != "" && md.Type != bigquery.RegularTable {
		out.Type = string(md.Type)
	}
	if md.NumRows > 0 {
		n := md.NumRows
		out.RowCount = &n
	}
	if md.NumBytes > 0 {
		out.Size = formatBytes(md.NumBytes)
	}
	if p := md.TimePartitioning; p != nil {
		field := p.Field
		if field == "" {
			field = "_PARTITIONTIME"
		}
		typ := string(p.Type)
		if typ == "" {
			typ = "DAY"
		}
		out.PartitionedBy = fmt.Sprintf("%s (%s)", field, typ)
		if md.RequirePartitionFilter || p.RequirePartitionFilter {
			out.PartitionedBy += "; queries must filter on it"
		}
	} else if p := md.RangePartitioning; p != nil {
		out.PartitionedBy = p.Field + " (integer range)"
	}
	if md.Clustering != nil {
		out.ClusteredBy = md.Clustering.Fields
	}
	flattenSchema("", md.Schema, &out.Columns)
	if len(out.Columns) > maxSchemaFields {
		out.Note = fmt.Sprintf("showing the first %d of %d columns and fields", maxSchemaFields, len(out.Columns))
		out.Columns = out.Columns[:maxSchemaFields]
	}
	if out.Columns == nil {
		out.Columns = []column{}
	}
	return out, nil
}

// flattenSchema lists every column and, for STRUCT (RECORD) columns, every
// nested field as a dotted path, with GoogleSQL type names.
func flattenSchema(prefix string, s bigquery.Schema, out *[]column) {
	for _, f := range s {
		path := prefix + f.Name
		mode := "NULLABLE"
		switch {
		case f.Repeated:
			mode = "REPEATED"
		case f.Required:
			mode = "REQUIRED"
		}
		*out = append(*out, column{Name: path, Type: sqlType(f.Type), Mode: mode, Description: f.Description})
		if f.Type == bigquery.RecordFieldType {
			flattenSchema(path+".", f.Schema, out)
		}
	}
}

// sqlType maps the API's legacy type names to the GoogleSQL ones queries use.
func sqlType(t bigquery.FieldType) string {
	switch t {
	case bigquery.IntegerFieldType:
		return "INT64"
	case bigquery.FloatFieldType:
		return "FLOAT64"
	case bigquery.BooleanFieldType:
		return "BOOL"
	case bigquery.RecordFieldType:
		return "STRUCT"
	}
	return string(t)
}

// ---- bigquery_query

type runQuery struct{ e *env }

func (runQuery) Purpose() string {
	return "Run one read-only SELECT over the configured tables and preview its rows."
}

func (runQuery) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: "bigquery_query",
		Description: "Run one read-only GoogleSQL query (SELECT, or WITH ... SELECT) on the tables bigquery_tables lists. " +
			"Anything else (INSERT, UPDATE, DELETE, MERGE, CREATE, DROP, EXPORT, scripts, several statements, other tables, EXTERNAL_QUERY, INFORMATION_SCHEMA) is refused. " +
			"A dry run first estimates the bytes the query scans; a query over the scan limit is refused with the estimate, " +
			"so filter on time columns and select only the columns you need (avoid SELECT *). Prefer aggregations (COUNT, GROUP BY) to reading many rows. " +
			"Returns {handle, total_rows, bytes_processed, schema:[column names], preview:[[values in schema order]], next_offset, note}: " +
			"preview holds the first `limit` rows; read more with bigquery_result(handle, offset). " +
			"Example: sql \"SELECT source_ip, COUNT(*) AS failures FROM security_logs.auth_events WHERE NOT success " +
			"AND event_time >= TIMESTAMP '2026-11-20 00:00:00' GROUP BY source_ip ORDER BY failures DESC\", limit 10.",
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
	// Guard 1: only a single SELECT; a refusal never reaches BigQuery.
	if err := CheckSQL(sql); err != nil {
		return nil, tools.Reject("query refused (nothing was sent to BigQuery): %v", err)
	}
	c := t.e.client

	// Guard 2: a dry run, for the statement type, the tables it reads and
	// the scan estimate.
	dry := c.Query(sql)
	dry.DryRun = true
	dryJob, err := dry.Run(ctx)
	if err != nil {
		return nil, classify("dry run of the query", err, true)
	}
	st := dryJob.LastStatus()
	if st == nil {
		return nil, errors.New("the dry run returned no job status")
	}
	if err := st.Err(); err != nil {
		return nil, classify("dry run of the query", err, true)
	}
	var estimate int64
	var refs []*bigquery.Table
	if st.Statistics != nil {
		estimate = st.Statistics.TotalBytesProcessed
		if qs, ok := st.Statistics.Details.(*bigquery.QueryStatistics); ok {
			if qs.StatementType != "" && qs.StatementType != "SELECT" {
				return nil, tools.Reject("query refused: BigQuery reads it as a %s statement; only a SELECT query is allowed", qs.StatementType)
			}
			refs = qs.ReferencedTables
		}
	}
	// Guard 3: only the configured tables, nothing else in BigQuery.
	if err := t.e.checkTables(sql, refs); err != nil {
		return nil, err
	}
	if estimate > t.e.cfg.MaxScanBytes {
		return nil, tools.Reject("query refused: the query would scan %s, over the %s limit; add a time filter (on a partition column if the table has one) or select fewer columns",
			formatBytes(estimate), formatBytes(t.e.cfg.MaxScanBytes))
	}

	// Guard 4: the job itself may not bill more than the limit.
	q := c.Query(sql)
	q.MaxBytesBilled = t.e.cfg.MaxScanBytes
	job, err := q.Run(ctx)
	if err != nil {
		return nil, classify("run the query", err, false)
	}
	status, err := job.Wait(ctx)
	if err != nil {
		return nil, classify("run the query", err, false)
	}
	if err := status.Err(); err != nil {
		return nil, classify("run the query", err, false)
	}
	out := queryResult{Handle: encodeHandle(job.Location(), job.ID()), BytesProcessed: estimate}
	if status.Statistics != nil && status.Statistics.TotalBytesProcessed > 0 {
		out.BytesProcessed = status.Statistics.TotalBytesProcessed
	}
	page, err := t.e.readRows(ctx, job, 0, uint64(limit))
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

// ---- bigquery_result

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
	job, err := t.e.client.JobFromIDLocation(ctx, jobID, location)
	if err != nil {
		if isNotFound(err) {
			return nil, tools.Reject("no query result for handle %q (results are kept for about a day); run the query again with bigquery_query", handle)
		}
		return nil, classify("find the query result", err, false)
	}
	page, err := t.e.readRows(ctx, job, uint64(offset), uint64(limit))
	if err != nil {
		return nil, classify("read the query result", err, false)
	}
	if page.offsetPastEnd {
		return nil, tools.Reject("offset %d is past the last row: the result has %d rows%s", offset, page.total, page.pageableNote())
	}
	out := resultPage{Handle: handle, Offset: offset, TotalRows: page.total, Schema: page.schema, Rows: page.rows, NextOffset: page.next, Note: page.note}
	return out, nil
}

// ---- reading rows

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

// readRows reads up to n rows from offset of a finished query job's results.
// See Tools for how paging works on BigQuery and on the emulator.
func (e *env) readRows(ctx context.Context, job *bigquery.Job, offset, n uint64) (rowsPage, error) {
	it, err := job.Read(ctx)
	if err != nil {
		return rowsPage{}, err
	}
	p := rowsPage{total: it.TotalRows, schema: make([]string, len(it.Schema)), rows: [][]any{}}
	for i, f := range it.Schema {
		p.schema[i] = f.Name
	}
	p.pageable = min(p.total, uint64(e.cfg.MaxResultRows))
	if offset > 0 && offset >= p.pageable {
		p.offsetPastEnd = true
		return p, nil
	}
	n = min(n, p.pageable-offset) // offset < pageable, or both are 0
	if n > 0 {
		var cut bool
		p.rows, cut, err = collectRows(it, offset, n, p.total)
		if err != nil {
			return rowsPage{}, err
		}
		if cut {
			p.note = fmt.Sprintf("This page stops after %d rows to stay small; continue from next_offset.", len(p.rows))
		}
	}
	if end := offset + uint64(len(p.rows)); end < p.pageable {
		p.next = &end
	}
	if p.pageable < p.total {
		p.note = joinText(p.note, fmt.Sprintf("Only the first %d of the %d rows can be paged; aggregate or filter to see the rest.", p.pageable, p.total))
	}
	return p, nil
}

// collectRows reads up to n converted rows from offset. It asks the server
// for exactly that window; if the first page shows that the server ignored
// startIndex (it sent more rows than remain after offset, as the emulator
// does), it skips the first offset rows itself. It stops early once the rows
// would exceed maxRowsJSON bytes of JSON, and then reports cut.
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
		r := jsonRow(row, it.Schema)
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

// ---- handles

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

// ---- bigquery_runbook

type runbookTool struct{ runbooks []Runbook }

func (runbookTool) Purpose() string {
	return "List or read ready-made SQL runbooks for common log questions."
}

func (runbookTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: "bigquery_runbook",
		Description: "Vetted SQL runbooks for common investigations. Without name, lists them: {runbooks:[{name, title, description}]}. " +
			"With name, returns {name, title, description, sql}; run the sql with bigquery_query, after filling in any parameters its description names. " +
			"Example: name \"failed_ssh_by_ip\".",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"name": {Type: genai.TypeString, Description: "The runbook's name from the list; omit it to list the runbooks."},
			},
		},
	}
}

func (t runbookTool) Call(ctx context.Context, args map[string]any) (any, error) {
	name, err := tools.StringArg(args, "name", false, 200)
	if err != nil {
		return nil, err
	}
	if name == "" {
		type entry struct {
			Name        string `json:"name"`
			Title       string `json:"title"`
			Description string `json:"description,omitempty"`
		}
		out := struct {
			Runbooks []entry `json:"runbooks"`
		}{Runbooks: make([]entry, 0, len(t.runbooks))}
		for _, rb := range t.runbooks {
			out.Runbooks = append(out.Runbooks, entry{rb.Name, rb.Title, rb.Description})
		}
		return out, nil
	}
	name = strings.TrimSuffix(name, ".sql")
	for _, rb := range t.runbooks {
		if rb.Name == name {
			return rb, nil
		}
	}
	names := make([]string, len(t.runbooks))
	for i, rb := range t.runbooks {
		names[i] = rb.Name
	}
	return nil, tools.Reject("no runbook named %q; the runbooks are: %s", name, strings.Join(names, ", "))
}

// ---- errors

// transientReasons are BigQuery error reasons worth retrying.
var transientReasons = map[string]bool{
	"backendError": true, "internalError": true, "jobBackendError": true, "jobInternalError": true,
	"rateLimitExceeded": true, "jobRateLimitExceeded": true, "quotaExceeded": true,
}

// classify turns a BigQuery error into a Rejection (which the model sees)
// when retrying cannot help: an invalid query, a missing table, access
// denied, the bytes-billed cap. Transient failures (5xx, 429, rate limits,
// backend errors) are returned as they are, for Temporal to retry. In a dry
// run (dryRun), any error in the job status is about the query itself.
func classify(what string, err error, dryRun bool) error {
	if err == nil || tools.IsRejection(err) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		if ge.Code == http.StatusTooManyRequests || ge.Code >= 500 {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ge.Code == http.StatusForbidden {
			for _, it := range ge.Errors {
				if transientReasons[it.Reason] {
					return fmt.Errorf("%s: %w", what, err)
				}
			}
		}
		if ge.Code >= 400 {
			return tools.Reject("%s failed: %s", what, apiMessage(ge))
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	var be *bigquery.Error
	if errors.As(err, &be) {
		if !dryRun && transientReasons[be.Reason] {
			return fmt.Errorf("%s: %w", what, err)
		}
		return tools.Reject("%s failed: %s", what, be.Message)
	}
	var me bigquery.MultiError
	if errors.As(err, &me) && len(me) > 0 {
		return classify(what, me[0], dryRun)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func apiMessage(ge *googleapi.Error) string {
	if ge.Message != "" {
		return ge.Message
	}
	for _, it := range ge.Errors {
		if it.Message != "" {
			return it.Message
		}
	}
	return ge.Error()
}

func isNotFound(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusNotFound
}
