package bqtools

import (
	"fmt"
	"slices"
	"strings"

	"cloud.google.com/go/bigquery"

	"github.com/secops-agent/investigator/tools"
)

// maxReferencedTables is how many tables a dry run lists at most.
const maxReferencedTables = 50

// checkTables refuses a query whose dry run reports a table outside the
// configuration. refs are the tables the dry run reports (BigQuery's
// ReferencedTables), which are authoritative: they include what views and
// wildcards read. The emulator reports none; there, and in addition to
// refs on real BigQuery, checkSQL holds every name the query reads as a
// table to the configuration (policy.tables). Names match exactly, unlike
// bigquery_schema's lookup: in BigQuery, table names are case-sensitive.
// BigQuery lists at most maxReferencedTables tables, so a query with that
// many is refused: the list may be incomplete.
func (e *env) checkTables(refs []*bigquery.Table) error {
	if len(refs) >= maxReferencedTables {
		return tools.Reject("query refused: it reads %d or more tables, and BigQuery's dry run lists no more than %d, so the rest cannot be checked", maxReferencedTables, maxReferencedTables)
	}
	for _, t := range refs {
		if t.ProjectID != e.cfg.Project || !slices.Contains(e.tableIDs(), t.DatasetID+"."+t.TableID) {
			return tools.Reject("query refused: %v", e.policy().refuseTable(t.ProjectID+"."+t.DatasetID+"."+t.TableID))
		}
	}
	return nil
}

// checkRefs holds what BigQuery's statistics say a query is and reads (its
// dry run's, or its finished job's when job is true) to the configuration:
// a SELECT of configured tables and allowed routines, no property graph.
// On the real service the statement type must be exactly SELECT, and
// statistics that report none are refused (fail closed: nothing then says
// what the query is or reads). The emulator reports SELECT for any
// statement (DELETE, scripts) and no tables, so there checkSQL is the
// only classifier and a missing type is let through.
func (e *env) checkRefs(r queryRefs, job bool) error {
	switch {
	case r.statementType == "SELECT", r.statementType == "" && e.backend.emulator():
	case r.statementType == "" && job:
		return tools.Reject("the query's job reports no statement type, so what it ran cannot be checked; run the query again with bigquery_query")
	case r.statementType == "":
		return tools.Reject("query refused: BigQuery's dry run reported no statement type, so what the query does cannot be checked")
	case job:
		return tools.Reject("the query's job ran a %s statement; only SELECT results can be read", r.statementType)
	default:
		return tools.Reject("query refused: BigQuery reads it as a %s statement; only a SELECT query is allowed", r.statementType)
	}
	if err := e.checkTables(r.tables); err != nil {
		return err
	}
	return e.checkRoutines(r.routines, r.graphs)
}

// sqlPolicy is what the configuration adds to CheckSQL: the tables a query
// may read and the table functions that allowed_table_functions lists.
type sqlPolicy struct {
	tableFunctions []string // "dataset.function", or a built-in's name (APPENDS)
	project        string   // the configured tables' project
	// bareDataset: "dataset.function" and "dataset.table" name a function
	// or table of project, because the query runs there.
	bareDataset bool
	// tables are the configured tables, "dataset.table"; nil leaves the
	// tables unchecked (CheckSQL alone, and the config's own checks).
	tables []string
}

func (e *env) policy() sqlPolicy {
	return sqlPolicy{tableFunctions: e.cfg.AllowedTableFunctions, project: e.cfg.Project,
		bareDataset: e.cfg.Project == e.client.Project(), tables: e.tableIDs()}
}

// allowedName reports whether a name written where a query reads a table
// is a configured table, as project.dataset.table or, when the tables live
// in the project where the query runs, as dataset.table; or the name of
// one of its WITH subqueries (GoogleSQL reads an unqualified name as one).
func (p sqlPolicy) allowedName(n string, ctes []string) bool {
	if id, ok := strings.CutPrefix(n, p.project+"."); ok && slices.Contains(p.tables, id) {
		return true
	}
	if p.bareDataset && slices.Contains(p.tables, n) {
		return true
	}
	return !strings.Contains(n, ".") && slices.ContainsFunc(ctes, func(c string) bool { return strings.EqualFold(c, n) })
}

// sqlName is how a query names the configured table id: dataset.table when
// the tables live in the project where queries run, else
// `project.dataset.table`.
func (p sqlPolicy) sqlName(id string) string {
	if p.bareDataset {
		return id
	}
	return "`" + p.project + "." + id + "`"
}

func (p sqlPolicy) refuseTable(name string) error {
	names := make([]string, len(p.tables))
	for i, t := range p.tables {
		names[i] = p.sqlName(t)
	}
	hint := ""
	if strings.Count(name, ".") == 1 {
		// Perhaps an array column written as alias.column.
		hint = "; if " + name + " is an array column, flatten it with UNNEST(" + name + ")"
	}
	return fmt.Errorf("it reads %s, which is not one of the tables you may query (%s)%s", name, strings.Join(names, ", "), hint)
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
