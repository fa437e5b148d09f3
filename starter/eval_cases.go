package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"gopkg.in/yaml.v3"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/smallfile"
	"github.com/secops-agent/investigator/internal/yamltext"
	"github.com/secops-agent/investigator/investigation"
)

// caseFile is the on-disk form of a labelled case (examples/evals/README.md).
// Paths are relative to the case file.
type caseFile struct {
	Name            string   `yaml:"name"`
	Alert           string   `yaml:"alert"`
	Question        string   `yaml:"question"`
	ExpectedVerdict string   `yaml:"expected_verdict"`
	Why             string   `yaml:"why"`
	Evidence        []string `yaml:"evidence"`
	History         []string `yaml:"history"`
	// BigQueryRows maps "dataset.table" to rows added for this case only.
	BigQueryRows map[string][]map[string]any `yaml:"bigquery_rows"`
}

// caseFields names caseFile's fields, for the error about an unknown one.
const caseFields = "name, alert, question, expected_verdict, why, evidence, history, bigquery_rows"

// evalCase is a loaded, checked case: its alerts are parsed, so their
// content-addressed IDs are known before anything is stored.
type evalCase struct {
	Name     string
	File     string
	Alert    alerts.Alert
	History  []alerts.Alert
	Question string
	Expected string
	Why      string
	// Evidence is what a correct conclusion cites; InAlert are those of
	// them the alert or the question already holds, which score nothing: a
	// model that repeats what it was given must not look like one that
	// investigated.
	Evidence []string
	InAlert  []string
	Rows     []tableRows
}

// tableRows are log rows a case adds to one configured table while it runs.
type tableRows struct {
	Table string // "dataset.table"
	Rows  []map[string]any
}

// novel is the expected evidence that only an investigation finds.
func (c evalCase) novel() []string {
	var out []string
	for _, e := range c.Evidence {
		if !slices.Contains(c.InAlert, e) {
			out = append(out, e)
		}
	}
	return out
}

// Bounds on what a case may add to BigQuery.
const (
	maxCaseRows  = 1000
	maxCaseTable = 20
)

// A case's name makes its runs' workflow IDs and summaries and a row of the
// report: bounded, and of characters that need no escaping anywhere.
const maxCaseName = 100

var caseName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

var caseTableName = regexp.MustCompile(`^[A-Za-z0-9_]+\.[A-Za-z0-9_-]+$`)

// maxCaseBytes bounds a case file; cases are a few lines.
const maxCaseBytes = 1 << 20

// caseExts are the extensions of case files in a cases directory.
var caseExts = []string{".yaml", ".yml", ".json"}

// loadCases reads every case named by paths (case files, or directories of
// them, not recursive) in a stable order. Every problem is one sentence
// naming its file; nothing touches a service.
func loadCases(paths []string) ([]evalCase, error) {
	var files []string
	for _, p := range paths {
		found, err := caseFiles(p)
		if err != nil {
			return nil, err
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		return nil, errors.New("no cases given: name case files or directories with --cases")
	}
	var cases []evalCase
	var errs []error
	byName := map[string]string{}
	for _, f := range files {
		c, err := loadCase(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := byName[strings.ToLower(c.Name)]; dup {
			errs = append(errs, fmt.Errorf("%s and %s both name case %q: case names must be unique", other, f, c.Name))
			continue
		}
		byName[strings.ToLower(c.Name)] = f
		cases = append(cases, c)
	}
	return cases, errors.Join(errs...)
}

// caseFiles lists the case files a --cases argument names.
func caseFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cases %s: %w", path, pathError(err))
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("cases %s: %w", path, pathError(err))
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || !slices.Contains(caseExts, ext) {
			continue
		}
		f := filepath.Join(path, e.Name())
		if ext == ".json" && !isJSONCase(f) {
			continue // an alert kept next to the cases
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("cases %s: the directory holds no case files (%s)", path, strings.Join(caseExts, ", "))
	}
	sort.Strings(files)
	return files, nil
}

// isJSONCase says a JSON file in a cases directory is a case (it names an
// expected verdict) rather than an alert kept next to the cases. Files that
// cannot be read count as cases, so that loading them says why.
func isJSONCase(path string) bool {
	raw, err := smallfile.Read(path, maxCaseBytes)
	if err != nil {
		return true
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil {
		return true
	}
	_, ok := probe["expected_verdict"]
	return ok
}

// loadCase reads and checks one case file.
func loadCase(file string) (evalCase, error) {
	fail := func(format string, args ...any) (evalCase, error) {
		return evalCase{}, fmt.Errorf("case %s: %s", file, fmt.Sprintf(format, args...))
	}
	raw, err := smallfile.Read(file, maxCaseBytes)
	if err != nil {
		return fail("%v", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return fail("the file is empty")
	}
	var cf caseFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&cf); err != nil {
		return fail("%s", yamlError(err))
	}
	c := evalCase{
		Name:     strings.TrimSpace(cf.Name),
		File:     file,
		Question: strings.TrimSpace(cf.Question),
		Expected: strings.TrimSpace(cf.ExpectedVerdict),
		Why:      strings.Join(strings.Fields(cf.Why), " "),
	}
	if c.Name == "" {
		c.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	if n := utf8.RuneCountInString(c.Name); n > maxCaseName {
		return fail("the name is %d characters long: give one of at most %d letters, digits, '.', '_' and '-' (name:, or the file's name)", n, maxCaseName)
	}
	if !caseName.MatchString(c.Name) {
		return fail("the name %q holds other characters than letters, digits, '.', '_' and '-' (name:, or the file's name)", c.Name)
	}
	if !slices.Contains(investigation.Verdicts, c.Expected) {
		if c.Expected == "" {
			return fail("expected_verdict is missing: give one of %s", strings.Join(investigation.Verdicts, ", "))
		}
		return fail("expected_verdict %q is not one of %s", c.Expected, strings.Join(investigation.Verdicts, ", "))
	}
	for i, e := range cf.Evidence {
		e = strings.TrimSpace(e)
		if e == "" {
			return fail("evidence item %d is empty", i+1)
		}
		if !slices.ContainsFunc(c.Evidence, func(x string) bool { return strings.EqualFold(x, e) }) {
			c.Evidence = append(c.Evidence, e)
		}
	}
	if len(c.Evidence) == 0 {
		return fail("no evidence listed: name at least one string a correct conclusion must cite (a host, an IP, a user, a past alert ID)")
	}
	if c.Why == "" {
		return fail("why is missing: say what decides the expected verdict, so that the label can be checked")
	}
	if strings.TrimSpace(cf.Alert) == "" {
		return fail("no alert: give the path of the alert JSON, relative to the case file")
	}
	dir := filepath.Dir(file)
	if c.Alert, err = caseAlert(dir, cf.Alert); err != nil {
		return fail("%v", err)
	}
	for _, h := range cf.History {
		al, err := caseAlert(dir, h)
		if err != nil {
			return fail("history: %v", err)
		}
		c.History = append(c.History, al)
	}
	// The model is shown the question too: what it gives away is given.
	shown := append(alertTexts(c.Alert), normalise(c.Question))
	for _, e := range c.Evidence {
		if slices.ContainsFunc(shown, func(t string) bool { return strings.Contains(t, normalise(e)) }) {
			c.InAlert = append(c.InAlert, e)
		}
	}
	if c.Rows, err = caseRows(cf.BigQueryRows); err != nil {
		return fail("bigquery_rows: %v", err)
	}
	return c, nil
}

// caseRows checks the rows a case adds, in a stable table order.
func caseRows(in map[string][]map[string]any) ([]tableRows, error) {
	if len(in) > maxCaseTable {
		return nil, fmt.Errorf("%d tables, more than %d", len(in), maxCaseTable)
	}
	var out []tableRows
	total := 0
	for _, table := range slices.Sorted(maps.Keys(in)) {
		rows := in[table]
		if !caseTableName.MatchString(table) {
			return nil, fmt.Errorf("%q is not a table name of the form dataset.table", table)
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("%s lists no rows", table)
		}
		for i, r := range rows {
			if len(r) == 0 {
				return nil, fmt.Errorf("%s row %d is empty", table, i+1)
			}
		}
		if total += len(rows); total > maxCaseRows {
			return nil, fmt.Errorf("more than %d rows", maxCaseRows)
		}
		out = append(out, tableRows{Table: table, Rows: rows})
	}
	return out, nil
}

// alertTexts are the texts the model is shown of an alert (its ID, type,
// title, every key and value), each normalised: evidence counts as in the
// alert when one of them holds it.
func alertTexts(al alerts.Alert) []string {
	out := []string{normalise(al.ID), normalise(al.Type), normalise(al.Title)}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				out = append(out, normalise(k))
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case nil:
		default:
			out = append(out, normalise(fmt.Sprint(v)))
		}
	}
	walk(al.Data)
	return out
}

// normalise folds what may differ between an evidence string and the text
// that holds it: Unicode compatibility forms, letter case and runs of white
// space.
func normalise(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(norm.NFKC.String(s))), " ")
}

// caseAlert reads and validates an alert named relative to a case file.
func caseAlert(dir, rel string) (alerts.Alert, error) {
	rel = strings.TrimSpace(rel)
	path := rel
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, rel)
	}
	raw, err := alerts.Read(context.Background(), path, nil) // a case file on disk: nothing to cancel
	if err != nil {
		return alerts.Alert{}, err
	}
	al, err := alerts.Parse(raw)
	if err != nil {
		return alerts.Alert{}, fmt.Errorf("alert %s: %w", rel, err)
	}
	return al, nil
}

// pathError drops the operation and path an *os.PathError repeats.
func pathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// yamlError turns a case file's YAML decoding error into one line that
// quotes none of its values (yamltext), naming a case's fields after an
// unknown one.
func yamlError(err error) string {
	msg := yamltext.Error(err)
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return "not valid YAML or JSON: " + msg
	}
	if strings.Contains(msg, ": unknown field ") { // yamltext's wording
		msg += " (a case has " + caseFields + ")"
	}
	return msg
}

// citedEvidence returns the expected evidence strings that the conclusion
// or the verdict's evidence facts cite, compared normalised and on word
// boundaries: "deploy" is not cited by "deployment", nor "cron" by "crontab".
func citedEvidence(expected []string, conclusion string, v *investigation.Verdict) []string {
	var text strings.Builder
	text.WriteString(conclusion)
	if v != nil {
		for _, e := range v.Evidence {
			text.WriteString("\n" + e.Fact)
		}
	}
	haystack := normalise(text.String())
	found := []string{}
	for _, e := range expected {
		if containsWord(haystack, normalise(e)) {
			found = append(found, e)
		}
	}
	return found
}

// containsWord reports whether needle occurs in haystack with no letter or
// digit right before or after it.
func containsWord(haystack, needle string) bool {
	if needle == "" {
		return false
	}
	for from := 0; ; {
		i := strings.Index(haystack[from:], needle)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(needle)
		before, _ := utf8.DecodeLastRuneInString(haystack[:start])
		after, _ := utf8.DecodeRuneInString(haystack[end:])
		if !wordRune(before) && !wordRune(after) {
			return true
		}
		_, size := utf8.DecodeRuneInString(haystack[start:])
		from = start + size
	}
}

func wordRune(r rune) bool {
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
}
