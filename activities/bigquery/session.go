package bigquery

import (
	"context"
	"slices"
	"strings"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery/bqtools"
	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/toolcall"
)

// sessionView is what introspection sees of a sub-agent session: the
// structure of its tool calls, built from the calls and their stored
// results, never by filtering text. It holds the schemas the session read,
// and per call the tool, the query's SQL without values
// (bqtools.SQLWithoutValues), the row counts and what kind of failure an
// error was (failure): a phrase from a fixed set and the known names it
// mentions, never its text. No row, no model text (the model read the rows
// before writing it), no request (the parent model wrote it from the
// alert), no error message (BigQuery's can quote a row) and no answer reach
// it, so nothing a log line says can become a claim.
type sessionView struct {
	Schemas []schemaView `json:"schemas"`
	Calls   []callView   `json:"calls"`
}

type schemaView struct {
	Table   string       `json:"table"`
	Columns []columnView `json:"columns"`
	// Masked counts the columns left out for a name that is not a
	// plausible identifier (memory.PlausibleColumn): a log sink can make a
	// column from a row's JSON key, so such a name is row text.
	Masked int `json:"masked_columns,omitempty"`
}

type columnView struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Mode string `json:"mode,omitempty"`
}

type callView struct {
	Tool string `json:"tool"`
	// Table is the table whose schema bigquery_schema read.
	Table string `json:"table,omitempty"`
	// SQL is a query's (or a runbook's) SQL without values.
	SQL string `json:"sql,omitempty"`
	// TotalRows is how many rows the query returned, Rows how many the
	// call showed the model.
	TotalRows *int64 `json:"total_rows,omitempty"`
	Rows      *int   `json:"rows,omitempty"`
	// Error is what kind of failure the call was (knownNames.failure).
	Error string `json:"error,omitempty"`
	// message is the tool's error message, which only failure reads.
	message string
}

// Bounds of the view: a query (the sub-agent's 20 calls could otherwise
// bring 64 KiB of SQL each), the names an error's kind lists.
const (
	maxSQLInView       = 4 << 10
	maxNamesOfAFailure = 8
)

// The sub-agent's tools whose results the view reads, as their
// declarations in bqtools name them (TestSessionToolNames checks them).
const (
	schemaTool  = "bigquery_schema"
	resultTool  = "bigquery_result"
	runbookTool = "bigquery_runbook"
)

// schemas returns the schemas the session read, for memory.CheckClaim.
func (v sessionView) schemas() []memory.TableSchema {
	out := make([]memory.TableSchema, len(v.Schemas))
	for i, s := range v.Schemas {
		out[i].Table = s.Table
		for _, c := range s.Columns {
			out[i].Columns = append(out[i].Columns, c.Name)
		}
	}
	return out
}

// session builds the view of a sub-agent session from its transcript: each
// model turn's function calls paired with the function responses that
// follow it, in call order.
func (a *Activities) session(ctx context.Context, session string, refs []activities.Ref) (sessionView, error) {
	contents, err := a.Model.Contents(ctx, session, "", refs)
	if err != nil {
		return sessionView{}, err
	}
	v := sessionView{Schemas: []schemaView{}, Calls: []callView{}}
	for i, c := range contents {
		if c.Role != "model" {
			continue
		}
		var responses []map[string]any
		var names []string
		if i+1 < len(contents) {
			for _, p := range contents[i+1].Parts {
				if p.FunctionResponse != nil {
					responses = append(responses, p.FunctionResponse.Response)
					names = append(names, p.FunctionResponse.Name)
				}
			}
		}
		n := 0
		for _, p := range c.Parts {
			if p.FunctionCall == nil {
				continue
			}
			var resp map[string]any
			if n < len(responses) && names[n] == p.FunctionCall.Name {
				resp = responses[n]
			}
			n++
			v.add(a, p.FunctionCall.Name, p.FunctionCall.Args, resp)
		}
	}
	// Queries read before their table's schema keep the table's columns
	// masked: mask again now that every schema is known.
	known := v.known(a.Tables)
	for i := range v.Calls {
		v.Calls[i].SQL = known.sql(v.Calls[i].SQL)
		if v.Calls[i].message != "" {
			v.Calls[i].Error = known.failure(v.Calls[i].message)
		}
	}
	return v, nil
}

// add records one call and its result (nil when the session holds none).
// The SQL and the error message are kept raw here; session masks the SQL
// and writes the error's kind.
func (v *sessionView) add(a *Activities, tool string, args, resp map[string]any) {
	call := callView{Tool: "(unknown tool)"}
	if a.Tools != nil {
		if _, ok := a.Tools.Lookup(tool); ok {
			call.Tool = tool
		}
	}
	if msg, ok := resp["error"].(string); ok {
		call.Error, call.message = failedCall, msg
	}
	if cut, _ := resp["truncated"].(bool); cut {
		call.Error, call.message = "the result was cut to fit the tool-result limit; its contents are not known", ""
		resp = nil
	}
	switch call.Tool {
	case toolcall.BigQueryQuery:
		call.SQL, _ = args["sql"].(string)
		if call.Error == "" && resp != nil {
			call.TotalRows, call.Rows = count(resp["total_rows"]), length(resp["preview"])
		}
	case resultTool:
		if call.Error == "" && resp != nil {
			call.TotalRows, call.Rows = count(resp["total_rows"]), length(resp["rows"])
		}
	case runbookTool:
		call.SQL, _ = resp["sql"].(string)
	case schemaTool:
		if call.Error == "" && resp != nil {
			if s, ok := schemaOf(resp, a.Tables); ok {
				call.Table = s.Table
				v.Schemas = append(v.Schemas, s)
			}
		}
	}
	v.Calls = append(v.Calls, call)
}

// schemaOf reads a bigquery_schema result: a configured table and its
// columns with their GoogleSQL types and modes. Columns whose names are
// not plausible identifiers are only counted, so neither the view nor
// the names its SQL keeps (known) hold them.
func schemaOf(resp map[string]any, tables []string) (schemaView, bool) {
	name, _ := resp["table"].(string)
	s := schemaView{Columns: []columnView{}}
	for _, t := range tables {
		if t == name {
			s.Table = t
		}
	}
	if s.Table == "" {
		return schemaView{}, false
	}
	cols, _ := resp["columns"].([]any)
	for _, c := range cols {
		m, _ := c.(map[string]any)
		col := columnView{}
		col.Name, _ = m["name"].(string)
		col.Type, _ = m["type"].(string)
		col.Mode, _ = m["mode"].(string)
		if col.Name == "" {
			continue
		}
		if !memory.PlausibleColumn(col.Name) {
			s.Masked++
			continue
		}
		if !memory.IsSQLWord(col.Type) {
			col.Type = "?"
		}
		if !memory.IsSQLWord(col.Mode) {
			col.Mode = ""
		}
		s.Columns = append(s.Columns, col)
	}
	return s, true
}

func count(v any) *int64 {
	f, ok := v.(float64)
	if !ok {
		return nil
	}
	n := int64(f)
	return &n
}

func length(v any) *int {
	l, ok := v.([]any)
	if !ok {
		return nil
	}
	n := len(l)
	return &n
}

// knownNames are the names introspection may see: the configured tables
// and the columns of the schemas the session read, each dotted part, in
// lower case.
type knownNames map[string]bool

func (v sessionView) known(tables []string) knownNames {
	k := knownNames{}
	add := func(name string) {
		for _, w := range strings.Split(strings.ToLower(name), ".") {
			k[w] = true
		}
	}
	for _, t := range tables {
		add(t)
	}
	for _, s := range v.Schemas {
		for _, c := range s.Columns {
			add(c.Name)
		}
	}
	return k
}

// keepSQL keeps SQL words and known names in a query.
func (k knownNames) keepSQL(w string) bool { return memory.IsSQLWord(w) || k[strings.ToLower(w)] }

// sql writes a query without its values; a query the lexer cannot read is
// left out whole.
func (k knownNames) sql(sql string) string {
	if sql == "" {
		return ""
	}
	out, err := bqtools.SQLWithoutValues(sql, k.keepSQL)
	if err != nil {
		return "(a query that could not be read)"
	}
	return clip.String(out, maxSQLInView)
}

// failedCall is the kind of a failure whose message names none that
// FailureKind knows.
const failedCall = "the call failed (its message is not shown)"

// failure writes what kind of failure msg reports, from a fixed set
// (bqtools.FailureKind: the guard layer that refused the query, or
// BigQuery's reason code; or an unknown tool), followed by the known names
// it mentions, sorted: never a word of the message itself, since BigQuery's
// messages quote rows ("Bad int64 value: ...") and a row can be written in
// the memory vocabulary.
func (k knownNames) failure(msg string) string {
	kind, ok := bqtools.FailureKind(msg)
	switch {
	case ok:
	case strings.HasPrefix(msg, "unknown tool "):
		kind = "unknown tool"
	case strings.Contains(msg, " did not run: the plan did not offer it"):
		kind = "the tool was not offered"
	default:
		kind = failedCall
	}
	var names []string
	for _, w := range strings.FieldsFunc(strings.ToLower(msg), func(r rune) bool {
		return r != '_' && (r < 'a' || r > 'z') && (r < '0' || r > '9')
	}) {
		if k[w] && !slices.Contains(names, w) {
			names = append(names, w)
		}
	}
	if len(names) == 0 {
		return kind
	}
	slices.Sort(names)
	return kind + "; names: " + strings.Join(names[:min(len(names), maxNamesOfAFailure)], ", ")
}
