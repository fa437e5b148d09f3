package bqtools

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzPolicy is the configuration FuzzGuard holds queries to: one table,
// in the project where queries run, and no table functions.
var fuzzPolicy = sqlPolicy{project: "demo-investigator", bareDataset: true, tables: []string{"security_logs.auth_events"}}

// FuzzGuard checks what holds without BigQuery: checkSQL never panics or
// hangs, and a query it accepts contains, outside string literals and
// comments, no table, function call, keyword or pipe operator that the
// configuration does not allow, as naiveViolation (a second, deliberately
// simple reader, which shares no code with the guard's lexer) sees it. Its
// seed corpus is every query of the guard's tables. CI runs it for a
// bounded number of inputs (Taskfile.yml, task test); locally:
//
//	go test ./activities/bigquery/bqtools -run '^$' -fuzz FuzzGuard -fuzztime 5m
func FuzzGuard(f *testing.F) {
	for _, c := range guardCases {
		f.Add(c.sql)
	}
	for _, c := range issue18Cases {
		f.Add(c)
	}
	for _, sql := range append(append(fuzzSeeds, hostileQueries...), parenCommaQueries...) {
		f.Add(sql)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		done := make(chan error, 1)
		go func() { done <- checkSQL(sql, fuzzPolicy) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("checkSQL did not return within 20s for %q", sql)
		}
		if err != nil {
			return
		}
		if v := naiveViolation(sql, fuzzPolicy); v != "" {
			t.Fatalf("checkSQL accepted %q, which %s", sql, v)
		}
	})
}

// TestNaiveViolationSeesTheAttacks keeps the second reader honest: it must
// see the issue's attacks in what the old lexer accepted, and nothing in
// the legitimate queries of the guard's tables.
func TestNaiveViolationSeesTheAttacks(t *testing.T) {
	for _, sql := range issue18Cases {
		if strings.Contains(sql, "1.FROM`hr.salaries`") {
			continue // refused for the glued number, hr.salaries is the point
		}
		if naiveViolation(sql, fuzzPolicy) == "" {
			t.Errorf("the naive reader sees nothing wrong in %q", sql)
		}
	}
	for _, sql := range fuzzSeeds {
		if err := checkSQL(sql, fuzzPolicy); err != nil {
			t.Errorf("the seed %q is refused: %v", sql, err)
		}
		if v := naiveViolation(sql, fuzzPolicy); v != "" {
			t.Errorf("the naive reader refuses the seed %q: it %s", sql, v)
		}
	}
	for _, c := range guardCases {
		if c.want != "" || c.allow != nil || c.on&onEmu == 0 {
			continue
		}
		sql := strings.ReplaceAll(c.sql, "security_logs.process_events", "security_logs.auth_events")
		if v := naiveViolation(sql, fuzzPolicy); v != "" {
			t.Errorf("the naive reader refuses the accepted %q: it %s", sql, v)
		}
	}
}

// naiveTok is a token of the naive reader: a word of [A-Za-z0-9_] (so 1.5
// is three tokens), a `quoted name`, a literal, or one punctuation
// character (two for |> and @@).
type naiveTok struct {
	kind byte // 'w' word, 'q' quoted name, 's' literal, 'p' punctuation
	text string
	end  int
}

// naiveScan drops comments and literals as ZetaSQL delimits them, and
// splits the rest into naiveToks: everything that is not a word character,
// a quote or punctuation separates tokens. "||" is read before "|>", as
// ZetaSQL reads it (a ||> b is a || > b).
func naiveScan(s string) []naiveTok {
	var out []naiveTok
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '#' || strings.HasPrefix(s[i:], "--"):
			for i < len(s) && s[i] != '\n' && s[i] != '\r' {
				i++
			}
		case strings.HasPrefix(s[i:], "/*"):
			if end := strings.Index(s[i+2:], "*/"); end >= 0 {
				i += end + 4
			} else {
				i = len(s)
			}
		case c == '\'' || c == '"' || c == '`':
			q := s[i : i+1]
			if c != '`' && strings.HasPrefix(s[i:], q+q+q) {
				q += q + q
			}
			j := i + len(q)
			for j < len(s) && !strings.HasPrefix(s[j:], q) {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			body := s[i+len(q) : min(j, len(s))]
			if n := len(out); c != '`' && n > 0 && out[n-1].kind == 'w' && out[n-1].end == i && slices.Contains([]string{"R", "B", "RB", "BR"}, strings.ToUpper(out[n-1].text)) {
				out = out[:n-1] // r'...', b"...": the prefix is part of the literal
			}
			kind := byte('s')
			if c == '`' {
				kind = 'q'
			}
			i = min(j+len(q), len(s))
			out = append(out, naiveTok{kind, body, i})
		case c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || (c >= '0' && c <= '9'):
			j := i
			for j < len(s) && (s[j] == '_' || (s[j]|0x20 >= 'a' && s[j]|0x20 <= 'z') || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			out = append(out, naiveTok{'w', s[i:j], j})
			i = j
		case strings.HasPrefix(s[i:], "||") || strings.HasPrefix(s[i:], "|>") || strings.HasPrefix(s[i:], "@@"):
			out = append(out, naiveTok{'p', s[i : i+2], i + 2})
			i += 2
		case c <= ' ' || c >= 0x7f:
			i++
		default:
			out = append(out, naiveTok{'p', s[i : i+1], i + 1})
			i++
		}
	}
	return out
}

// naiveViolation says what in sql, as the naive reader sees it, the policy
// does not allow, or "" when nothing. The reader's rules are simpler than
// ZetaSQL's and err towards seeing a keyword: a "." joins a path only
// after a quoted name, ")", "]", "?" or a word that does not start with a
// digit (or that is itself a name after such a dot); a word after such a
// dot, "@" or "@@" is a name; any other word is a keyword if GoogleSQL has
// one of that spelling.
func naiveViolation(sql string, p sqlPolicy) string {
	toks, ok := dropHints(naiveScan(sql))
	if !ok {
		return "has a hint that is not a list of name = value entries"
	}
	n := len(toks)
	name := make([]bool, n) // a word that is a name by its position
	dot := make([]bool, n)  // a "." that joins a path
	for k, t := range toks {
		if k == 0 {
			continue
		}
		prev := toks[k-1]
		switch {
		case t.kind == 'w':
			name[k] = dot[k-1] || (prev.kind == 'p' && (prev.text == "@" || prev.text == "@@"))
		case t.kind == 'p' && t.text == ".":
			dot[k] = prev.kind == 'q' || (prev.kind == 'p' && strings.Contains(")]?", prev.text)) ||
				(prev.kind == 'w' && (name[k-1] || !isDigitStart(prev.text)))
		}
	}
	is := func(k int, kind byte, text string) bool {
		return k >= 0 && k < n && toks[k].kind == kind && (text == "" || strings.EqualFold(toks[k].text, text))
	}
	kw := func(k int) string {
		if !is(k, 'w', "") || name[k] || isDigitStart(toks[k].text) {
			return ""
		}
		return strings.ToUpper(toks[k].text)
	}
	isName := func(k int) bool {
		return is(k, 'q', "") || (is(k, 'w', "") && (name[k] || !isDigitStart(toks[k].text)))
	}

	// Keywords, pipe operators, models, metadata.
	for k, t := range toks {
		w := kw(k)
		if zetaKeywords[w] && !allowedKeywords[w] && !(is(k+1, 'p', "(") && allowedFunctions[w]) {
			return "uses the keyword " + w
		}
		if (w == "MODEL" || w == "CONNECTION") && (is(k+1, 'q', "") || (is(k+1, 'w', "") && (dot[min(k+2, n-1)] || is(k+2, 'p', "-")))) {
			return "names a " + w + " by a qualified name"
		}
		if is(k, 'p', "|>") && !(is(k+1, 'w', "") && allowedPipeOperators[strings.ToUpper(toks[k+1].text)]) {
			return "uses a pipe operator other than the allowed ones"
		}
		if t.kind == 'w' || t.kind == 'q' {
			for _, part := range strings.Split(t.text, ".") {
				if strings.EqualFold(part, "INFORMATION_SCHEMA") {
					return "reads INFORMATION_SCHEMA"
				}
			}
		}
	}

	// The path that ends at toks[k], backwards through path dots.
	pathBefore := func(k int) (parts []string, start int) {
		start = k
		for start >= 2 && dot[start-1] && isName(start-2) {
			start -= 2
		}
		for m := start; m <= k; m += 2 {
			parts = append(parts, strings.Split(toks[m].text, ".")...)
		}
		return parts, start
	}
	// The path that starts at toks[k], forwards through dots and dashes.
	pathAfter := func(k int) (parts []string, next int) {
		text := toks[k].text
		next = k + 1
		for next+1 < n && is(next, 'p', "") && (toks[next].text == "." || toks[next].text == "-") && (is(next+1, 'w', "") || is(next+1, 'q', "")) {
			text += toks[next].text + toks[next+1].text
			next += 2
		}
		return strings.Split(text, "."), next
	}
	tvfAt := map[int]bool{} // "(" of a table-valued function call

	// Tables: what follows FROM, JOIN, TABLE and a comma in a FROM clause.
	type level struct {
		opener string
		inFrom bool
	}
	stack := []level{{}}
	prevItem := false // the previous token starts a FROM item
	for k := range toks {
		top := &stack[len(stack)-1]
		w := kw(k)
		item := false
		switch {
		case is(k, 'p', "(") && prevItem:
			// FROM (...: a parenthesized join, whose commas start tables,
			// or a subquery, whose SELECT ends that.
			stack = append(stack, level{opener: kw(k - 1), inFrom: true})
			item = true
		case (w == "SELECT" || w == "WITH") && is(k-1, 'p', "("):
			top.inFrom = false
		case is(k, 'p', "("):
			stack = append(stack, level{opener: kw(k - 1)})
		case is(k, 'p', ")"):
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		case w == "FROM" && top.opener != "EXTRACT" && !(kw(k-1) == "DISTINCT" && (kw(k-2) == "IS" || kw(k-2) == "NOT")), w == "JOIN":
			top.inFrom, item = true, true
		case w == "TABLE":
			item = true
		case is(k, 'p', ",") && top.inFrom:
			item = true
		case is(k, 'p', "|>") || slices.Contains([]string{"WHERE", "GROUP", "HAVING", "QUALIFY", "WINDOW", "ORDER", "LIMIT", "UNION", "INTERSECT", "EXCEPT"}, w):
			top.inFrom = false
		}
		prevItem = item
		if !item || !isName(k+1) || reservedKeywords[kw(k+1)] {
			continue
		}
		parts, next := pathAfter(k + 1)
		if is(next, 'p', "(") {
			tvfAt[next] = true
			if !(len(parts) == 1 && strings.EqualFold(parts[0], "UNNEST")) && !p.allowsFunction(parts) {
				return "calls the table function " + strings.Join(parts, ".")
			}
			continue
		}
		table := strings.Join(parts, ".")
		if strings.Contains(table, ".") && !slices.Contains(p.tables, strings.TrimPrefix(table, p.project+".")) &&
			!(p.bareDataset && slices.Contains(p.tables, table)) {
			return "reads the table " + table
		}
	}

	// Function calls: a name before "(", unless a reserved keyword.
	for k := range toks {
		if !is(k, 'p', "(") || k == 0 || tvfAt[k] {
			continue
		}
		if dot[k-1] {
			return "chains a function call"
		}
		if !isName(k-1) || reservedKeywords[kw(k-1)] {
			continue
		}
		parts, start := pathBefore(k - 1)
		if len(parts) > 1 && is(start, 'w', "SAFE") {
			parts = parts[1:]
		}
		upper := strings.ToUpper(strings.Join(parts, "."))
		ns, fn, _ := strings.Cut(upper, ".")
		if !(len(parts) == 1 && allowedFunctions[upper]) && !(len(parts) == 2 && slices.Contains(builtinNamespaces[ns], fn)) && !p.allowsFunction(parts) {
			return "calls the function " + strings.Join(parts, ".")
		}
	}
	return ""
}

// dropHints removes the hints (@{name = value, ...}, a name being a word
// or word.word and a value a word, a literal or -word) from toks, so that
// the words around a hint are read as neighbours; ok is false when
// something else follows "@{".
func dropHints(toks []naiveTok) (kept []naiveTok, ok bool) {
	at := func(k int, kind byte, text string) bool {
		return k < len(toks) && toks[k].kind == kind && (text == "" || toks[k].text == text)
	}
	for k := 0; k < len(toks); k++ {
		if !at(k, 'p', "@") || !at(k+1, 'p', "{") {
			kept = append(kept, toks[k])
			continue
		}
		k += 2
		for {
			if !at(k, 'w', "") {
				return nil, false
			}
			k++
			if at(k, 'p', ".") && at(k+1, 'w', "") {
				k += 2
			}
			if !at(k, 'p', "=") {
				return nil, false
			}
			k++
			if at(k, 'p', "-") {
				k++
			}
			if !at(k, 'w', "") && !at(k, 's', "") {
				return nil, false
			}
			k++
			if at(k, 'p', "}") {
				break
			}
			if !at(k, 'p', ",") {
				return nil, false
			}
			k++
		}
	}
	return kept, true
}

func isDigitStart(w string) bool { return w != "" && w[0] >= '0' && w[0] <= '9' }

// fuzzSeeds are accepted queries that use the lexer's corners, for the
// fuzzer to mutate into what it must refuse.
var fuzzSeeds = []string{
	"SELECT 1.5e3 AS a, .5 AS b, 0x1F AS c, 1. AS d, 1e-5 AS e FROM security_logs.auth_events",
	"SELECT t.update, t.`from`, t.1e5 FROM security_logs.auth_events AS t",
	`SELECT r'\'' AS a, b"x" AS b, '''multi
line''' AS c, """q""q""" AS d -- c
 FROM security_logs.auth_events /* x */ # y`,
	"SELECT * FROM `demo-investigator.security_logs.auth_events` |> WHERE TRUE |> JOIN security_logs.auth_events USING (user)",
	"SELECT * FROM demo-investigator.security_logs.auth_events a, UNNEST(a.arr) AS x WITH OFFSET AS o",
	"WITH w AS (SELECT user FROM security_logs.auth_events) SELECT EXTRACT(DAY FROM ts), a IS NOT DISTINCT FROM b FROM w",
	"SELECT NET.HOST(u), SAFE.PARSE_DATE('%Y', d), @@dataset_id, @p FROM security_logs.auth_events a JOIN @{JOIN_METHOD=HASH_JOIN} security_logs.auth_events b ON TRUE",
}
