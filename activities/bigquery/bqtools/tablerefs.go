package bqtools

import (
	"fmt"
	"strings"
)

// fromItem is a name written where a query reads rows: after FROM, JOIN or
// TABLE, or after a comma in a FROM clause.
type fromItem struct {
	name  string   // the path with backticks removed: "p.d.t", "ds.auth_*"
	parts []string // its parts, backquoted paths split at their dots
	call  bool     // followed by "(": a table-valued function
	pos   int
}

// tableRefs lists the tables a query names: the paths after FROM, JOIN
// and TABLE, and after a comma in a FROM clause (also after pipe
// operators: |> JOIN t), with backticks removed (`p.d`.t and p-x.d.t are
// "p.d.t" and "p-x.d.t"), and also the names its WITH clauses define. It
// skips subqueries (their own FROM clauses are read in turn), UNNEST and
// the FROM of EXTRACT(... FROM ...) and IS DISTINCT FROM. It is
// conservative: a name it cannot place is listed, and refused.
func tableRefs(sql string) (names, ctes []string, err error) {
	toks, err := lexSQL(sql)
	if err != nil {
		return nil, nil, err
	}
	items, ctes, err := fromItems(toks)
	if err != nil {
		return nil, nil, err
	}
	for _, it := range items {
		if !it.call {
			names = append(names, it.name)
		}
	}
	return names, ctes, nil
}

// checkFromItems applies the policy to what a query reads: every
// table-valued function (FROM fn(...), JOIN fn(...)) must be UNNEST or
// allowed (functionRefusal), and, when the policy names the tables, every
// table must be one of them or a WITH name.
func checkFromItems(toks []sqlToken, p sqlPolicy) error {
	items, ctes, err := fromItems(toks)
	if err != nil {
		return err
	}
	if p.tables != nil {
		for _, it := range items {
			if !it.call && !p.allowedName(it.name, ctes) {
				return p.refuseTable(it.name)
			}
		}
	}
	for _, it := range items {
		if it.call {
			if err := functionRefusal(it.parts, it.name, p, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// fromItems reads the FROM items of a query and the names its WITH clauses
// define. A word after a dot is a name, never a keyword (t.where does not
// end a FROM clause); @{...} hints after FROM or JOIN are skipped; and
// anything else after FROM, JOIN or a FROM-clause comma that is neither a
// name nor a parenthesis is an error, so that no table hides behind syntax
// this reader does not know.
func fromItems(toks []sqlToken) (items []fromItem, ctes []string, err error) {
	// Per parenthesis depth: the keyword before the "(" and whether a FROM
	// clause is open there, so that a comma starts another table.
	type scope struct {
		opener string
		inFrom bool
	}
	stack := []scope{{}}
	// After FROM, JOIN and FROM-clause commas (strict) and after TABLE
	// (which is also a column name), the next token starts an item.
	expect, strict, expectInFrom := false, false, false
	var after sqlToken // the token that set expect
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		top := &stack[len(stack)-1]
		if expect {
			switch {
			case t.isPunct("@") && i+1 < len(toks) && toks[i+1].isPunct("{"):
				i = skipHint(toks, i+1)
				continue
			case t.isPunct("("): // a subquery or a parenthesized join
				// In a parenthesized join, as in FROM ((t), u) or FROM
				// (UNNEST(a) AS x, u), a comma starts another table.
				stack = append(stack, scope{inFrom: expectInFrom})
				continue
			case t.isWord("SELECT") || t.isWord("WITH") || t.isWord("FROM"):
				expect = false // a subquery: read on below
				if !t.isWord("FROM") && i > 0 && toks[i-1].isPunct("(") {
					top.inFrom = false // its select list is no FROM clause
				}
			case isNamePart(t):
				expect = false
				name, next := readPath(toks, i)
				call := next < len(toks) && toks[next].isPunct("(")
				items = append(items, fromItem{name: name, parts: strings.Split(name, "."), call: call, pos: t.pos})
				if !call {
					top.inFrom = top.inFrom || expectInFrom
				}
				i = next - 1
				continue
			case strict:
				return nil, nil, fmt.Errorf("the lexical table check cannot read what follows %s at offset %d (%s); write a table name, UNNEST(...) or a subquery there",
					describeTok(after), after.pos, describeTok(t))
			default:
				expect = false
			}
		}
		switch {
		case t.isPunct("("):
			opener := ""
			if i > 0 && toks[i-1].kind == tokWord && !toks[i-1].afterDot {
				opener = strings.ToUpper(toks[i-1].text)
			}
			stack = append(stack, scope{opener: opener})
		case t.isPunct(")"):
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		case t.isWord("FROM"):
			if top.opener == "EXTRACT" || isDistinctFrom(toks, i) {
				continue // EXTRACT(HOUR FROM ts), a IS DISTINCT FROM b
			}
			top.inFrom, expect, strict, expectInFrom, after = true, true, true, true, t
		case t.isWord("JOIN"):
			top.inFrom, expect, strict, expectInFrom, after = true, true, true, true, t
		case t.isWord("TABLE"):
			expect, strict, expectInFrom, after = true, false, false, t
		case t.isPunct(",") && top.inFrom:
			expect, strict, expectInFrom, after = true, true, true, t
		case endsFromClause(toks, i):
			top.inFrom = false
		case t.isWord("WITH"):
			if _, defined, err := skipWithClause(toks[i+1:]); err == nil {
				ctes = append(ctes, defined...)
			}
		}
	}
	if expect && strict {
		return nil, nil, fmt.Errorf("the query ends after %s at offset %d", describeTok(after), after.pos)
	}
	return items, ctes, nil
}

// isDistinctFrom reports whether the FROM at toks[i] ends IS [NOT]
// DISTINCT FROM, a comparison.
func isDistinctFrom(toks []sqlToken, i int) bool {
	return i >= 2 && toks[i-1].isWord("DISTINCT") && (toks[i-2].isWord("IS") || (i >= 3 && toks[i-2].isWord("NOT") && toks[i-3].isWord("IS")))
}

// skipHint returns the index of the "}" that closes the hint whose "{" is at
// toks[i], or the last index when it is not closed.
func skipHint(toks []sqlToken, i int) int {
	depth := 0
	for ; i < len(toks); i++ {
		switch {
		case toks[i].isPunct("{"):
			depth++
		case toks[i].isPunct("}"):
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(toks) - 1
}

// endsFromClause reports whether toks[i] ends a FROM clause: a reserved word
// that starts the next clause or a set operation, or the pipe |>.
func endsFromClause(toks []sqlToken, i int) bool {
	t := toks[i]
	if t.isPunct("|>") {
		return true
	}
	for _, w := range []string{"WHERE", "GROUP", "HAVING", "QUALIFY", "WINDOW", "ORDER", "LIMIT", "UNION", "INTERSECT", "EXCEPT"} {
		if t.isWord(w) {
			return true
		}
	}
	return false
}

// readPath joins the name that starts at toks[i], with its dots and dashes
// (my-project.dataset.table, `project.dataset`.table, dataset.table*, and
// my-project-123.dataset, where 123. is a number that ends with the path's
// dot), and returns it with the index of the token after it.
func readPath(toks []sqlToken, i int) (string, int) {
	name := toks[i].text
	for i++; i < len(toks); i++ {
		prev, t := toks[i-1], toks[i]
		switch {
		case prev.kind == tokNumber && strings.HasSuffix(prev.text, ".") && isNamePart(t):
			name += t.text
		case (t.pathDot || t.isPunct(".") || t.isPunct("-") || t.isPunct(":")) && i+1 < len(toks) && isNamePart(toks[i+1]):
			name += t.text + toks[i+1].text
			i++
		default:
			if t.isPunct("*") {
				return name + "*", i + 1
			}
			return name, i
		}
	}
	return name, i
}

func isNamePart(t sqlToken) bool {
	return t.kind == tokWord || t.kind == tokQuotedIdent || t.kind == tokNumber
}
