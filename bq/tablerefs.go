package bq

import (
	"slices"
	"strings"

	"cloud.google.com/go/bigquery"

	"github.com/secops-agent/investigator/tools"
)

// checkTables refuses a query that reads a table outside the configuration.
// refs are the tables the dry run reports (BigQuery's ReferencedTables),
// which are authoritative. When there are none, as on the emulator, which
// never fills them, it falls back to the names written in the SQL
// (tableRefs). Names match exactly, unlike bigquery_schema's lookup: in
// BigQuery, table names are case-sensitive.
func (e *env) checkTables(sql string, refs []*bigquery.Table) error {
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

// tableRefs lists the tables a query names, for when BigQuery does not say:
// the paths after FROM, JOIN, TABLE and CALL, and after a comma in a FROM
// clause, with backticks removed (`p.d`.t and p-x.d.t are "p.d.t" and
// "p-x.d.t"), and also the names its WITH clauses define. It skips
// subqueries (their own FROM clauses are read in turn), UNNEST and the
// built-in ML. and AI. table functions, and the FROM of EXTRACT(... FROM
// ...) and IS DISTINCT FROM. Any other table function is listed by its name.
// It is conservative: a name it cannot place is listed, and refused.
func tableRefs(sql string) (names, ctes []string, err error) {
	toks, err := lexSQL(sql)
	if err != nil {
		return nil, nil, err
	}
	// Per parenthesis depth: the word before the "(" and whether a FROM
	// clause is open there, so that a comma starts another table.
	type scope struct {
		opener string
		inFrom bool
	}
	stack := []scope{{}}
	expect, expectInFrom := false, false // the next token starts a FROM item or a TABLE argument
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		top := &stack[len(stack)-1]
		if expect {
			expect = false
			switch {
			case t.isPunct("("): // a subquery or a parenthesized join
				stack = append(stack, scope{})
				expect = true
				continue
			case t.isWord("SELECT") || t.isWord("WITH") || t.isWord("FROM"):
				// a subquery: read on below
			case isNamePart(t):
				name, next := readPath(toks, i)
				i = next - 1
				if next < len(toks) && toks[next].isPunct("(") {
					if !builtinTableFunction(name) {
						names = append(names, name)
					}
				} else {
					names = append(names, name)
					top.inFrom = top.inFrom || expectInFrom
				}
				continue
			}
		}
		switch {
		case t.isPunct("("):
			opener := ""
			if i > 0 && toks[i-1].kind == tokWord {
				opener = strings.ToUpper(toks[i-1].text)
			}
			stack = append(stack, scope{opener: opener})
		case t.isPunct(")"):
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		case t.isWord("FROM"):
			if top.opener == "EXTRACT" || (i > 0 && toks[i-1].isWord("DISTINCT")) {
				continue // EXTRACT(HOUR FROM ts), a IS DISTINCT FROM b
			}
			top.inFrom, expect, expectInFrom = true, true, true
		case t.isWord("JOIN"):
			top.inFrom, expect, expectInFrom = true, true, true
		case t.isWord("TABLE") || t.isWord("CALL"):
			expect, expectInFrom = true, false
		case t.isPunct(",") && top.inFrom:
			expect, expectInFrom = true, true
		case endsFromClause(toks, i):
			top.inFrom = false
		case t.isWord("WITH"):
			if _, defined, err := skipWithClause(toks[i+1:]); err == nil {
				ctes = append(ctes, defined...)
			}
		}
	}
	return names, ctes, nil
}

// endsFromClause reports whether toks[i] ends a FROM clause: a reserved word
// that starts the next clause or a set operation, or the pipe |>.
func endsFromClause(toks []sqlToken, i int) bool {
	t := toks[i]
	if t.isPunct("|") {
		return i+1 < len(toks) && toks[i+1].isPunct(">")
	}
	for _, w := range []string{"WHERE", "GROUP", "HAVING", "QUALIFY", "WINDOW", "ORDER", "LIMIT", "UNION", "INTERSECT", "EXCEPT"} {
		if t.isWord(w) {
			return true
		}
	}
	return false
}

// readPath joins the name that starts at toks[i], with its dots and dashes
// (my-project.dataset.table, `project.dataset`.table, dataset.table*), and
// returns it with the index of the token after it.
func readPath(toks []sqlToken, i int) (string, int) {
	name := toks[i].text
	i++
	for i+1 < len(toks) && (toks[i].isPunct(".") || toks[i].isPunct("-") || toks[i].isPunct(":")) && isNamePart(toks[i+1]) {
		name += toks[i].text + toks[i+1].text
		i += 2
	}
	if i < len(toks) && toks[i].isPunct("*") {
		name += "*"
		i++
	}
	return name, i
}

func isNamePart(t sqlToken) bool {
	return t.kind == tokWord || t.kind == tokQuotedIdent || t.kind == tokNumber
}

// builtinTableFunction reports whether name, followed by "(" in a FROM
// clause, is UNNEST or a BigQuery ML or AI table function, which read only
// their arguments.
func builtinTableFunction(name string) bool {
	n := strings.ToUpper(name)
	return n == "UNNEST" || strings.HasPrefix(n, "ML.") || strings.HasPrefix(n, "AI.")
}
