package bqtools

import (
	"errors"
	"fmt"
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
// It also refuses the escape hatches that read outside the configured
// tables without naming a table: INFORMATION_SCHEMA views (metadata of every
// dataset and job), the function families of functions.go (EXTERNAL_QUERY,
// ML., AI., OBJ., VECTOR_SEARCH, Cloud KMS, user functions qualified by a
// dataset or project), MODEL references, and table-valued functions other
// than UNNEST (the tables config may allow some; CheckSQL alone allows none).
//
// It reads the text with a small GoogleSQL lexer that ends comments, literals
// and quoted identifiers where ZetaSQL's lexer does, so that comments (--, #,
// /* */), string and bytes literals (single, double or triple quoted, with
// r and b prefixes) and backtick-quoted identifiers cannot hide a keyword or a
// semicolon, and keywords are matched case-insensitively, never after a dot.
// What another parser could read differently is refused: a /* inside a
// block comment, #legacySQL and #standardSQL pragmas anywhere, and invisible
// or format characters outside string literals. It is pure and makes no call
// to BigQuery. It is the first of the tool's guards: the tool also refuses a
// dry run whose statement type is not SELECT or that reads a table or calls a
// routine outside the configuration, and the job runs under a bytes-billed
// cap and a timeout.
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
	for _, t := range toks {
		if t.isWord("INTO") {
			return fmt.Errorf("SELECT ... INTO (at offset %d) writes the result somewhere; only a single read-only SELECT (or WITH ... SELECT) query is allowed", t.pos)
		}
	}
	for _, check := range []func([]sqlToken) error{
		checkEscapeHatches,
		func(t []sqlToken) error { return checkCalls(t, p) },
		checkModels,
		func(t []sqlToken) error { return checkTableFunctions(t, p) },
	} {
		if err := check(toks); err != nil {
			return err
		}
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

// refusalReasons explains, by first keyword, why a statement is refused.
var refusalReasons = func() map[string]string {
	m := map[string]string{}
	add := func(reason string, words ...string) {
		for _, w := range words {
			m[w] = reason
		}
	}
	add("modifies data (DML)", "INSERT", "UPDATE", "DELETE", "MERGE", "TRUNCATE")
	add("creates, changes or drops objects (DDL)", "CREATE", "DROP", "ALTER", "UNDROP", "RENAME", "REPLACE")
	add("changes permissions (DCL)", "GRANT", "REVOKE")
	add("moves data in or out of BigQuery", "EXPORT", "LOAD", "COPY")
	add("runs a procedure or dynamic SQL", "CALL", "EXECUTE")
	add("is procedural scripting", "DECLARE", "SET", "BEGIN", "END", "IF", "LOOP", "WHILE", "REPEAT", "FOR",
		"BREAK", "LEAVE", "CONTINUE", "ITERATE", "RETURN", "RAISE", "ASSERT", "COMMIT", "ROLLBACK", "EXCEPTION")
	return m
}()

func refusal(t sqlToken) error {
	const only = "only a single read-only SELECT (or WITH ... SELECT) query is allowed"
	if t.kind == tokWord {
		kw := strings.ToUpper(t.text)
		if reason, ok := refusalReasons[kw]; ok {
			return fmt.Errorf("a %s statement %s; %s", kw, reason, only)
		}
	}
	return fmt.Errorf("the statement starts with %s; %s", describeTok(t), only)
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
