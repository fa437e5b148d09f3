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
	tokNumber                     // integer or floating point literal
	tokPunct                      // an operator or punctuation: ".", "|>", "@@", ...
)

type sqlToken struct {
	kind tokKind
	text string // for strings and quoted identifiers, the raw body
	pos  int    // byte offset of the token in the input
	end  int    // byte offset after it: tokens are adjacent when one's end is the next's pos
	// afterDot marks a word that is a name by its position: after a path
	// dot (s.where, t.1e), "@" or "@@". ZetaSQL never reads it as a keyword.
	afterDot bool
	// pathDot marks a "." that joins a path expression (t.x), as opposed to
	// a dot that belongs to nothing (after a literal).
	pathDot bool
	hex     bool // a hexadecimal integer (0x1F): never the start of a float
}

// isWord reports whether t is the keyword w (a word after a dot never is).
func (t sqlToken) isWord(w string) bool {
	return t.kind == tokWord && !t.afterDot && strings.EqualFold(t.text, w)
}

func (t sqlToken) isPunct(p string) bool { return t.kind == tokPunct && t.text == p }

// keyword returns the keyword t is, upper-case, or "" when t is a name or
// no word.
func (t sqlToken) keyword() string {
	if t.kind != tokWord || t.afterDot || !isKeyword(t.text) {
		return ""
	}
	return strings.ToUpper(t.text)
}

// lexIssue is something in the text that the lexer reads past but the guard
// refuses: it is reported after the statement checks, which name the
// clearer problem when there is one.
type lexIssue struct {
	pos    int
	reason string
}

// lexSQL splits GoogleSQL text into tokens, dropping whitespace and comments.
func lexSQL(s string) ([]sqlToken, error) {
	toks, _, err := scanSQL(s)
	return toks, err
}

// scanSQL reads GoogleSQL text as ZetaSQL's lexer does (zetasql.tm and its
// lookahead_transformer.cc), in two passes:
//
//  1. scanRaw splits the text the way the flex/textmapper rules do, longest
//     match first: comments (--, # and /* */, which does not nest), string
//     and bytes literals (', ", ”', """, with r, b, rb, br prefixes; a
//     backslash always takes the next character, in raw literals too),
//     `quoted names`, words ([A-Za-z_][A-Za-z0-9_]*), decimal digits, hex
//     integers (0x1F), and operators ("|>", "||", "@@", "=>", "->", ...).
//  2. fuse joins them as the lookahead transformer does: digits followed
//     by an adjacent "." are a float that ends there (1. in "1.FROM", so
//     FROM stays a keyword), take adjacent digits after the dot (1.5) and an
//     exponent (1e5, 1.5E-3, .5e+2), and ".5" is a float unless the dot
//     joins a path. A dot joins a path after a name, ")", "]" or "?"; after
//     it a keyword is a name, and digits are a name, fused with an adjacent
//     word (t.1e5, ds.123abc). Hex integers never take a dot or exponent
//     (0x1e-5.FROM is 0x1e, -, 5., FROM).
//
// It also reports, as issues, what ZetaSQL refuses or reads differently
// across versions and what another reader could take differently:
// characters outside literals, names and comments that are neither ASCII
// nor Unicode spaces (ZetaSQL refuses them; invisible ones are named as
// such), invisible characters in comments and names, control characters,
// a /* inside a block comment, #legacySQL or #standardSQL pragmas, a dot
// after a reserved keyword, and a number that runs into a name (123abc,
// which ZetaSQL refuses, and 1.FROM, which it reads as 1. FROM).
func scanSQL(s string) ([]sqlToken, []lexIssue, error) {
	raw, issues, err := scanRaw(s)
	if err != nil {
		return nil, nil, err
	}
	toks, more := fuse(raw)
	return toks, append(issues, more...), nil
}

// scanRaw is the first pass of scanSQL.
func scanRaw(s string) ([]sqlToken, []lexIssue, error) {
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
	add := func(kind tokKind, text string, start, end int) {
		toks = append(toks, sqlToken{kind: kind, text: text, pos: start, end: end})
	}
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case isUnicodeSpace(r):
			case isInvisible(r):
				issue(i, "it contains the invisible character U+%04X outside a string literal", r)
			default:
				issue(i, "it contains the character %q (U+%04X) outside a string literal, quoted name or comment, where BigQuery accepts only ASCII", r, r)
			}
			i += size
		case isSpace(c):
			i++
		case c < ' ' || c == 0x7f:
			issue(i, "it contains the control character U+%04X outside a string literal", c)
			i++
		case c == '#' || strings.HasPrefix(s[i:], "--"):
			start := i
			for i < len(s) && s[i] != '\n' && s[i] != '\r' {
				i++
			}
			invisible(start, i, "in a comment")
			if isPragma(s[start:i]) {
				issue(start, "it contains the dialect pragma %q, which would change how BigQuery reads the query", strings.TrimSpace(s[start:i]))
			}
		case strings.HasPrefix(s[i:], "/*"):
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
			add(tokString, body, i, next)
			i = next
		case c == '`':
			body, next, err := lexBacktick(s, i)
			if err != nil {
				return nil, nil, err
			}
			invisible(i, next, "in a quoted name")
			add(tokQuotedIdent, body, i, next)
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
				add(tokString, body, start, next)
				i = next
				continue
			}
			add(tokWord, word, start, i)
		case isDigit(c):
			start := i
			hex := c == '0' && i+2 < len(s) && (s[i+1] == 'x' || s[i+1] == 'X') && isHexDigit(s[i+2])
			if hex {
				i += 2
				for i < len(s) && isHexDigit(s[i]) {
					i++
				}
			} else {
				for i < len(s) && isDigit(s[i]) {
					i++
				}
			}
			toks = append(toks, sqlToken{kind: tokNumber, text: s[start:i], pos: start, end: i, hex: hex})
		default:
			n := 1
			for _, op := range operators {
				if strings.HasPrefix(s[i:], op) {
					n = len(op)
					break
				}
			}
			add(tokPunct, s[i:i+n], i, i+n)
			i += n
		}
	}
	return toks, issues, nil
}

// operators are ZetaSQL's operators of two characters; every other
// character outside words, literals and comments is a token of its own.
var operators = []string{"|>", "||", "@@", "<=", ">=", "!=", "<<", "=>", "->", "+=", "-="}

// fuse is the second pass of scanSQL.
func fuse(raw []sqlToken) ([]sqlToken, []lexIssue) {
	var out []sqlToken
	var issues []lexIssue
	adjacent := func(i int, t sqlToken) bool { return i < len(raw) && raw[i].pos == t.end }
	for i := 0; i < len(raw); i++ {
		t := raw[i]
		var prev *sqlToken
		if len(out) > 0 {
			prev = &out[len(out)-1]
		}
		switch t.kind {
		case tokWord:
			t.afterDot = prev != nil && (prev.pathDot || prev.isPunct("@") || prev.isPunct("@@"))
		case tokNumber:
			if prev != nil && prev.pathDot {
				// A name: t.1, ds.1fn (with the word it runs into).
				if adjacent(i+1, t) && raw[i+1].kind == tokWord {
					t = join(t, raw[i+1])
					i++
				}
				t.kind, t.afterDot, t.hex = tokWord, true, false
				break
			}
			if t.hex {
				break
			}
			if adjacent(i+1, t) && raw[i+1].isPunct(".") {
				t = join(t, raw[i+1])
				i++
				if adjacent(i+1, t) && raw[i+1].kind == tokNumber && !raw[i+1].hex {
					t = join(t, raw[i+1])
					i++
				}
			}
			i = fuseExponent(raw, i, &t)
		case tokPunct:
			if t.text != "." {
				break
			}
			if prev != nil && prev.kind == tokWord && !prev.afterDot && isReserved(prev.text) {
				issues = append(issues, lexIssue{t.pos, fmt.Sprintf("the keyword %s is followed by \".\" at offset %d, which BigQuery's versions read differently; quote the name (`%s`) if it is one",
					strings.ToUpper(prev.text), t.pos, prev.text)})
			}
			switch {
			case prev != nil && canPrecedePathDot(*prev):
				t.pathDot = true
			case adjacent(i+1, t) && raw[i+1].kind == tokNumber && !raw[i+1].hex:
				t = join(t, raw[i+1]) // .5
				t.kind = tokNumber
				i++
				i = fuseExponent(raw, i, &t)
			}
		}
		if prev != nil && prev.kind == tokNumber && prev.end == t.pos && (t.kind == tokWord || t.kind == tokQuotedIdent) &&
			!(strings.HasSuffix(prev.text, ".") && dashedNumber(out)) {
			issues = append(issues, lexIssue{t.pos, fmt.Sprintf("the number %s runs into %s at offset %d; put a space between them", prev.text, describeTok(t), t.pos)})
		}
		out = append(out, t)
	}
	return out, issues
}

// join is a and the adjacent token b read as one token of a's kind.
func join(a, b sqlToken) sqlToken {
	a.text += b.text
	a.end = b.end
	return a
}

// fuseExponent adds to the number t, whose last raw token is raw[i], an
// adjacent exponent: E10 (one word), or E, then + or -, then digits. It
// returns the index of the last raw token it used.
func fuseExponent(raw []sqlToken, i int, t *sqlToken) int {
	next := func(k int, end int) bool { return k < len(raw) && raw[k].pos == end }
	if !next(i+1, t.end) || raw[i+1].kind != tokWord {
		return i
	}
	w := raw[i+1].text
	switch {
	case len(w) > 1 && (w[0] == 'e' || w[0] == 'E') && allDigits(w[1:]):
		*t = join(*t, raw[i+1])
		return i + 1
	case (w == "e" || w == "E") && next(i+2, raw[i+1].end) && (raw[i+2].isPunct("+") || raw[i+2].isPunct("-")) &&
		next(i+3, raw[i+2].end) && raw[i+3].kind == tokNumber && !raw[i+3].hex:
		*t = join(join(join(*t, raw[i+1]), raw[i+2]), raw[i+3])
		return i + 3
	}
	return i
}

// canPrecedePathDot reports whether a "." after t joins a path: after a
// name (any word but a reserved keyword, or a word that is a name by its
// position), a quoted name, ")", "]" or "?".
func canPrecedePathDot(t sqlToken) bool {
	switch t.kind {
	case tokQuotedIdent:
		return true
	case tokWord:
		return t.afterDot || !isReserved(t.text)
	case tokPunct:
		return t.text == ")" || t.text == "]" || t.text == "?"
	}
	return false
}

// dashedNumber reports whether the last token of out, a number, follows a
// dash that follows a name without spaces, as the 123. of my-project-123.ds
// does: ZetaSQL reads that as a dashed project name in a FROM clause.
func dashedNumber(out []sqlToken) bool {
	k := len(out) - 1
	return k >= 2 && out[k-1].isPunct("-") && out[k-1].end == out[k].pos && out[k-2].end == out[k-1].pos &&
		(out[k-2].kind == tokWord || out[k-2].kind == tokNumber)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// isSpace reports ZetaSQL's ASCII whitespace: space, \t, \n, \r, \b, \f, \v.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\b' || c == '\f' || c == '\v'
}

// isUnicodeSpace reports the non-ASCII spaces ZetaSQL skips (zetasql.tm's
// whitespace_character): no-break, en and em spaces, thin and hair spaces,
// narrow no-break, medium mathematical and ideographic spaces.
func isUnicodeSpace(r rune) bool {
	return r == '\u00a0' || (r >= '\u2000' && r <= '\u200a') || r == '\u202f' || r == '\u205f' || r == '\u3000'
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

func isHexDigit(c byte) bool { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }

func isWordChar(c byte) bool { return isWordStart(c) || isDigit(c) }

func isLiteralPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "b", "rb", "br":
		return true
	}
	return false
}

// lexQuoted reads the string literal whose opening quote is at s[i]: one
// quote character, or three of them for a triple-quoted literal. A backslash
// always takes the next character with it (\r\n as one), in raw literals
// too (r"\"" is one literal), as in ZetaSQL's lexer. It returns the body and
// the offset after the closing quote.
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
			if j < len(s) && s[j-1] == '\r' && s[j] == '\n' {
				j++
			}
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
			if j == i+1 {
				return "", 0, fmt.Errorf("the quoted identifier at offset %d is empty", i)
			}
			return s[i+1 : j], j + 1, nil
		}
	}
	return "", 0, fmt.Errorf("the `quoted identifier at offset %d is not closed", i)
}
