package bqtools

import (
	"fmt"
	"strings"
)

// SQLWithoutValues returns a query as the sub-agent's introspection sees it
// (activities/bigquery): its tokens without comments, every string, bytes
// and number literal written as ?, and every word that keep refuses (an
// alias, a name that is no table or column) as name_1, name_2, ... in order
// of first use. So a value the model copied from a row into its SQL, or into
// a comment or an alias, never reaches the introspection prompt, while the
// shape of the query (tables, columns, functions, joins) does. A quoted name
// is kept, quoted, when keep accepts each of its dotted parts. It fails
// where the guard's lexer does (an unclosed literal or comment).
func SQLWithoutValues(sql string, keep func(word string) bool) (string, error) {
	toks, err := lexSQL(sql)
	if err != nil {
		return "", err
	}
	aliases := map[string]string{}
	alias := func(w string) string {
		key := strings.ToLower(w)
		if a, ok := aliases[key]; ok {
			return a
		}
		a := fmt.Sprintf("name_%d", len(aliases)+1)
		aliases[key] = a
		return a
	}
	var b strings.Builder
	prev, prevEnd := "", -1
	for _, t := range toks {
		var s string
		switch t.kind {
		case tokString, tokNumber:
			s = "?"
		case tokWord:
			s = t.text
			if !keep(t.text) {
				s = alias(t.text)
			}
		case tokQuotedIdent:
			s = "`" + t.text + "`"
			for _, part := range strings.Split(t.text, ".") {
				if !keep(part) {
					s = alias(t.text)
					break
				}
			}
		case tokPunct:
			s = t.text
		}
		// Operators of two marks (>=, !=, ||) stay together, as written.
		operator := t.kind == tokPunct && t.pos == prevEnd
		if b.Len() > 0 && !operator && !noSpaceBetween(prev, s) {
			b.WriteByte(' ')
		}
		b.WriteString(s)
		prev, prevEnd = s, -1
		if t.kind == tokPunct {
			prevEnd = t.pos + 1
		}
	}
	return b.String(), nil
}

// noSpaceBetween says where the rendering of SQLWithoutValues writes two
// tokens together: around dots, after "(", before ")" "," and ";", and
// between a function's name and its "(".
func noSpaceBetween(prev, next string) bool {
	return prev == "." || prev == "(" || next == "." || next == ")" || next == "," || next == ";" ||
		(next == "(" && prev != "" && isWordChar(prev[len(prev)-1]))
}
