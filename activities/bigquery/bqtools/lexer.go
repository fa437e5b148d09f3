package bqtools

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

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
	// afterDot marks a word that follows a ".": ZetaSQL reads it as a name
	// (s.where, t.distinct), never as a keyword.
	afterDot bool
}

// isWord reports whether t is the keyword w (a word after a dot never is).
func (t sqlToken) isWord(w string) bool {
	return t.kind == tokWord && !t.afterDot && strings.EqualFold(t.text, w)
}

func (t sqlToken) isPunct(p string) bool { return t.kind == tokPunct && t.text == p }

// lexIssue is something in the text that the lexer reads past but the guard
// refuses: it is reported after the statement checks, which name the
// clearer problem when there is one.
type lexIssue struct {
	pos    int
	reason string
}

// lexSQL splits GoogleSQL text into tokens, dropping whitespace and comments.
// It only needs to be exact about where comments, literals and quoted
// identifiers start and end, as ZetaSQL's lexer is (a -- or # comment ends
// at \r as well as at \n); everything else is words, numbers and single
// punctuation characters. Unquoted GoogleSQL names are ASCII, so control
// characters and non-ASCII characters outside literals and comments count as
// whitespace (ZetaSQL skips Unicode spaces and rejects the rest): they split
// words, and cannot glue FROM and a name into one word.
func lexSQL(s string) ([]sqlToken, error) {
	toks, _, err := scanSQL(s)
	return toks, err
}

// scanSQL is lexSQL that also reports what the guard refuses in text it
// otherwise skips: invisible or format characters outside string literals,
// a /* inside a block comment, and #legacySQL or #standardSQL pragmas.
func scanSQL(s string) ([]sqlToken, []lexIssue, error) {
	var toks []sqlToken
	var issues []lexIssue
	issue := func(pos int, format string, args ...any) {
		issues = append(issues, lexIssue{pos, fmt.Sprintf(format, args...)})
	}
	if !utf8.ValidString(s) {
		return nil, nil, fmt.Errorf("the query is not valid UTF-8 text")
	}
	// invisible reports the first invisible character in s[from:to].
	invisible := func(from, to int, where string) {
		for j, r := range s[from:to] {
			if isInvisible(r) {
				issue(from+j, "it contains the invisible character U+%04X %s", r, where)
				return
			}
		}
	}
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			if isInvisible(r) {
				issue(i, "it contains the invisible character U+%04X outside a string literal", r)
			}
			i += size
		case c <= ' ' || c == 0x7f:
			i++
		case c == '#' || (c == '-' && i+1 < len(s) && s[i+1] == '-'):
			start := i
			for i < len(s) && s[i] != '\n' && s[i] != '\r' {
				i++
			}
			invisible(start, i, "in a comment")
			if isPragma(s[start:i]) {
				issue(start, "it contains the dialect pragma %q, which would change how BigQuery reads the query", strings.TrimSpace(s[start:i]))
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, nil, fmt.Errorf("the /* comment at offset %d is not closed", i)
			}
			body := s[i+2 : i+2+end]
			if strings.Contains(body, "/*") {
				issue(i, "its /* comment at offset %d contains another /*, which some SQL dialects read as a nested comment", i)
			}
			invisible(i, i+2+end, "in a comment")
			if isPragma(body) {
				issue(i, "it contains a dialect pragma (#legacySQL or #standardSQL) in a comment")
			}
			i += 2 + end + 2
		case c == '\'' || c == '"':
			body, next, err := lexQuoted(s, i)
			if err != nil {
				return nil, nil, err
			}
			toks = append(toks, sqlToken{kind: tokString, text: body, pos: i})
			i = next
		case c == '`':
			body, next, err := lexBacktick(s, i)
			if err != nil {
				return nil, nil, err
			}
			invisible(i, next, "in a quoted name")
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
					return nil, nil, err
				}
				toks = append(toks, sqlToken{kind: tokString, text: body, pos: start})
				i = next
				continue
			}
			dot := len(toks) > 0 && toks[len(toks)-1].isPunct(".")
			toks = append(toks, sqlToken{kind: tokWord, text: word, pos: start, afterDot: dot})
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
	return toks, issues, nil
}

// isInvisible reports whether r is a format character (Unicode category
// Cf: zero-width spaces and joiners, bidirectional controls, the BOM) or a
// line or paragraph separator: characters that make the text read
// differently to a person, or to another parser, than to this one.
func isInvisible(r rune) bool {
	return unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' || (r >= '\u2060' && r <= '\u206f')
}

// isPragma reports whether comment text holds a #legacySQL or #standardSQL
// dialect pragma, wherever it is.
func isPragma(comment string) bool {
	c := strings.ToLower(comment)
	for _, p := range []string{"legacysql", "standardsql"} {
		if strings.Contains(c, "#"+p) || strings.HasPrefix(strings.TrimSpace(strings.TrimLeft(c, "#")), p) {
			return true
		}
	}
	return false
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
