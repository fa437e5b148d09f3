package bqtools

import (
	"slices"
	"strings"

	"cloud.google.com/go/bigquery"

	"github.com/secops-agent/investigator/tools"
)

// maxReferencedTables is how many tables a dry run lists at most.
const maxReferencedTables = 50

// checkTables refuses a query that reads a table outside the configuration.
// refs are the tables the dry run reports (BigQuery's ReferencedTables),
// which are authoritative. When there are none, as on the emulator, which
// never fills them, it falls back to the names written in the SQL
// (tableRefs). Names match exactly, unlike bigquery_schema's lookup: in
// BigQuery, table names are case-sensitive. BigQuery lists at most
// maxReferencedTables tables, so a query with that many is refused: the list
// may be incomplete.
func (e *env) checkTables(sql string, refs []*bigquery.Table) error {
	if len(refs) >= maxReferencedTables {
		return tools.Reject("query refused: it reads %d or more tables, and BigQuery's dry run lists no more than %d, so the rest cannot be checked", maxReferencedTables, maxReferencedTables)
	}
	for _, t := range refs {
		if t.ProjectID != e.cfg.Project || !e.configured(t.DatasetID+"."+t.TableID) {
			return e.refuseTable(t.ProjectID+"."+t.DatasetID+"."+t.TableID, "")
		}
	}
	if len(refs) > 0 {
		return nil
	}
	names, ctes, err := tableRefs(sql)
	if err != nil {
		return tools.Reject("query refused: %v", err)
	}
	for _, n := range names {
		if e.allowedName(n, ctes) {
			continue
		}
		hint := ""
		if strings.Count(n, ".") == 1 {
			// Perhaps an array column written as alias.column.
			hint = "; if " + n + " is an array column, flatten it with UNNEST(" + n + ")"
		}
		return e.refuseTable(n, hint)
	}
	return nil
}

// allowedName reports whether a name written in a query's FROM clause is a
// configured table, as project.dataset.table or, when the tables live in the
// client's project (where the query runs), as dataset.table; or the name of
// one of its WITH subqueries (GoogleSQL reads an unqualified name as one).
func (e *env) allowedName(n string, ctes []string) bool {
	if id, ok := strings.CutPrefix(n, e.cfg.Project+"."); ok && e.configured(id) {
		return true
	}
	if e.cfg.Project == e.client.Project() && e.configured(n) {
		return true
	}
	return !strings.Contains(n, ".") && slices.ContainsFunc(ctes, func(c string) bool { return strings.EqualFold(c, n) })
}

// configured reports whether id ("dataset.table") is a configured table.
func (e *env) configured(id string) bool {
	return slices.ContainsFunc(e.cfg.Tables, func(t Table) bool { return t.ID == id })
}

func (e *env) refuseTable(name, hint string) error {
	names := make([]string, len(e.cfg.Tables))
	for i, t := range e.cfg.Tables {
		names[i] = e.sqlName(t.ID)
	}
	return tools.Reject("query refused: it reads %s, which is not one of the tables you may query (%s)%s",
		name, strings.Join(names, ", "), hint)
}

// sqlPolicy is what the configuration adds to CheckSQL: the table functions
// that allowed_table_functions lists.
type sqlPolicy struct {
	tableFunctions []string // "dataset.function", or a built-in's name (APPENDS)
	project        string   // the configured tables' project
	// bareDataset: "dataset.function" names a function of project, because
	// the query runs there.
	bareDataset bool
}

func (e *env) policy() sqlPolicy {
	return sqlPolicy{tableFunctions: e.cfg.AllowedTableFunctions, project: e.cfg.Project, bareDataset: e.cfg.Project == e.client.Project()}
}

// allowsFunction reports whether the function parts name (as written, with
// backquoted paths split) is an allowed table function: a built-in's name in
// any case, or dataset.function as configured, qualified by the configured
// project or, when the query runs in that project, not.
func (p sqlPolicy) allowsFunction(parts []string) bool {
	name := strings.Join(parts, ".")
	if len(parts) == 3 && parts[0] == p.project {
		name = parts[1] + "." + parts[2]
	} else if len(parts) == 2 && !p.bareDataset {
		return false
	}
	return slices.ContainsFunc(p.tableFunctions, func(f string) bool {
		if !strings.Contains(f, ".") {
			return len(parts) == 1 && strings.EqualFold(f, name)
		}
		return f == name
	})
}

// checkRoutines refuses a query whose dry run reports a routine (a UDF, a
// remote function, a table function) that is not an allowed table function
// of the configured project, and any property graph (GRAPH_TABLE): the
// configuration allows none.
func (e *env) checkRoutines(routines, graphs []string) error {
	for _, r := range routines {
		parts := strings.Split(r, ".")
		if len(parts) != 3 || parts[0] != e.cfg.Project || !slices.Contains(e.cfg.AllowedTableFunctions, parts[1]+"."+parts[2]) {
			return tools.Reject("query refused: it calls the routine %s, which is not listed under allowed_table_functions in the tables config", r)
		}
	}
	if len(graphs) > 0 {
		return tools.Reject("query refused: it reads the property graph %s, and graph queries are not allowed", graphs[0])
	}
	return nil
}
