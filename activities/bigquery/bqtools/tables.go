package bqtools

import (
	"context"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/size"
)

// listTables is bigquery_tables: the configured tables, from the config alone.
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
		ScanLimit: size.Bytes(t.e.cfg.MaxScanBytes),
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
