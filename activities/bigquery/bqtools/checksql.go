package bqtools

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// CheckSQL accepts exactly one read-only query: a SELECT, or WITH ... SELECT
// (optionally opened by parentheses, as in "(SELECT 1) UNION ALL (SELECT
// 2)"), with at most one trailing semicolon. Everything else is refused with
// a reason the model can act on: DML (INSERT, UPDATE, DELETE, MERGE,
// TRUNCATE), DDL and DCL (CREATE, DROP, ALTER, GRANT, REVOKE, ...), EXPORT
// and LOAD, CALL and EXECUTE IMMEDIATE, scripting (DECLARE, SET, BEGIN, ...),
// SELECT ... INTO, several statements and empty input.
//
// Inside the query it works from allow-lists (keywords.go, functions.go):
// every keyword used bare must be one of allowedKeywords, every pipe
// operator one of allowedPipeOperators, every function call one of
// GoogleSQL's built-in functions that read only their arguments
// (allowedFunctions and the dotted namespaces), and a table-valued function
// is refused unless the tables config lists it. It also refuses
// INFORMATION_SCHEMA (metadata of every dataset and job) and MODEL or
// CONNECTION followed by a qualified name. With the tables of a config
// (checkSQL's policy), every name read as a table must be one of them or a
// WITH name.
//
// It reads the text as ZetaSQL's lexer does (lexer.go), so that comments,
// literals, quoted names and number literals end where BigQuery ends them
// and keywords are matched case-insensitively, never after a dot. What
// another reader could take differently is refused (see scanSQL). It is
// pure and makes no call to BigQuery. It is the first of the tool's guards:
// the tool also refuses a dry run whose statement type is not SELECT or that
// reads a table or calls a routine outside the configuration, and the job
// runs under a bytes-billed cap and a timeout.
func CheckSQL(sql string) error {
	return checkSQL(sql, sqlPolicy{})
}

func checkSQL(sql string, p sqlPolicy) error {
	toks, issues, err := scanSQL(sql)
	if err != nil {
		return err
	}
	if len(toks) == 0 {
		return errors.New("the query is empty")
	}
	for i, t := range toks {
		if !t.isPunct(";") {
			continue
		}
		if i == len(toks)-1 {
			toks = toks[:i]
			break
		}
		return fmt.Errorf("only one statement is allowed, but more follows the ';' at offset %d (%s)", t.pos, describeTok(toks[i+1]))
	}
	if len(toks) == 0 {
		return errors.New("the query is empty")
	}
	if err := checkQueryExpr(toks); err != nil {
		return err
	}
	if len(issues) > 0 {
		return errors.New(issues[0].reason)
	}
	for _, check := range []func([]sqlToken) error{
		checkPunctuation,
		checkPipes,
		checkKeywords,
		checkEscapeHatches,
		func(t []sqlToken) error { return checkFromItems(t, p) },
		func(t []sqlToken) error { return checkCalls(t, p) },
		checkModels,
	} {
		if err := check(toks); err != nil {
			return err
		}
	}
	return nil
}

const onlySelect = "only a single read-only SELECT (or WITH ... SELECT) query is allowed"

// punctuation are the operators and punctuation of a query; { and } only
// open and close a hint (@{...}).
var punctuation = wordSet(`. , ; ( ) [ ] + - * / % < > = ! | & ^ ~ ? : @ @@ || |> <= >= != << => -> += -=`)

// checkPunctuation refuses characters a query has no use for: $ (macros),
// \ and braces outside a hint; a hint that is not a list of name = value
// entries (checkHint); "@" not followed by a parameter's name or a hint,
// "@@" not followed by a variable's name; and parentheses or brackets that
// do not pair up. BigQuery refuses those queries too, but what it would
// refuse is not worth a reading of our own.
func checkPunctuation(toks []sqlToken) error {
	var open []sqlToken // the "(" and "[" not yet closed
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != tokPunct {
			continue
		}
		next := func(kind tokKind, text string) bool {
			return i+1 < len(toks) && toks[i+1].kind == kind && (text == "" || toks[i+1].text == text)
		}
		switch {
		case t.text == "@" && next(tokPunct, "{"):
			end, err := checkHint(toks, i+1)
			if err != nil {
				return err
			}
			// A hint follows a name, JOIN or ")" and is followed by neither
			// a path nor a call, so no reader can join what is around it.
			if prev := i - 1; prev < 0 || toks[prev].kind == tokPunct && !toks[prev].isPunct(")") || toks[prev].kind == tokString || toks[prev].kind == tokNumber {
				return fmt.Errorf("the hint @{ at offset %d does not follow a table, a name or JOIN", t.pos)
			}
			if end+1 < len(toks) && toks[end+1].kind == tokPunct && strings.Contains(".([-:", toks[end+1].text) && len(toks[end+1].text) == 1 {
				return fmt.Errorf("the hint @{ at offset %d is followed by %q", t.pos, toks[end+1].text)
			}
			i = end
		case t.text == "(" && i > 0 && (toks[i-1].kind == tokNumber || toks[i-1].kind == tokString):
			return fmt.Errorf("the %q at offset %d follows a literal, which cannot be called", t.text, t.pos)
		case (t.text == "@" || t.text == "@@") && !next(tokWord, ""):
			return fmt.Errorf("the %s at offset %d is not followed by a name", t.text, t.pos)
		case t.text == "(" || t.text == "[":
			open = append(open, t)
		case t.text == ")" || t.text == "]":
			if len(open) == 0 || open[len(open)-1].text != map[string]string{")": "(", "]": "["}[t.text] {
				return fmt.Errorf("the %q at offset %d closes nothing that is open", t.text, t.pos)
			}
			open = open[:len(open)-1]
		case !punctuation[t.text]:
			return fmt.Errorf("it contains %q at offset %d, which a query has no use for", t.text, t.pos)
		}
	}
	if len(open) > 0 {
		t := open[len(open)-1]
		return fmt.Errorf("the %q at offset %d is never closed", t.text, t.pos)
	}
	return nil
}

// checkHint reads the hint whose "{" is at toks[i] and returns the index of
// its "}". A hint is "name = value" entries separated by commas, where a
// name is a word or qualifier.word and a value a word, a string or an
// optionally negative decimal integer: anything else (a comma with no entry, a
// path, a subquery) is refused, so that no reader can take what is inside
// for a table or a call.
func checkHint(toks []sqlToken, i int) (int, error) {
	open := toks[i]
	bad := func(j int) (int, error) {
		what := "its end"
		if j < len(toks) {
			what = describeTok(toks[j])
		}
		return 0, fmt.Errorf("the hint @{ at offset %d is not a list of name = value entries (at %s); write it as @{NAME=VALUE, ...} or leave it out", open.pos, what)
	}
	// Reserved words (FROM, WHERE, JOIN, ...) would end or open a clause
	// for a reader that does not know hints; TRUE, FALSE and NULL are values.
	word := func(j int) bool {
		return j < len(toks) && toks[j].kind == tokWord &&
			(toks[j].afterDot || !reservedKeywords[strings.ToUpper(toks[j].text)] || slices.Contains([]string{"TRUE", "FALSE", "NULL"}, strings.ToUpper(toks[j].text)))
	}
	j := i + 1
	for {
		if !word(j) {
			return bad(j)
		}
		j++
		if j+1 < len(toks) && toks[j].isPunct(".") && word(j+1) {
			j += 2
		}
		if j >= len(toks) || !toks[j].isPunct("=") {
			return bad(j)
		}
		j++
		if j < len(toks) && toks[j].isPunct("-") {
			j++
			if j >= len(toks) || !isInteger(toks[j]) {
				return bad(j)
			}
		}
		if j >= len(toks) || (!word(j) && toks[j].kind != tokString && !isInteger(toks[j])) {
			return bad(j)
		}
		j++
		switch {
		case j < len(toks) && toks[j].isPunct("}"):
			return j, nil
		case j < len(toks) && toks[j].isPunct(","):
			j++
		default:
			return bad(j)
		}
	}
}

func isInteger(t sqlToken) bool {
	return t.kind == tokNumber && strings.Trim(t.text, "0123456789") == ""
}

// checkPipes refuses a pipe operator (the word after |>) that
// allowedPipeOperators does not list.
func checkPipes(toks []sqlToken) error {
	for i, t := range toks {
		if !t.isPunct("|>") {
			continue
		}
		if i+1 == len(toks) || toks[i+1].kind != tokWord {
			return fmt.Errorf("the pipe |> at offset %d is not followed by a pipe operator", t.pos)
		}
		op := strings.ToUpper(toks[i+1].text)
		if allowedPipeOperators[op] {
			continue
		}
		why := "is not one of the pipe operators allowed here"
		if r := keywordReasons[op]; r != "" {
			why = r
		}
		return fmt.Errorf("the pipe operator |> %s at offset %d %s; only |> SELECT, EXTEND, WHERE, AGGREGATE, ORDER BY, LIMIT, AS, DISTINCT, JOIN, set operations, WINDOW, PIVOT, UNPIVOT and TABLESAMPLE are allowed", op, t.pos, why)
	}
	return nil
}

// checkKeywords refuses a keyword used bare that allowedKeywords does not
// list, unless it calls a built-in function of that name (IF(...),
// REPEAT(...)).
func checkKeywords(toks []sqlToken) error {
	for i, t := range toks {
		kw := t.keyword()
		if kw == "" || allowedKeywords[kw] || (i+1 < len(toks) && toks[i+1].isPunct("(") && allowedFunctions[kw]) {
			continue
		}
		if kw == "INTO" {
			return fmt.Errorf("SELECT ... INTO (at offset %d) writes the result somewhere; %s", t.pos, onlySelect)
		}
		why := keywordReasons[kw]
		if why == "" {
			why = "is not part of a read-only query"
		}
		return fmt.Errorf("%s (at offset %d) %s; %s (a column of that name is written `%s` or alias.%s)", kw, t.pos, why, onlySelect, t.text, t.text)
	}
	return nil
}

// escapeHatches says, by name, what each escape hatch reads.
var escapeHatches = map[string]string{
	"EXTERNAL_QUERY":            "EXTERNAL_QUERY sends SQL to an external database",
	"EXTERNAL_OBJECT_TRANSFORM": "EXTERNAL_OBJECT_TRANSFORM reads Cloud Storage objects",
	"INFORMATION_SCHEMA":        "INFORMATION_SCHEMA views describe datasets and jobs",
}

// checkEscapeHatches refuses a word, or a part of a quoted name (as in
// `region-us.INFORMATION_SCHEMA.JOBS`), that names one of escapeHatches.
func checkEscapeHatches(toks []sqlToken) error {
	for _, t := range toks {
		var parts []string
		switch t.kind {
		case tokWord:
			parts = []string{t.text}
		case tokQuotedIdent:
			parts = strings.Split(t.text, ".")
		}
		for _, p := range parts {
			if what, ok := escapeHatches[strings.ToUpper(p)]; ok {
				return fmt.Errorf("%s outside the tables you may query; query those tables directly (bigquery_tables lists them)", what)
			}
		}
	}
	return nil
}

// checkQueryExpr checks that toks start a query: any number of "(", then
// SELECT, or WITH followed by its CTE list and another query expression.
func checkQueryExpr(toks []sqlToken) error {
	i := 0
	for i < len(toks) && toks[i].isPunct("(") {
		i++
	}
	if i == len(toks) {
		return errors.New("the query has no SELECT")
	}
	t := toks[i]
	switch {
	case t.isWord("SELECT"):
		return nil
	case t.isWord("WITH"):
		rest, _, err := skipWithClause(toks[i+1:])
		if err != nil {
			return err
		}
		if len(rest) == 0 {
			return errors.New("the WITH clause is not followed by a SELECT")
		}
		if err := checkQueryExpr(rest); err != nil {
			return fmt.Errorf("after the WITH clause: %w", err)
		}
		return nil
	}
	return refusal(t)
}

// skipWithClause skips "[RECURSIVE] name AS ( ... ) [, name AS ( ... )]..."
// and returns the tokens after it and the names it defines.
func skipWithClause(toks []sqlToken) (rest []sqlToken, names []string, err error) {
	i := 0
	if i < len(toks) && toks[i].isWord("RECURSIVE") {
		i++
	}
	for {
		if i >= len(toks) || (toks[i].kind != tokWord && toks[i].kind != tokQuotedIdent) {
			return nil, nil, errors.New("malformed WITH clause: expected a name for the subquery")
		}
		name := toks[i].text
		names = append(names, name)
		i++
		if i >= len(toks) || !toks[i].isWord("AS") {
			return nil, nil, fmt.Errorf("malformed WITH clause: expected AS after %s", name)
		}
		i++
		if i >= len(toks) || !toks[i].isPunct("(") {
			return nil, nil, fmt.Errorf("malformed WITH clause: expected ( after %s AS", name)
		}
		depth := 0
		for ; i < len(toks); i++ {
			if toks[i].kind != tokPunct {
				continue
			}
			if toks[i].text == "(" {
				depth++
			} else if toks[i].text == ")" {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		if i >= len(toks) {
			return nil, nil, fmt.Errorf("malformed WITH clause: the parenthesis after %s AS is not closed", name)
		}
		i++ // past ")"
		if i < len(toks) && toks[i].isPunct(",") {
			i++
			continue
		}
		return toks[i:], names, nil
	}
}

func refusal(t sqlToken) error {
	if kw := t.keyword(); keywordReasons[kw] != "" {
		return fmt.Errorf("a %s statement %s; %s", kw, keywordReasons[kw], onlySelect)
	}
	return fmt.Errorf("the statement starts with %s; %s", describeTok(t), onlySelect)
}

func describeTok(t sqlToken) string {
	switch t.kind {
	case tokWord:
		return strings.ToUpper(t.text)
	case tokString:
		return "a string literal"
	case tokQuotedIdent:
		return "the identifier `" + t.text + "`"
	}
	return fmt.Sprintf("%q", t.text)
}
