package memory

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxClaimBytes bounds one memory's text: a memory is one reusable fact
// about the data, not a transcript.
const MaxClaimBytes = 300

// MaxClaimColumns bounds the columns one claim is about.
const MaxClaimColumns = 4

// Bounds of a plausible column name (PlausibleColumn). A log sink that
// adds a column or STRUCT field per new JSON key (Cloud Logging's
// jsonPayload export) lets a row name a column, so a name longer or more
// wordy than a schema's own is taken for row text.
const (
	maxColumnParts     = 4
	maxColumnPartBytes = 32
	maxColumnPartWords = 4
)

// maxNumberDigits bounds a number in a claim: enough for a precision, a
// port of the schema's docs or "+00", too few for an address as an integer
// (3405803785), a timestamp or an ID.
const maxNumberDigits = 4

// The kinds of claim: every memory is one of them.
const (
	// KindColumnMeaning: what a column holds.
	KindColumnMeaning = "column_meaning"
	// KindTypeFormat: a column's type or how its values are written.
	KindTypeFormat = "type_format"
	// KindJoinKey: the columns that relate rows of one table to another's
	// (or to its own).
	KindJoinKey = "join_key"
	// KindQueryPattern: SQL that works on these columns (a function, a
	// cast, UNNEST of a REPEATED column).
	KindQueryPattern = "query_pattern"
)

// Kinds lists the kinds of claim.
var Kinds = []string{KindColumnMeaning, KindTypeFormat, KindJoinKey, KindQueryPattern}

// Claim is one piece of knowledge about the schema or SQL of a configured
// table, as introspection proposes it and a memory keeps it.
type Claim struct {
	Kind string `json:"kind"`
	// Table is the configured table the claim is about, "dataset.table".
	Table string `json:"table"`
	// Columns are the columns of Table (for a join key also
	// "dataset.table.column" of another table) that the claim is about.
	Columns []string `json:"columns"`
	// Text is the claim itself, one line of plain English and SQL.
	Text string `json:"text"`
}

// UnmarshalJSON also reads a claim written as a bare string, as the
// introspection results of workflow histories recorded before claims were
// typed hold them. Such a claim has no kind, so nothing stores it.
func (c *Claim) UnmarshalJSON(b []byte) error {
	var text string
	if json.Unmarshal(b, &text) == nil {
		*c = Claim{Text: text}
		return nil
	}
	type plain Claim
	return json.Unmarshal(b, (*plain)(c))
}

// TableSchema is a table's columns as a session read them from
// bigquery_schema: STRUCT fields as dotted paths ("geo.city").
type TableSchema struct {
	Table   string   `json:"table"`
	Columns []string `json:"columns"`
}

// CheckClaim says why a proposed claim may not become a memory, or returns
// it in canonical form (the table and columns as the schema spells them,
// the text folded to ASCII with single spaces), which is what is stored.
//
// The rule is structural, an allow-list rather than a list of bad words:
//   - the kind is one of Kinds;
//   - the table is one of tables (the configured ones) and its schema is
//     among seen (the session read it), and so is every column, 1 to
//     MaxClaimColumns of them (a join key names 2 or more), each with a
//     plausible name (PlausibleColumn);
//   - the text is one line of at most MaxClaimBytes without invisible
//     characters; after NFKC and folding of look-alike letters (fold) it is
//     plain ASCII, and it has no look-alike letters at all;
//   - every word of it is in the vocabulary, a GoogleSQL keyword, type or
//     function other than those that pick rows (rowFilters), a word of a
//     seen table's name, or one of the claim's own columns or a part of
//     one: a column the claim is not about is no claim word (a row can
//     name a column), unless it is a vocabulary or SQL word anyway; every
//     dotted name is a seen table, one of the claim's columns or a
//     built-in function; it names at least one of the claim's columns;
//   - it holds no value from the data: no quotes (so no string literal or
//     LIKE pattern), no brackets, @, %, # or other marks that spell
//     addresses, e-mails, URLs or patterns, no number of more than
//     maxNumberDigits digits, and never two numbers in a row (dotted,
//     defanged or spaced addresses, dates, times).
//
// Values from rows (addresses in any encoding, users, hosts) and advice to
// exclude, filter, skip or trust rows cannot be written with those words:
// a claim that tries is refused.
func CheckClaim(c Claim, tables []string, seen []TableSchema) (Claim, error) {
	if !slices.Contains(Kinds, c.Kind) {
		return Claim{}, fmt.Errorf("the kind %q is not one of %s", clipName(c.Kind), strings.Join(Kinds, ", "))
	}
	idx := newSchemaIndex(seen)
	table, ok := configured(c.Table, tables)
	if !ok {
		return Claim{}, fmt.Errorf("the table %q is not one of the configured tables", clipName(c.Table))
	}
	if _, ok := idx.columns[table]; !ok {
		return Claim{}, fmt.Errorf("the session did not read the schema of %s", table)
	}
	cols, err := idx.claimColumns(c, table)
	if err != nil {
		return Claim{}, err
	}
	text, err := checkText(c.Text, idx, table, cols)
	if err != nil {
		return Claim{}, err
	}
	return Claim{Kind: c.Kind, Table: table, Columns: cols, Text: text}, nil
}

// checkText applies the text rules of CheckClaim and returns the folded
// text.
func checkText(text string, idx *schemaIndex, table string, cols []string) (string, error) {
	switch {
	case strings.TrimSpace(text) == "":
		return "", errors.New("the claim is empty")
	case len(text) > MaxClaimBytes:
		return "", fmt.Errorf("the claim is %d bytes, more than %d", len(text), MaxClaimBytes)
	case !utf8.ValidString(text):
		return "", errors.New("the claim is not valid UTF-8")
	}
	if i := strings.IndexFunc(text, invisible); i >= 0 {
		r, _ := utf8.DecodeRuneInString(text[i:])
		return "", fmt.Errorf("the claim holds the invisible or control character U+%04X (one line of visible text only)", r)
	}
	folded, lookalikes := fold(text)
	if i := strings.IndexFunc(folded, func(r rune) bool { return r < ' ' || r > '~' }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(folded[i:])
		return "", fmt.Errorf("the claim holds %q (U+%04X), which is not plain ASCII text", r, r)
	}
	folded = strings.Join(strings.Fields(folded), " ")
	mentions, err := idx.scan(folded, table, ownWords(cols))
	if err != nil {
		return "", err
	}
	if !slices.ContainsFunc(cols, func(c string) bool { return slices.Contains(mentions, c) }) {
		return "", fmt.Errorf("the text names none of its columns (%s)", strings.Join(cols, ", "))
	}
	if lookalikes > 0 {
		return "", fmt.Errorf("the claim writes %d Latin letter(s) with look-alikes from other scripts", lookalikes)
	}
	return folded, nil
}

// scan reads folded (ASCII) text word by word and returns the columns of
// table it names, or why a word or mark may not be in a claim. own are the
// claim's columns and their parts (ownWords).
func (idx *schemaIndex) scan(text, table string, own map[string]bool) (mentions []string, err error) {
	lastNumber := false
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ' ':
			i++
		case isWordStart(c):
			j := i
			for j < len(text) && (isNameByte(text[j]) || text[j] == '.' && j+1 < len(text) && isWordStart(text[j+1])) {
				j++
			}
			col, err := idx.word(text[i:j], table, own)
			if err != nil {
				return nil, err
			}
			if col != "" {
				mentions = append(mentions, col)
			}
			lastNumber = false
			i = j
		case isDigit(c):
			j := i
			for j < len(text) && isNameByte(text[j]) {
				j++
			}
			num := text[i:j]
			switch {
			case strings.IndexFunc(num, func(r rune) bool { return r < '0' || r > '9' }) >= 0:
				return nil, fmt.Errorf("the claim holds %q, a value rather than a word or a number", clipName(num))
			case len(num) > maxNumberDigits:
				return nil, fmt.Errorf("the claim holds the %d-digit number %s: numbers that long are values from the data", len(num), clipName(num))
			case lastNumber:
				return nil, fmt.Errorf("the claim holds two numbers in a row (%s), as an address, a date or a time is written", num)
			}
			lastNumber = true
			i = j
		case c == '`':
			end := strings.IndexByte(text[i+1:], '`')
			if end < 0 {
				return nil, errors.New("the claim has an unclosed backtick")
			}
			name := text[i+1 : i+1+end]
			col, err := idx.dotted(name, table, own)
			if err != nil {
				return nil, err
			}
			if col != "" {
				mentions = append(mentions, col)
			}
			lastNumber = false
			i += end + 2
		case strings.IndexByte(".,;:()=*+-/", c) >= 0:
			i++
		default:
			return nil, fmt.Errorf("the claim holds %q: quotes, brackets and marks such as @ %% # [ ] ! < > are how values and patterns are written, and a claim holds none", string(c))
		}
	}
	return mentions, nil
}

// word checks one word or dotted name and returns the column it names as
// a claim lists it (a column of table, or "dataset.table.column" of
// another), if it names one. With own nil (the claim's column list) any
// plausible column is taken; in the text (own: ownWords of the claim's
// columns) a column must be one of the claim's, or be read as a plain
// vocabulary or SQL word.
func (idx *schemaIndex) word(w, table string, own map[string]bool) (column string, err error) {
	if strings.Contains(w, ".") {
		return idx.dotted(w, table, own)
	}
	lower, upper := strings.ToLower(w), strings.ToUpper(w)
	plainSQL := sqlWords[upper] && !rowFilters[upper] && !namespaces[upper]
	if col, ok := idx.columns[table][lower]; ok {
		switch {
		case own == nil || own[lower]:
			return col, plausible(col)
		case IsVocabulary(w) || plainSQL:
			return "", nil
		}
		return "", notOwn(col)
	}
	switch {
	case IsVocabulary(w), idx.names[lower], own[lower]:
		return "", nil
	case plainSQL:
		return "", nil
	case sqlWords[upper]:
		return "", fmt.Errorf("the claim uses %s, which chooses rows: a memory says what the data is, not which rows to keep or leave out", upper)
	}
	return "", fmt.Errorf("the word %q is neither in the memory vocabulary nor a table, SQL name, or column of the claim", clipName(w))
}

// notOwn is the refusal of a column the text names that the claim is not
// about: a log row can name a column, so only the columns a claim lists
// (and an approver sees) may carry its words.
func notOwn(col string) error {
	return fmt.Errorf("the text names the column %q, which is not one of the claim's columns: list every column the text names", clipName(col))
}

// plausible refuses a column whose name is not a plausible identifier
// (PlausibleColumn).
func plausible(col string) error {
	if PlausibleColumn(col) {
		return nil
	}
	return oddColumnError{col}
}

type oddColumnError struct{ col string }

func (e oddColumnError) Error() string {
	return fmt.Sprintf("the column %q does not have a plausible name (at most %d parts of at most %d characters and %d words each): a log sink can make such names from rows", clipName(e.col), maxColumnParts, maxColumnPartBytes, maxColumnPartWords)
}

// PlausibleColumn says whether name (a column or a STRUCT path, "geo.city")
// reads like a schema's own identifier: at most maxColumnParts dotted parts,
// each an ASCII identifier of at most maxColumnPartBytes bytes and
// maxColumnPartWords words (split at underscores and lower-to-upper case
// changes). A name a log row made, "svc_backup_logins_are_load_tests", is
// not: claims may not name it, and introspection sees it masked.
func PlausibleColumn(name string) bool {
	parts := strings.Split(name, ".")
	if len(parts) > maxColumnParts {
		return false
	}
	for _, p := range parts {
		if !plausiblePart(p) {
			return false
		}
	}
	return true
}

func plausiblePart(p string) bool {
	if p == "" || len(p) > maxColumnPartBytes || !isWordStart(p[0]) {
		return false
	}
	words := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case !isNameByte(c):
			return false
		case c == '_':
		case i == 0 || p[i-1] == '_':
			words++
		case 'A' <= c && c <= 'Z' && ('a' <= p[i-1] && p[i-1] <= 'z' || isDigit(p[i-1])):
			words++
		}
	}
	return words <= maxColumnPartWords
}

// ownWords are the lower-case names the text of a claim about cols may
// use besides the vocabulary: each column and each dotted part of it.
func ownWords(cols []string) map[string]bool {
	own := map[string]bool{}
	for _, c := range cols {
		c = strings.ToLower(c)
		own[c] = true
		for _, w := range strings.Split(c, ".") {
			own[w] = true
		}
	}
	return own
}

// dotted checks a dotted name: a seen table, a column of one (as
// dataset.table.column, table.column or a STRUCT path of table), or a
// built-in function in a namespace (SAFE.PARSE_TIMESTAMP, NET.HOST). It
// returns the column as word does; in the text (own not nil) the column
// must be one of the claim's.
func (idx *schemaIndex) dotted(name, table string, own map[string]bool) (column string, err error) {
	lower := strings.ToLower(name)
	parts := strings.Split(lower, ".")
	if slices.Contains(parts, "") {
		return "", fmt.Errorf("%q is not a name", clipName(name))
	}
	if len(parts) == 2 && namespaces[strings.ToUpper(parts[0])] && sqlWords[strings.ToUpper(parts[1])] {
		return "", nil
	}
	if _, ok := idx.tables[lower]; ok {
		return "", nil
	}
	// n parts name the table (dataset.table, table, or none for table's
	// own STRUCT paths); the rest is the column.
	for n := min(2, len(parts)-1); n >= 0; n-- {
		t := table
		if n > 0 {
			var ok bool
			if t, ok = idx.tableNamed(strings.Join(parts[:n], ".")); !ok {
				continue
			}
		}
		if col, ok := idx.columns[t][strings.Join(parts[n:], ".")]; ok {
			if err := plausible(col); err != nil {
				return "", err
			}
			if t != table {
				col = t + "." + col
			}
			if own != nil && !own[strings.ToLower(col)] {
				return "", notOwn(col)
			}
			return col, nil
		}
	}
	return "", fmt.Errorf("%q is not a table or column of the schemas this session read", clipName(name))
}

// schemaIndex looks names up in the schemas a session read.
type schemaIndex struct {
	// tables maps "dataset.table" (lower case) to the table's ID; bare the
	// table name alone, when only one dataset has it.
	tables, bare map[string]string
	// columns maps a table's ID to its columns by lower-case path.
	columns map[string]map[string]string
	// names are the single words of every table ID. Column names are not
	// among them: a row can make a column (ownWords).
	names map[string]bool
}

func newSchemaIndex(seen []TableSchema) *schemaIndex {
	idx := &schemaIndex{tables: map[string]string{}, bare: map[string]string{}, columns: map[string]map[string]string{}, names: map[string]bool{}}
	ambiguous := map[string]bool{}
	for _, s := range seen {
		id := strings.TrimSpace(s.Table)
		lower := strings.ToLower(id)
		ds, tb, ok := strings.Cut(lower, ".")
		if !ok {
			continue
		}
		idx.tables[lower] = id
		if other, dup := idx.bare[tb]; dup && other != id {
			ambiguous[tb] = true
		}
		idx.bare[tb] = id
		idx.names[ds], idx.names[tb] = true, true
		cols := idx.columns[id]
		if cols == nil {
			cols = map[string]string{}
			idx.columns[id] = cols
		}
		for _, c := range s.Columns {
			cols[strings.ToLower(c)] = c
		}
	}
	for tb := range ambiguous {
		delete(idx.bare, tb)
	}
	return idx
}

// tableNamed finds a seen table by "dataset.table" or its bare name.
func (idx *schemaIndex) tableNamed(name string) (string, bool) {
	if t, ok := idx.tables[name]; ok {
		return t, true
	}
	t, ok := idx.bare[name]
	return t, ok
}

// claimColumns checks a claim's columns against the seen schema of table
// and returns them as the schema spells them, each once.
func (idx *schemaIndex) claimColumns(c Claim, table string) ([]string, error) {
	var out []string
	for _, name := range c.Columns {
		col, err := idx.word(strings.TrimSpace(name), table, nil)
		if err == nil && col == "" {
			err = fmt.Errorf("%q is not a column of %s or of another table whose schema the session read", clipName(name), table)
		}
		if err != nil {
			if !errors.As(err, new(oddColumnError)) {
				err = fmt.Errorf("%q is not a column of %s or of another table whose schema the session read", clipName(name), table)
			}
			return nil, err
		}
		if _, own := idx.columns[table][strings.ToLower(col)]; !own && c.Kind != KindJoinKey {
			return nil, fmt.Errorf("%q is a column of another table; only a join key names one", clipName(name))
		}
		if !slices.Contains(out, col) {
			out = append(out, col)
		}
	}
	switch {
	case len(out) == 0:
		return nil, errors.New("the claim names no column")
	case len(out) > MaxClaimColumns:
		return nil, fmt.Errorf("the claim names %d columns, more than %d", len(out), MaxClaimColumns)
	case c.Kind == KindJoinKey && len(out) < 2:
		return nil, errors.New("a join key names at least two columns")
	}
	return out, nil
}

// configured returns the configured table that name spells ("dataset.table",
// ignoring case and backticks).
func configured(name string, tables []string) (string, bool) {
	name = strings.Trim(strings.TrimSpace(name), "`")
	for _, t := range tables {
		if strings.EqualFold(t, name) {
			return t, true
		}
	}
	return "", false
}

// clipName shortens a name quoted in an error.
func clipName(s string) string {
	if len(s) <= 60 {
		return s
	}
	cut := 60
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func isWordStart(b byte) bool { return b == '_' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }
func isDigit(b byte) bool     { return '0' <= b && b <= '9' }
func isNameByte(b byte) bool  { return isWordStart(b) || isDigit(b) }

// connectives are the words besides SQL an ApprovableAtOnce claim may use:
// enough to write "event_time is a TIMESTAMP" or "use FUNC(column)", too
// few to say what a value means.
var connectives = words(`a an the to use uses its`)

// ApprovableAtOnce says whether a checked claim (CheckClaim's canonical
// form) may be approved without review (--auto-approve-memories): only one
// whose whole text the check verified against the schemas the session read.
// That is a claim of a kind other than KindColumnMeaning (what a value or
// column means is an analyst's to approve) written only in GoogleSQL
// keywords, types and functions, a few connectives and the names of its own
// table and columns, with no number. A claim in English words ("outcome
// denied means the login succeeded", "event_time is in the local zone")
// stays proposed, whatever its kind.
//
// A claim naming a column whose name is not plausible (PlausibleColumn,
// part by part: a join key's column also names its table) never is.
func ApprovableAtOnce(c Claim) bool {
	if c.Kind == KindColumnMeaning || c.Kind == "" {
		return false
	}
	for _, col := range c.Columns {
		if slices.ContainsFunc(strings.Split(col, "."), func(p string) bool { return !plausiblePart(p) }) {
			return false
		}
	}
	names := ownNames(c)
	text := c.Text
	for i := 0; i < len(text); {
		ch := text[i]
		switch {
		case ch == '`':
			end := strings.IndexByte(text[i+1:], '`')
			if end < 0 || !names[strings.ToLower(text[i+1:i+1+end])] {
				return false
			}
			i += end + 2
		case isWordStart(ch):
			j := i
			for j < len(text) && (isNameByte(text[j]) || text[j] == '.' && j+1 < len(text) && isWordStart(text[j+1])) {
				j++
			}
			if !ownWord(text[i:j], names) {
				return false
			}
			i = j
		case strings.IndexByte(" .,;:()=*+-/", ch) >= 0:
			i++
		default: // a digit, or a mark CheckClaim refuses
			return false
		}
	}
	return true
}

// ownWord says whether w is a name of the claim (names), a built-in
// function in a namespace (NET.HOST), a SQL word or a connective.
func ownWord(w string, names map[string]bool) bool {
	lower, upper := strings.ToLower(w), strings.ToUpper(w)
	if names[lower] {
		return true
	}
	if ns, fn, dotted := strings.Cut(upper, "."); dotted {
		return namespaces[ns] && sqlWords[fn] && !strings.Contains(fn, ".")
	}
	return connectives[lower] || sqlWords[upper] && !rowFilters[upper] && !namespaces[upper]
}

// ownNames are the lower-case names a claim's text may write: its table
// (as "dataset.table" or bare) and its columns, alone or after their
// table's name. A column of three or more parts may be a join key's column
// of another table ("dataset.table.column"): that table's names count too
// (for a STRUCT path of the claim's own table they are read names as well).
func ownNames(c Claim) map[string]bool {
	names := map[string]bool{}
	addTable := func(table string) []string {
		_, bare, _ := strings.Cut(table, ".")
		names[table], names[bare] = true, true
		return []string{table, bare}
	}
	own := addTable(strings.ToLower(c.Table))
	for _, col := range c.Columns {
		col = strings.ToLower(col)
		names[col] = true
		for _, p := range own {
			names[p+"."+col] = true
		}
		if parts := strings.SplitN(col, ".", 3); len(parts) == 3 {
			names[parts[2]] = true
			for _, p := range addTable(parts[0] + "." + parts[1]) {
				names[p+"."+parts[2]] = true
			}
		}
	}
	return names
}
