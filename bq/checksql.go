package bq

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
// several statements and empty input.
//
// It also refuses the escape hatches that read outside the configured
// tables without naming a table: EXTERNAL_QUERY (federated SQL that is never
// checked), EXTERNAL_OBJECT_TRANSFORM (Cloud Storage objects) and
// INFORMATION_SCHEMA views (metadata of every dataset and job).
//
// It reads the text with a small GoogleSQL lexer that ends comments, literals
// and quoted identifiers where ZetaSQL's lexer does, so that comments (--, #,
// /* */), string and bytes literals (single, double or triple quoted, with
// r and b prefixes) and backtick-quoted identifiers cannot hide a keyword or a
// semicolon, and keywords are matched case-insensitively. It is pure and
// makes no call to BigQuery. It is the first of four guards: the tool also
// refuses a dry run whose statement type is not SELECT or that reads a table
// outside the configuration, and the job runs under a bytes-billed cap.
func CheckSQL(sql string) error {
	toks, err := lexSQL(sql)
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
	return checkEscapeHatches(toks)
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

type tokKind int

const (
	tokWord        tokKind = iota // keyword or unquoted identifier
	tokQuotedIdent                // `identifier`
	tokString                     // string or bytes literal
	tokNumber
	tokPunct
)

type sqlToken struct {
	kind tokKind
	text string // for strings and quoted identifiers, the raw body
	pos  int    // byte offset in the input
}

func (t sqlToken) isWord(w string) bool { return t.kind == tokWord && strings.EqualFold(t.text, w) }

func (t sqlToken) isPunct(p string) bool { return t.kind == tokPunct && t.text == p }

// lexSQL splits GoogleSQL text into tokens, dropping whitespace and comments.
// It only needs to be exact about where comments, literals and quoted
// identifiers start and end, as ZetaSQL's lexer is (a -- or # comment ends
// at \r as well as at \n); everything else is words, numbers and single
// punctuation characters. Unquoted GoogleSQL names are ASCII, so control
// characters and non-ASCII bytes outside literals and comments count as
// whitespace (ZetaSQL skips Unicode spaces and rejects the rest): they split
// words, and cannot glue FROM and a name into one word.
func lexSQL(s string) ([]sqlToken, error) {
	var toks []sqlToken
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c <= ' ' || c >= 0x7f:
			i++
		case c == '#' || (c == '-' && i+1 < len(s) && s[i+1] == '-'):
			for i < len(s) && s[i] != '\n' && s[i] != '\r' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("the /* comment at offset %d is not closed", i)
			}
			i += 2 + end + 2
		case c == '\'' || c == '"':
			body, next, err := lexQuoted(s, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, sqlToken{kind: tokString, text: body, pos: i})
			i = next
		case c == '`':
			body, next, err := lexBacktick(s, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, sqlToken{kind: tokQuotedIdent, text: body, pos: i})
			i = next
		case isWordStart(c):
			start := i
			for i < len(s) && isWordChar(s[i]) {
				i++
			}
			word := s[start:i]
			// r'..', b"..", rb'''..''' and so on: a prefixed literal.
			if i < len(s) && (s[i] == '\'' || s[i] == '"') && isLiteralPrefix(word) {
				body, next, err := lexQuoted(s, i)
				if err != nil {
					return nil, err
				}
				toks = append(toks, sqlToken{kind: tokString, text: body, pos: start})
				i = next
				continue
			}
			toks = append(toks, sqlToken{kind: tokWord, text: word, pos: start})
		case isDigit(c):
			// An exponent's sign counts only before a digit, so that the
			// "--" after a field named 1e ("x.1e--") still starts a comment.
			start := i
			for i < len(s) && (isWordChar(s[i]) || s[i] == '.' || isExponentSign(s, i)) {
				i++
			}
			toks = append(toks, sqlToken{kind: tokNumber, text: s[start:i], pos: start})
		default:
			toks = append(toks, sqlToken{kind: tokPunct, text: s[i : i+1], pos: i})
			i++
		}
	}
	return toks, nil
}

func isWordStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isWordChar(c byte) bool { return isWordStart(c) || isDigit(c) }

// isExponentSign reports whether s[i] is the sign of an exponent, as in 1e-5.
func isExponentSign(s string, i int) bool {
	return (s[i] == '+' || s[i] == '-') && (s[i-1] == 'e' || s[i-1] == 'E') && i+1 < len(s) && isDigit(s[i+1])
}

func isLiteralPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "b", "rb", "br":
		return true
	}
	return false
}

// lexQuoted reads the string literal whose opening quote is at s[i]: one
// quote character, or three of them for a triple-quoted literal. A backslash
// always takes the next character with it, in raw literals too (r"\"" is one
// literal), as in GoogleSQL's lexer. It returns the body and the offset after
// the closing quote.
func lexQuoted(s string, i int) (body string, next int, err error) {
	q := s[i]
	delim := s[i : i+1]
	if strings.HasPrefix(s[i:], strings.Repeat(string(q), 3)) {
		delim = strings.Repeat(string(q), 3)
	}
	j := i + len(delim)
	for j < len(s) {
		if s[j] == '\\' {
			j += 2
			continue
		}
		if strings.HasPrefix(s[j:], delim) {
			return s[i+len(delim) : j], j + len(delim), nil
		}
		if len(delim) == 1 && (s[j] == '\n' || s[j] == '\r') {
			return "", 0, fmt.Errorf("the string literal at offset %d is not closed on its line (use ''' or \"\"\" for multi-line strings)", i)
		}
		j++
	}
	return "", 0, fmt.Errorf("the string literal at offset %d is not closed", i)
}

// lexBacktick reads the quoted identifier whose opening backtick is at s[i].
// It refuses escapes, which could spell a name the checks would not know
// (`EXTERNAL\x5fQUERY`), and line breaks, which ZetaSQL refuses too.
func lexBacktick(s string, i int) (body string, next int, err error) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			return "", 0, fmt.Errorf("the `quoted identifier at offset %d contains a backslash escape; write the name without escapes", i)
		case '\n', '\r':
			return "", 0, fmt.Errorf("the `quoted identifier at offset %d is not closed on its line", i)
		case '`':
			return s[i+1 : j], j + 1, nil
		}
	}
	return "", 0, fmt.Errorf("the `quoted identifier at offset %d is not closed", i)
}
