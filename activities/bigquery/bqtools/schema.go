package bqtools

import (
	"context"
	"fmt"
	"strings"

	"cloud.google.com/go/bigquery"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/size"
	"github.com/secops-agent/investigator/tools"
)

// tableSchema is bigquery_schema: one configured table's metadata.
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
		out.Size = size.Bytes(md.NumBytes)
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
