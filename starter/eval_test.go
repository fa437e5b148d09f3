package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/secops-agent/investigator/activities/bigquery/bqtools"
	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

var alertIDShape = regexp.MustCompile(`^(guardduty|scc|edr|generic)-[0-9a-f]{12}$`)

// TestExampleCases: the project's cases load and cover what the scorecard
// must measure: every source, every verdict (at least two undetermined),
// alerts or log rows that try to talk the model into benign, tools without
// the logs; every case says why its label is right, and every case that
// expects a decision names evidence the alert does not hold. Every past
// alert ID a case expects is one it imports (IDs are content-addressed, so
// an edited history file would break it), and the log rows a case adds go
// to configured tables, in their columns, never equal to a row of the
// sample data (removing them afterwards must not remove a shared row).
func TestExampleCases(t *testing.T) {
	cases, err := loadCases([]string{"../" + defaultCases})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(cases), 20)
	sources, verdicts := map[string]int{}, map[string]int{}
	byName := map[string]evalCase{}
	cfg, err := bqtools.LoadConfig("../examples/bigquery/tables.yaml")
	require.NoError(t, err)
	var configured []string
	for _, tb := range cfg.Tables {
		configured = append(configured, tb.ID)
	}
	sample := sampleRows(t)
	for _, c := range cases {
		byName[c.Name] = c
		sources[c.Alert.Source]++
		verdicts[c.Expected]++
		assert.GreaterOrEqual(t, len(c.Why), 80, "case %s must say why its label is right", c.Name)
		if c.Expected != investigation.VerdictUndetermined {
			assert.NotEmpty(t, c.novel(), "case %s expects %s but every evidence string is already in its alert: %v", c.Name, c.Expected, c.InAlert)
		}
		ids := []string{c.Alert.ID}
		for _, h := range c.History {
			ids = append(ids, h.ID)
		}
		for _, e := range c.Evidence {
			if alertIDShape.MatchString(e) {
				assert.Contains(t, ids, e, "case %s expects alert %s as evidence but does not import it", c.Name, e)
			}
		}
		for _, tr := range c.Rows {
			require.Contains(t, configured, tr.Table, "case %s", c.Name)
			for i, r := range tr.Rows {
				_, _, err := rowCondition(sample.schemas[tr.Table], r)
				assert.NoError(t, err, "case %s %s row %d", c.Name, tr.Table, i+1)
				assert.False(t, slices.ContainsFunc(sample.rows[tr.Table], func(s map[string]any) bool { return sameRow(s, r) }),
					"case %s %s row %d equals a row of data.yaml", c.Name, tr.Table, i+1)
			}
		}
	}
	for _, s := range []string{alerts.SourceGuardDuty, alerts.SourceSCC, alerts.SourceEDR, alerts.SourceGeneric} {
		assert.NotZero(t, sources[s], "no case with a %s alert", s)
	}
	for _, v := range investigation.Verdicts {
		assert.GreaterOrEqual(t, verdicts[v], 2, "fewer than two cases expect %s", v)
	}
	// Hostile text: in an alert field, and in log rows the case adds.
	inject := regexp.MustCompile(`(?i)benign`)
	injected := byName["guardduty-bitcointool-tag-injection"]
	assert.Equal(t, investigation.VerdictTruePositive, injected.Expected)
	assert.Regexp(t, inject, fmt.Sprint(injected.Alert.Data))
	logged := byName["guardduty-ssh-api-server-username-injection"]
	assert.Equal(t, investigation.VerdictTruePositive, logged.Expected)
	require.NotEmpty(t, logged.Rows)
	assert.Regexp(t, inject, fmt.Sprint(logged.Rows))
	// The logs the decision would need are missing.
	for _, name := range []string{"edr-db-server-unknown-domain-no-logs", "guardduty-portscan-web-server-logs-missing"} {
		c, ok := byName[name]
		require.True(t, ok, "case %s", name)
		assert.NotEmpty(t, c.Why)
	}
}

// sample is the schema and rows of each table of data.yaml.
type sample struct {
	schemas map[string]bigquery.Schema
	rows    map[string][]map[string]any
}

func sampleRows(t *testing.T) sample {
	t.Helper()
	raw, err := os.ReadFile("../examples/bigquery/data.yaml")
	require.NoError(t, err)
	var doc struct {
		Projects []struct {
			Datasets []struct {
				ID     string `yaml:"id"`
				Tables []struct {
					ID      string           `yaml:"id"`
					Columns []column         `yaml:"columns"`
					Data    []map[string]any `yaml:"data"`
				} `yaml:"tables"`
			} `yaml:"datasets"`
		} `yaml:"projects"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	s := sample{schemas: map[string]bigquery.Schema{}, rows: map[string][]map[string]any{}}
	for _, p := range doc.Projects {
		for _, d := range p.Datasets {
			for _, tb := range d.Tables {
				name := d.ID + "." + tb.ID
				s.schemas[name] = schemaOf(tb.Columns)
				s.rows[name] = tb.Data
			}
		}
	}
	return s
}

type column struct {
	Name   string   `yaml:"name"`
	Type   string   `yaml:"type"`
	Mode   string   `yaml:"mode"`
	Fields []column `yaml:"fields"`
}

func schemaOf(cols []column) bigquery.Schema {
	var s bigquery.Schema
	for _, c := range cols {
		s = append(s, &bigquery.FieldSchema{Name: c.Name, Type: bigquery.FieldType(c.Type), Repeated: c.Mode == "REPEATED", Schema: schemaOf(c.Fields)})
	}
	return s
}

// sameRow says every column r gives holds the same value in s.
func sameRow(s, r map[string]any) bool {
	for k, v := range r {
		if fmt.Sprint(s[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// writeCase writes a case file (and an alert next to it) in a temp dir.
func writeCase(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

const testAlert = `{"rule_name": "test rule", "title": "a test alert", "severity": "low", "client_ip": "192.0.2.1", "details": {"User Name": "Alice  Smith"}}`

// TestLoadCaseErrors: a bad case file gives one sentence naming the file
// and the problem, before anything runs.
func TestLoadCaseErrors(t *testing.T) {
	dir := t.TempDir()
	writeCase(t, dir, "alert.json", testAlert)
	writeCase(t, dir, "array.json", `[1, 2]`)
	good := "alert: alert.json\nexpected_verdict: benign\nwhy: the scan is authorised\nevidence: [192.0.2.1]\n"
	for _, tc := range []struct{ name, body, want string }{
		{"empty", "  \n", "the file is empty"},
		{"syntax", "name: [unclosed\n", "not valid YAML or JSON: line 1: did not find expected ',' or ']'"},
		{"unknown field", good + "verdict: benign\n", `line 5: unknown field "verdict" (a case has name, alert, question, expected_verdict, why, evidence, history, bigquery_rows)`},
		{"no verdict", "alert: alert.json\nwhy: w\nevidence: [x]\n", "expected_verdict is missing: give one of true_positive, benign, false_positive, undetermined"},
		{"bad verdict", "alert: alert.json\nexpected_verdict: malicious\nwhy: w\nevidence: [x]\n", `expected_verdict "malicious" is not one of true_positive, benign, false_positive, undetermined`},
		{"no evidence", "alert: alert.json\nexpected_verdict: benign\nwhy: w\n", "no evidence listed"},
		{"blank evidence", "alert: alert.json\nexpected_verdict: benign\nwhy: w\nevidence: [x, '  ']\n", "evidence item 2 is empty"},
		{"no why", "alert: alert.json\nexpected_verdict: benign\nevidence: [x]\nwhy: '  '\n", "why is missing: say what decides the expected verdict"},
		{"no alert", "expected_verdict: benign\nwhy: w\nevidence: [x]\n", "no alert: give the path of the alert JSON, relative to the case file"},
		{"missing alert", "alert: nope.json\nexpected_verdict: benign\nwhy: w\nevidence: [x]\n", `cannot read alert file "` + filepath.Join(dir, "nope.json") + `": no such file or directory`},
		{"alert not an object", "alert: array.json\nexpected_verdict: benign\nwhy: w\nevidence: [x]\n", "alert array.json: the alert must be a JSON object, got an array"},
		{"bad history", good + "history: [array.json]\n", "history: alert array.json: the alert must be a JSON object"},
		{"wrong type", "alert: alert.json\nexpected_verdict: benign\nwhy: w\nevidence: {a: b}\n", "line 4: a !!map value where []string belongs"},
		{"bad table", good + "bigquery_rows: {auth_events: [{host: h}]}\n", `bigquery_rows: "auth_events" is not a table name of the form dataset.table`},
		{"no rows", good + "bigquery_rows: {logs.auth_events: []}\n", "bigquery_rows: logs.auth_events lists no rows"},
		{"empty row", good + "bigquery_rows: {logs.auth_events: [{host: h}, {}]}\n", "bigquery_rows: logs.auth_events row 2 is empty"},
		// A name makes the runs' workflow IDs and summaries: unbounded, every
		// run of the case failed to start.
		{"long name", "name: " + strings.Repeat("a", 101) + "\n" + good, "the name is 101 characters long: give one of at most 100 letters, digits, '.', '_' and '-'"},
		{"name with spaces", "name: 'a case/../x'\n" + good, `the name "a case/../x" holds other characters than letters, digits, '.', '_' and '-'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeCase(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.body)
			_, err := loadCases([]string{p})
			require.Error(t, err)
			msg := err.Error()
			assert.NotContains(t, msg, "\n", "one sentence")
			assert.True(t, strings.HasPrefix(msg, "case "+p+": "), msg)
			assert.Contains(t, msg, tc.want)
		})
	}

	t.Run("duplicate names", func(t *testing.T) {
		d := t.TempDir()
		writeCase(t, d, "alert.json", testAlert)
		a := writeCase(t, d, "a.yaml", "name: same\n"+good)
		b := writeCase(t, d, "b.json", `{"name": "SAME", "alert": "alert.json", "expected_verdict": "benign", "why": "w", "evidence": ["x"]}`)
		_, err := loadCases([]string{d})
		require.EqualError(t, err, a+" and "+b+` both name case "SAME": case names must be unique`, "alert.json in the directory is no case")
		_, err = loadCases([]string{filepath.Join(d, "alert.json")})
		require.ErrorContains(t, err, `line 1: unknown field "rule_name"`, "a file named on its own is a case")
	})
	t.Run("no case files", func(t *testing.T) {
		d := t.TempDir()
		_, err := loadCases([]string{d})
		require.EqualError(t, err, "cases "+d+": the directory holds no case files (.yaml, .yml, .json)")
		_, err = loadCases([]string{filepath.Join(d, "missing")})
		require.EqualError(t, err, "cases "+filepath.Join(d, "missing")+": no such file or directory")
	})
	t.Run("good case", func(t *testing.T) {
		d := t.TempDir()
		writeCase(t, d, "alert.json", testAlert)
		p := writeCase(t, d, "my-case.yml", `alert: alert.json
expected_verdict: benign
why: >-
  Two   lines
  of reasons.
evidence: [192.0.2.1, ' 192.0.2.1 ', Bob, 'alice smith', ＴＥＳＴ　ＲＵＬＥ, user name]
question: ' why? '
bigquery_rows:
  logs.b: [{host: h, n: 2}]
  logs.a: [{host: h, at: 2026-11-20T08:00:00Z, rec: {k: v}}]
`)
		cases, err := loadCases([]string{p})
		require.NoError(t, err)
		require.Len(t, cases, 1)
		c := cases[0]
		assert.Equal(t, "my-case", c.Name, "the name defaults to the file's")
		assert.Equal(t, "why?", c.Question)
		assert.Equal(t, "Two lines of reasons.", c.Why)
		assert.Equal(t, []string{"192.0.2.1", "Bob", "alice smith", "ＴＥＳＴ　ＲＵＬＥ", "user name"}, c.Evidence, "trimmed, duplicates dropped")
		// Compared normalised (case, white space, full-width forms), in
		// values and keys, nested or not: only Bob is left to find.
		assert.Equal(t, []string{"192.0.2.1", "alice smith", "ＴＥＳＴ　ＲＵＬＥ", "user name"}, c.InAlert)
		assert.Equal(t, []string{"Bob"}, c.novel())
		assert.Equal(t, alerts.SourceGeneric, c.Alert.Source)
		assert.Regexp(t, alertIDShape, c.Alert.ID)
		require.Len(t, c.Rows, 2)
		assert.Equal(t, "logs.a", c.Rows[0].Table, "tables in a stable order")
		assert.Equal(t, "v", c.Rows[0].Rows[0]["rec"].(map[string]any)["k"])
	})
}

// TestCitedEvidence: expected strings count when the conclusion or a
// verdict evidence fact holds them, compared normalised.
func TestCitedEvidence(t *testing.T) {
	v := &investigation.Verdict{Verdict: "true_positive", Evidence: []investigation.Evidence{
		{StepID: "step_2", Tool: "bigquery_agent", Fact: "Accepted password for DEPLOY from １９８.５１.１００.２３"},
	}}
	expected := []string{"198.51.100.23", "deploy", "Kdevtmpfsi", "guardduty-8db0f55e83fd", "203.0.113.50", "git pull"}
	got := citedEvidence(expected, "The miner /tmp/kdevtmpfsi runs; see GuardDuty-8DB0F55E83FD after a\n  git\tpull.", v)
	assert.Equal(t, []string{"198.51.100.23", "deploy", "Kdevtmpfsi", "guardduty-8db0f55e83fd", "git pull"}, got)
	assert.Empty(t, citedEvidence(expected, "", nil))

	// Fragments and stock advice cite nothing: the match is on word boundaries.
	generic := "Review the deployment pipeline and the crontab; check 198.51.100.230 and /tmp/kdevtmpfsi2. Reset the deploy_key."
	assert.Empty(t, citedEvidence([]string{"deploy", "cron", "198.51.100.23", "kdevtmpfsi", "Accepted password for deploy", "pgrep -x kdevtmpfsi"}, generic, nil))
	assert.NotNil(t, citedEvidence(expected, "", nil), "an empty list, not null, in JSON")
}

// testScorecard has a correct case with its baseline, a wrong one and one
// that failed.
func testScorecard() scorecard {
	m := investigation.ModelEndpoint{Model: "gemini-2.5-flash", Backend: "gemini-api", BaseURL: "http://127.0.0.1:8089", Local: true}
	s := scorecard{Model: &m, Warning: standInWarning(m), Repeat: 1, Isolated: true, Cases: []caseResult{
		{Name: "tp-case", Expected: "true_positive", Evidence: []string{"a", "b", "c"}, InAlert: []string{"d"},
			Runs: []runResult{{Verdict: "true_positive", Confidence: "high", Correct: true, Cited: []string{"a", "c"}, Steps: 3, ToolCalls: 4, ModelCalls: 11,
				PromptTokens: 12000, OutputTokens: 345, Wall: 4230 * time.Millisecond,
				Actions: []proposedAction{{Tool: "response.block_ip", Args: `{"ip":"203.0.113.9"}`, Status: "expired"}}}},
			Baseline: []runResult{{Verdict: "benign", Confidence: "low", Cited: []string{}, ModelCalls: 1, PromptTokens: 900, OutputTokens: 100, Wall: 800 * time.Millisecond}}},
		{Name: "benign-case-long-name", Expected: "benign", Evidence: []string{"x"}, InAlert: []string{},
			Runs: []runResult{{Verdict: "undetermined", Confidence: "low", Cited: []string{}, Steps: 2, ToolCalls: 1, ModelCalls: 7,
				PromptTokens: 8000, OutputTokens: 655, Wall: 72*time.Second + 440*time.Millisecond}},
			Baseline: []runResult{{Verdict: "benign", Confidence: "medium", Correct: true, Cited: []string{"x"}, ModelCalls: 1, PromptTokens: 1000, OutputTokens: 100, Wall: 1200 * time.Millisecond}}},
		{Name: "fp-case", Expected: "false_positive", Evidence: []string{"y", "z"}, InAlert: []string{},
			Runs: []runResult{{Cited: []string{}, Wall: 900 * time.Millisecond,
				Error: "the investigation failed: planning failed: Gemini rejected the request (HTTP 400)"}},
			Baseline: []runResult{{Verdict: "true_positive", Confidence: "medium", Cited: []string{}, ModelCalls: 1, PromptTokens: 1100, OutputTokens: 100, Wall: time.Second}}},
	}}
	s.sum()
	return s
}

const scorecardGolden = `Model: gemini-2.5-flash (gemini-api, http://127.0.0.1:8089) — a local server, such as the offline Gemini stand-in: its answers are scripted
WARNING: the worker's model endpoint http://127.0.0.1:8089 is a local server, such as the offline Gemini stand-in: its answers are scripted, so these scores mean nothing about any model.

CASE                   EXPECTED        VERDICT         EVIDENCE  BASELINE         STEPS  TOOL CALLS  MODEL CALLS  TOKENS  WALL     ACTIONS PROPOSED             ERROR
tp-case                true_positive   true_positive   2/3       benign ✗         3      4           11           12345   4.2s     response.block_ip (expired)  
benign-case-long-name  benign          undetermined ✗  0/1       benign           2      1           7            8655    1m12.4s  -                            
fp-case                false_positive  -               0/2       true_positive ✗  -      -           -            -       900ms    -                            the investigation failed: planning failed: Gemini rejected the request (HTTP 400)

confusion matrix, agent (rows: expected verdict; columns: the verdict given, in runs):
EXPECTED        true_positive  benign  false_positive  undetermined  failed  RECALL
true_positive   1              0       0               0             0       1/1 (100.0%)
benign          0              0       0               1             0       0/1 (0.0%)
false_positive  0              0       0               0             1       0/1 (0.0%)

confusion matrix, baseline (rows: expected verdict; columns: the verdict given, in runs):
EXPECTED        true_positive  benign  false_positive  undetermined  failed  RECALL
true_positive   0              1       0               0             0       0/1 (0.0%)
benign          0              1       0               0             0       1/1 (100.0%)
false_positive  1              0       0               0             0       0/1 (0.0%)

                        AGENT                                   BASELINE (alert only, no tools)
verdict accuracy        1/3 (33.3%)                             1/3 (33.3%)
balanced accuracy       33.3% (mean per-class recall)           33.3% (mean per-class recall)
missed intrusions       0 of 1                                  1 of 1
evidence recall         2/6 (33.3%)                             1/6 (16.7%)
runs proposing actions  1 of 3                                  0 of 3
mean tokens/run         10500 (over the 2 runs that concluded)  1100 (over the 3 runs that concluded)
mean wall time          38.3s                                   1s
(a missed intrusion is a true_positive judged benign or false_positive; evidence recall counts only expected evidence neither the alert nor the question already holds)
WARNING: the worker's model endpoint http://127.0.0.1:8089 is a local server, such as the offline Gemini stand-in: its answers are scripted, so these scores mean nothing about any model.
`

// TestScorecardRendering: the table, the confusion matrices, the totals of
// the agent and the baseline side by side (accuracy and recall over every
// run, means over the concluded ones) and the stand-in warning above and
// below, as text and as JSON.
func TestScorecardRendering(t *testing.T) {
	s := testScorecard()
	var out bytes.Buffer
	require.NoError(t, printScorecard(&out, s))
	assert.Equal(t, scorecardGolden, out.String())

	out.Reset()
	require.NoError(t, printScorecardJSON(&out, s))
	var got map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	totals := got["totals"].(map[string]any)
	assert.Equal(t, map[string]any{
		"runs": 3.0, "concluded": 2.0, "correct": 1.0, "verdict_accuracy": 1.0 / 3, "balanced_accuracy": 1.0 / 3,
		"per_class": []any{
			map[string]any{"verdict": "true_positive", "runs": 1.0, "correct": 1.0, "recall": 1.0},
			map[string]any{"verdict": "benign", "runs": 1.0, "correct": 0.0, "recall": 0.0},
			map[string]any{"verdict": "false_positive", "runs": 1.0, "correct": 0.0, "recall": 0.0},
		},
		"confusion":  map[string]any{"true_positive": map[string]any{"true_positive": 1.0}, "benign": map[string]any{"undetermined": 1.0}, "false_positive": map[string]any{"failed": 1.0}},
		"intrusions": 1.0, "missed_intrusions": 0.0, "evidence_expected": 6.0, "evidence_cited": 2.0, "evidence_recall": 2.0 / 6,
		"mean_tokens": 10500.0, "mean_wall_seconds": 38.3, "runs_proposing_actions": 1.0}, totals)
	assert.Equal(t, 1.0, got["baseline_totals"].(map[string]any)["missed_intrusions"])
	assert.Equal(t, 1.0, got["repeat"])
	assert.Equal(t, true, got["isolated"])
	assert.Nil(t, got["spread"], "one run per case: no spread")
	rows := got["cases"].([]any)
	require.Len(t, rows, 3)
	assert.Equal(t, 72.4, rows[1].(map[string]any)["runs"].([]any)[0].(map[string]any)["wall_seconds"])
	assert.Equal(t, []any{"d"}, rows[0].(map[string]any)["evidence_in_alert"])
	assert.Equal(t, "the investigation failed: planning failed: Gemini rejected the request (HTTP 400)", rows[2].(map[string]any)["runs"].([]any)[0].(map[string]any)["error"])
	assert.Equal(t, true, got["model"].(map[string]any)["local"])
	assert.Contains(t, got["warning"], "scores mean nothing")

	// A real model: no warning; no baseline: one column; no run concluded: no means.
	s = scorecard{Model: &investigation.ModelEndpoint{Model: "gemini-2.5-pro", Backend: "vertex-ai", BaseURL: "https://us-central1-aiplatform.googleapis.com/"},
		Cases: []caseResult{{Name: "c", Expected: "benign", Evidence: []string{"x"}, Runs: []runResult{{Cited: []string{}, Error: "no conclusion within 1m0s; investigation eval-c-1 was cancelled"}}}}}
	s.sum()
	out.Reset()
	require.NoError(t, printScorecard(&out, s))
	assert.NotContains(t, out.String(), "WARNING")
	assert.NotContains(t, out.String(), "BASELINE")
	assert.Contains(t, out.String(), "Model: gemini-2.5-pro (vertex-ai, https://us-central1-aiplatform.googleapis.com/)\n")
	assert.Regexp(t, `(?m)^mean tokens/run\s+n/a \(no run concluded\)$`, out.String())
}

// constantModel answers every case with one verdict and writes a
// conclusion that repeats the whole alert and no more.
func constantModel(cases []evalCase, verdict string, baseline bool) scorecard {
	s := scorecard{Repeat: 1}
	for _, c := range cases {
		raw, _ := json.Marshal(c.Alert.Data)
		conclusion := c.Alert.ID + " " + c.Alert.Title + "\n" + string(raw)
		r := runResult{Verdict: verdict, Confidence: "high", Correct: verdict == c.Expected,
			Cited: citedEvidence(c.novel(), conclusion, &investigation.Verdict{Verdict: verdict})}
		cr := caseResult{Name: c.Name, Expected: c.Expected, Evidence: nonNil(c.novel()), InAlert: c.InAlert, Runs: []runResult{r}}
		if baseline {
			cr.Baseline = []runResult{r}
		}
		s.Cases = append(s.Cases, cr)
	}
	s.sum()
	return s
}

// TestConstantVerdictIsExposed: a model that always answers the same
// verdict and only repeats the alert cannot score well on the project's
// cases. Its balanced accuracy is one class's share, its confusion matrix
// has one column, every other verdict's recall is 0, a constant benign or
// false_positive misses every intrusion, and its evidence recall is 0:
// what it cites was in the alert.
func TestConstantVerdictIsExposed(t *testing.T) {
	cases, err := loadCases([]string{"../" + defaultCases})
	require.NoError(t, err)
	intrusions := 0
	for _, c := range cases {
		if c.Expected == investigation.VerdictTruePositive {
			intrusions++
		}
	}
	for _, v := range investigation.Verdicts {
		t.Run(v, func(t *testing.T) {
			s := constantModel(cases, v, true)
			tt := s.Totals
			assert.InDelta(t, 0.25, tt.BalancedAccuracy, 1e-9, "one of four classes")
			assert.Less(t, tt.Accuracy, 0.5, "no verdict is the answer to half the cases")
			assert.Zero(t, tt.EvidenceCited, "repeating the alert cites nothing the alert did not hold")
			assert.Zero(t, tt.Recall)
			for _, ct := range tt.Classes {
				if ct.Verdict == v {
					assert.Equal(t, 1.0, ct.Recall)
				} else {
					assert.Zero(t, ct.Recall, "%s recall", ct.Verdict)
				}
			}
			for expected, row := range tt.Confusion {
				assert.Equal(t, map[string]int{v: row[v]}, row, "every run of expected %s is in column %s", expected, v)
			}
			missed := 0
			if v == investigation.VerdictBenign || v == investigation.VerdictFalsePositive {
				missed = intrusions
			}
			assert.Equal(t, missed, tt.MissedIntrusions)
			assert.Equal(t, intrusions, tt.Intrusions)

			var out bytes.Buffer
			require.NoError(t, printScorecard(&out, s))
			text := out.String()
			assert.Regexp(t, `(?m)^balanced accuracy\s+25\.0% \(mean per-class recall\)`, text)
			assert.Regexp(t, fmt.Sprintf(`(?m)^missed intrusions\s+%d of %d\s`, missed, intrusions), text)
			assert.Regexp(t, `(?m)^evidence recall\s+0/\d+ \(0\.0%\)`, text)
			for _, other := range investigation.Verdicts {
				if other != v {
					assert.Regexp(t, `(?m)^`+other+`\s.*\s0/\d+ \(0\.0%\)$`, text, "%s recall shown as 0", other)
				}
			}
		})
	}
	// The flattery the old scorecard allowed: plain accuracy of a constant
	// true_positive is the share of intrusions, far from the 50% it once had.
	s := constantModel(cases, investigation.VerdictTruePositive, false)
	assert.InDelta(t, float64(intrusions)/float64(len(cases)), s.Totals.Accuracy, 1e-9)
}

// TestSpread: with --repeat, each case shows its verdicts, how many were
// right and how much they agree, and the report gives min / median / max
// of each pass's scores.
func TestSpread(t *testing.T) {
	run := func(v string, expected string, cited ...string) runResult {
		return runResult{Verdict: v, Correct: v == expected, Cited: append([]string{}, cited...), ModelCalls: 3, PromptTokens: 100, Wall: time.Second}
	}
	s := scorecard{Repeat: 3, Cases: []caseResult{
		{Name: "steady", Expected: "true_positive", Evidence: []string{"a", "b"}, Runs: []runResult{
			run("true_positive", "true_positive", "a"), run("true_positive", "true_positive", "a", "b"), run("true_positive", "true_positive")}},
		{Name: "wobbly", Expected: "true_positive", Evidence: []string{"c"}, Runs: []runResult{
			run("benign", "true_positive"), run("true_positive", "true_positive", "c"), {Cited: []string{}, Error: "boom"}}},
		{Name: "fp", Expected: "false_positive", Evidence: []string{"d"}, Runs: []runResult{
			run("false_positive", "false_positive", "d"), run("undetermined", "false_positive"), run("false_positive", "false_positive", "d")}},
	}}
	s.sum()
	require.NotNil(t, s.Spread)
	// Passes: 1st 2/3 right, 1 missed, recall 2/4; 2nd 2/3, 0, 3/4; 3rd 2/3, 0, 1/4.
	assert.Equal(t, stats{Min: 2.0 / 3, Median: 2.0 / 3, Max: 2.0 / 3}, s.Spread.Accuracy)
	assert.Equal(t, stats{Min: 0, Median: 0, Max: 1}, s.Spread.MissedIntrusions)
	assert.Equal(t, stats{Min: 0.25, Median: 0.5, Max: 0.75}, s.Spread.Recall)
	assert.Equal(t, 1, s.Spread.Unanimous)
	assert.InDelta(t, (1+1.0/3+2.0/3)/3, s.Spread.MeanAgreement, 1e-9)
	assert.Nil(t, s.BaselineSpread)

	var out bytes.Buffer
	require.NoError(t, printScorecard(&out, s))
	text := out.String()
	assert.Regexp(t, `(?m)^CASE\s+EXPECTED\s+VERDICT\s+RIGHT\s+AGREE\s+EVIDENCE\s+STEPS`, text)
	assert.Regexp(t, `(?m)^steady\s+true_positive\s+true_positive ×3\s+3/3\s+100\.0%\s+1\.0/2\s`, text)
	assert.Regexp(t, `(?m)^wobbly\s+true_positive\s+true_positive ×1, benign ×1, failed ×1 ✗\s+1/3\s+33\.3%\s+0\.3/1\s.*\s1 of 3 runs failed, first: boom$`, text)
	assert.Regexp(t, `(?m)^fp\s+false_positive\s+false_positive ×2, undetermined ×1 ✗\s+2/3\s+66\.7%\s`, text)
	assert.Contains(t, text, "spread over 3 runs of each case (min / median / max over the 3 passes):\n")
	assert.Regexp(t, `(?m)^verdict accuracy\s+66\.7% / 66\.7% / 66\.7%$`, text)
	assert.Regexp(t, `(?m)^missed intrusions\s+0 / 0 / 1$`, text)
	assert.Regexp(t, `(?m)^evidence recall\s+25\.0% / 50\.0% / 75\.0%$`, text)
	assert.Regexp(t, `(?m)^verdict agreement\s+1 of 3 cases unanimous; mean 66\.7%$`, text)
}

// TestCheckIsolation: the eval empties only a database of the Firestore
// emulator whose ID ends in -eval.
func TestCheckIsolation(t *testing.T) {
	_, err := checkIsolation(firestoreTarget{"", "demo-investigator", "investigator-eval"})
	require.ErrorContains(t, err, "only on the Firestore emulator: set FIRESTORE_EMULATOR_HOST")
	for _, d := range []string{"(default)", "prod", "-eval", "evaluation", "x-eval-2"} {
		_, err = checkIsolation(firestoreTarget{"127.0.0.1:8081", "demo-investigator", d})
		require.ErrorContains(t, err, fmt.Sprintf(`empties Firestore database %q before each case, and it empties only a database whose ID ends in "-eval"`, d))
		require.ErrorContains(t, err, "--firestore-database investigator-eval")
	}
	u, err := checkIsolation(firestoreTarget{"127.0.0.1:8081", "demo-investigator", "investigator-eval"})
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:8081/emulator/v1/projects/demo-investigator/databases/investigator-eval/documents", u)
}

// TestRowCondition: a case row is matched by every scalar it gives, in its
// column's type, nested records by path, nulls with IS NULL.
func TestRowCondition(t *testing.T) {
	schema := bigquery.Schema{
		{Name: "timestamp", Type: bigquery.TimestampFieldType},
		{Name: "host", Type: "STRING"},
		{Name: "pid", Type: "INT64"},
		{Name: "cpu", Type: "FLOAT64"},
		{Name: "ok", Type: "BOOLEAN"},
		{Name: "tags", Type: "STRING", Repeated: true},
		{Name: "request", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "method", Type: "STRING"}, {Name: "status_code", Type: "INTEGER"}}},
	}
	at := time.Date(2026, 11, 20, 8, 14, 52, 0, time.UTC)
	where, params, err := rowCondition(schema, map[string]any{
		"timestamp": "2026-11-20T08:14:52Z", "host": "h", "pid": 7, "cpu": 1, "ok": nil, "tags": []any{"x"},
		"request": map[string]any{"method": "GetSecretValue", "status_code": 200},
	})
	require.NoError(t, err)
	assert.Equal(t, "`cpu` = @p0 AND `host` = @p1 AND `ok` IS NULL AND `pid` = @p2 AND `request`.`method` = @p3 AND `request`.`status_code` = @p4 AND `timestamp` = @p5", where)
	var values []any
	for _, p := range params {
		values = append(values, p.Value)
	}
	assert.Equal(t, []any{1.0, "h", int64(7), "GetSecretValue", int64(200), at}, values)

	_, _, err = rowCondition(schema, map[string]any{"hots": "h"})
	assert.EqualError(t, err, `no column "hots" (the columns are timestamp, host, pid, cpu, ok, tags, request)`)
	_, _, err = rowCondition(schema, map[string]any{"timestamp": "yesterday"})
	assert.EqualError(t, err, `column timestamp: "yesterday" is not a timestamp like 2026-11-20T08:14:52Z`)
	_, _, err = rowCondition(schema, map[string]any{"pid": "7"})
	assert.EqualError(t, err, "column pid: 7 (string) is not a INT64")
	_, _, err = rowCondition(schema, map[string]any{"request": "x"})
	assert.EqualError(t, err, "column request is a record: give it as a mapping")
	_, _, err = rowCondition(schema, map[string]any{"tags": []any{"x"}})
	assert.EqualError(t, err, "the row gives no column that can be compared")
}

// fakeEval answers cases from a script keyed by case name, and records
// what it was asked, in order.
type fakeEval struct {
	mu         sync.Mutex
	catalogErr error
	model      investigation.ModelEndpoint
	results    map[string]investigation.Result
	baseline   map[string]investigation.Result
	errs       map[string]error
	prepareErr map[string]error
	ids        []string
	log        []string // "prepare a,b fresh", "run a", "baseline a", "undo a,b"
	block      bool     // wait for the context instead of answering
	// store is the database the worker says it uses: the eval's when nil,
	// none when oldWorker.
	store     *investigation.StoreEndpoint
	oldWorker bool
	tools     []investigation.ToolStatus
}

func (f *fakeEval) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

func (f *fakeEval) catalog(context.Context) (investigation.Catalog, error) {
	store := f.store
	if store == nil && !f.oldWorker {
		store = &investigation.StoreEndpoint{Project: config.EmulatorProject, Database: "investigator-eval", Emulator: true}
	}
	return investigation.Catalog{Model: f.model, Store: store, Tools: f.tools}, f.catalogErr
}

func (f *fakeEval) prepare(_ context.Context, cases []evalCase, fresh bool) (func(), error) {
	var names []string
	for _, c := range cases {
		names = append(names, c.Name)
	}
	what := strings.Join(names, ",")
	if fresh {
		f.note("prepare " + what + " fresh")
	} else {
		f.note("prepare " + what)
	}
	undo := func() { f.note("undo " + what) }
	if len(cases) == 1 {
		return undo, f.prepareErr[cases[0].Name]
	}
	return undo, nil
}

func (f *fakeEval) investigate(ctx context.Context, c evalCase, id string, baseline bool) (investigation.Result, error) {
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.mu.Unlock()
	if baseline {
		f.note("baseline " + c.Name)
	} else {
		f.note("run " + c.Name)
	}
	if f.block {
		<-ctx.Done()
		return investigation.Result{}, errors.New("no conclusion within the timeout")
	}
	if err := f.errs[c.Name]; err != nil {
		return investigation.Result{}, err
	}
	if baseline {
		if res, ok := f.baseline[c.Name]; ok {
			return res, nil
		}
		return investigation.Result{Conclusion: "From the alert alone.", Verdict: &investigation.Verdict{Verdict: "undetermined", Confidence: "low"},
			Spend: investigation.Spend{Usage: investigation.Usage{Calls: 1, PromptTokens: 500, OutputTokens: 50}}}, nil
	}
	return f.results[c.Name], nil
}

// evalDir writes two cases: tp (expects true_positive) and fp.
func evalDir(t *testing.T) string {
	d := t.TempDir()
	writeCase(t, d, "alert.json", testAlert)
	writeCase(t, d, "tp.yaml", "alert: alert.json\nexpected_verdict: true_positive\nwhy: w\nevidence: [198.51.100.23, deploy]\n")
	writeCase(t, d, "fp.yaml", "alert: alert.json\nexpected_verdict: false_positive\nwhy: w\nevidence: [cron, 192.0.2.1]\n")
	return d
}

func concluded(verdict, md string) investigation.Result {
	p := plan.Plan{Steps: []plan.Step{{ID: "step_1", Status: plan.Done}, {ID: "step_2", Status: plan.Done}, {ID: "step_3", Status: plan.Cancelled}}}
	return investigation.Result{Conclusion: md, Verdict: &investigation.Verdict{Verdict: verdict, Confidence: "medium"}, Plan: p,
		Spend: investigation.Spend{ToolCalls: 3, Usage: investigation.Usage{Calls: 8, PromptTokens: 1000, OutputTokens: 150, ThoughtTokens: 50}}}
}

// runEvalCommand runs `starter eval args...` against f, by default on the
// emulator's database investigator-eval, as go tool task eval does.
func runEvalCommand(t *testing.T, f *fakeEval, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1")
	t.Setenv("FIRESTORE_DATABASE", "investigator-eval")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "")
	old := newEvalBackend
	t.Cleanup(func() { newEvalBackend = old })
	newEvalBackend = func(*app, *cobra.Command, evalOptions, []evalCase) (evalBackend, func(), error) {
		return f, func() {}, nil
	}
	var out, errOut bytes.Buffer
	root := newRootApp(testApp(), &out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"eval"}, args...))
	err = root.ExecuteContext(testCtx(t))
	return out.String(), errOut.String(), err
}

// TestEvalExitCodes: 0 (no error) when every run concluded, whatever the
// verdicts; 1 with one sentence when a run did not conclude (its row holds
// the error), --min-accuracy is not met or --max-missed-intrusions is
// passed; bad options stop before any case runs.
func TestEvalExitCodes(t *testing.T) {
	dir := evalDir(t)
	ok := func() *fakeEval {
		return &fakeEval{model: investigation.ModelEndpoint{Model: "gemini-2.5-flash", Backend: "gemini-api", BaseURL: "https://generativelanguage.googleapis.com/"},
			results: map[string]investigation.Result{
				"tp": concluded("true_positive", "198.51.100.23 logged in as deploy."),
				"fp": concluded("benign", "A reverse shell from 192.0.2.1."),
			}}
	}

	f := ok()
	out, log, err := runEvalCommand(t, f, "--cases", dir)
	require.NoError(t, err, "every run concluded: exit 0 even with a wrong verdict")
	// Thinking counts as output, as in the starter's totals line: 1000 + 150 + 50.
	// 192.0.2.1 is in the alert: fp has one evidence string to find, not two.
	assert.Regexp(t, `(?m)^fp\s+false_positive\s+benign ✗\s+0/1\s+undetermined ✗\s+2\s+3\s+8\s+1200\s`, out)
	assert.Regexp(t, `(?m)^tp\s+true_positive\s+true_positive\s+2/2\s+undetermined ✗\s+2\s+3\s+8\s+1200\s`, out)
	assert.Regexp(t, `(?m)^verdict accuracy\s+1/2 \(50\.0%\)\s+0/2 \(0\.0%\)$`, out)
	assert.Regexp(t, `(?m)^evidence recall\s+2/3 \(66\.7%\)\s+0/3 \(0\.0%\)$`, out)
	assert.NotContains(t, out, "WARNING")
	assert.Contains(t, log, "eval: 2 cases, 4 runs (2 at a time), each case on an emptied store\n")
	require.Len(t, f.ids, 4)
	for _, id := range f.ids {
		assert.Regexp(t, `^eval-(tp|fp)(-baseline)?-\d{8}-\d{6}\.\d{3}$`, id)
	}

	_, _, err = runEvalCommand(t, ok(), "--cases", dir, "--min-accuracy", "0.5")
	require.NoError(t, err, "50% meets 0.5")
	_, _, err = runEvalCommand(t, ok(), "--cases", dir, "--min-accuracy", "0.9")
	require.EqualError(t, err, "verdict accuracy 50.0% is below --min-accuracy 90.0%")
	f = ok()
	f.results["tp"] = concluded("false_positive", "nothing")
	_, _, err = runEvalCommand(t, f, "--cases", dir, "--max-missed-intrusions", "0")
	require.EqualError(t, err, "1 missed intrusions, more than --max-missed-intrusions 0")

	f = ok()
	f.errs = map[string]error{"fp": errors.New("the investigation failed: planning failed: the plan names no tool the worker offers")}
	out, _, err = runEvalCommand(t, f, "--cases", dir, "--json", "--baseline=false")
	require.EqualError(t, err, "1 of 2 runs did not conclude (see the ERROR column)")
	var s scorecard
	require.NoError(t, json.Unmarshal([]byte(out), &s), "--json prints only JSON on stdout")
	require.Len(t, s.Cases, 2)
	assert.Equal(t, "fp", s.Cases[0].Name, "rows in case-file order")
	assert.Equal(t, "the investigation failed: planning failed: the plan names no tool the worker offers", s.Cases[0].Runs[0].Error)
	assert.Empty(t, s.Cases[0].Baseline)
	assert.Equal(t, 1, s.Totals.Concluded)
	assert.Nil(t, s.Baseline)

	f = &fakeEval{model: investigation.ModelEndpoint{Model: "m", BaseURL: "http://localhost:8089", Local: true}, block: true}
	out, log, err = runEvalCommand(t, f, "--cases", dir, "--timeout", "10ms", "--concurrency", "1", "--min-accuracy", "0")
	require.EqualError(t, err, "4 of 4 runs did not conclude (see the ERROR column)")
	assert.Equal(t, 2, strings.Count(out, "no conclusion within the timeout; baseline: no conclusion within the timeout"))
	assert.Equal(t, 2, strings.Count(out, "scores mean nothing"), "the stand-in warning above and below the report")
	assert.Contains(t, log, "scores mean nothing")
	assert.Contains(t, log, "eval: 2 cases, 4 runs (1 at a time), each case on an emptied store\n")

	f = ok()
	f.catalogErr = errors.New(`no worker answered on task queue "investigations" within 20s: is the worker running?`)
	_, _, err = runEvalCommand(t, f, "--cases", dir)
	require.EqualError(t, err, f.catalogErr.Error(), "without a worker no case can run")
	assert.Empty(t, f.ids)

	f = ok()
	f.model = investigation.ModelEndpoint{}
	out, _, err = runEvalCommand(t, f, "--cases", dir)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(out, "WARNING: the worker did not say which model it calls"), "an older worker: the scores may mean nothing")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--min-accuracy", "80"}, "--min-accuracy must be a fraction between 0 and 1 (0.8 for 80%), not 80"},
		{[]string{"--concurrency", "0"}, "--concurrency must be at least 1, not 0"},
		{[]string{"--timeout", "0s"}, "--timeout must be positive, not 0s"},
		{[]string{"--repeat", "0"}, "--repeat must be between 1 and 50, not 0"},
		{[]string{"--repeat", "51"}, "--repeat must be between 1 and 50, not 51"},
		{[]string{"--max-missed-intrusions", "-2"}, "--max-missed-intrusions must be 0 or more, not -2"},
		// -1 was the "not given" marker, and NaN failed no comparison: both
		// passed and switched the check off.
		{[]string{"--max-missed-intrusions", "-1"}, "--max-missed-intrusions must be 0 or more, not -1"},
		{[]string{"--min-accuracy", "-1"}, "--min-accuracy must be a fraction between 0 and 1 (0.8 for 80%), not -1"},
		{[]string{"--min-accuracy", "NaN"}, "--min-accuracy must be a fraction between 0 and 1 (0.8 for 80%), not NaN"},
		{[]string{"--min-accuracy", "-0.5"}, "--min-accuracy must be a fraction between 0 and 1 (0.8 for 80%), not -0.5"},
		{[]string{"--cases", filepath.Join(dir, "none")}, "cases " + filepath.Join(dir, "none") + ": no such file or directory"},
	} {
		f := ok()
		_, _, err := runEvalCommand(t, f, append([]string{"--cases", dir}, tc.args...)...)
		require.EqualError(t, err, tc.want)
		assert.Empty(t, f.ids, "nothing ran")
	}
}

// TestEvalIsolation: with --isolate each case is prepared on an emptied
// store, its runs (agent and baseline, every repeat) run before the next
// case is prepared, and its rows are removed after them; a case that
// cannot be prepared is a row with the error and the others still run.
// Without it, the store is prepared once for every case.
func TestEvalIsolation(t *testing.T) {
	dir := evalDir(t)
	f := &fakeEval{model: investigation.ModelEndpoint{Model: "m", Backend: "gemini-api", BaseURL: "https://x/"},
		results: map[string]investigation.Result{"tp": concluded("true_positive", "x"), "fp": concluded("false_positive", "x")}}
	out, _, err := runEvalCommand(t, f, "--cases", dir, "--repeat", "2", "--concurrency", "3")
	require.NoError(t, err)
	// fp sorts first.
	require.Len(t, f.log, 12)
	assert.Equal(t, "prepare fp fresh", f.log[0])
	assert.ElementsMatch(t, []string{"run fp", "run fp", "baseline fp", "baseline fp"}, f.log[1:5])
	assert.Equal(t, []string{"undo fp", "prepare tp fresh"}, f.log[5:7])
	assert.ElementsMatch(t, []string{"run tp", "run tp", "baseline tp", "baseline tp"}, f.log[7:11])
	assert.Equal(t, "undo tp", f.log[11])
	assert.Len(t, f.ids, 8)
	for _, id := range f.ids {
		assert.Regexp(t, `^eval-(tp|fp)(-baseline)?-r[12]-\d{8}-\d{6}\.\d{3}$`, id)
	}
	assert.Regexp(t, `(?m)^tp\s+true_positive\s+true_positive ×2\s+2/2\s+100\.0%\s`, out)

	f = &fakeEval{model: f.model, results: f.results, prepareErr: map[string]error{"fp": errors.New("case fp adds rows to logs.x, which the tables config does not list (it lists logs.y)")}}
	out, _, err = runEvalCommand(t, f, "--cases", dir, "--baseline=false")
	require.EqualError(t, err, "1 of 2 runs did not conclude (see the ERROR column)")
	assert.Regexp(t, `(?m)^fp\s.*could not prepare the case: case fp adds rows to logs\.x, which the tables config does not list \(it lists logs\.y\)$`, out)
	assert.Equal(t, []string{"prepare fp fresh", "undo fp", "prepare tp fresh", "run tp", "undo tp"}, f.log)

	f = &fakeEval{model: f.model, results: f.results}
	_, log, err := runEvalCommand(t, f, "--cases", dir, "--isolate=false", "--baseline=false")
	require.NoError(t, err)
	assert.Contains(t, log, "sharing one store")
	assert.Equal(t, "prepare fp,tp", f.log[0])
	assert.Equal(t, "undo fp,tp", f.log[len(f.log)-1])
}

// TestBaselineMustNotPlan: a worker that ignores the alert-only input
// (older than this starter) would pass off a full investigation as the
// baseline; the run is an error instead.
func TestBaselineMustNotPlan(t *testing.T) {
	dir := evalDir(t)
	f := &fakeEval{model: investigation.ModelEndpoint{Model: "m", Backend: "gemini-api", BaseURL: "https://x/"},
		results:  map[string]investigation.Result{"tp": concluded("true_positive", "x"), "fp": concluded("false_positive", "x")},
		baseline: map[string]investigation.Result{"tp": concluded("true_positive", "x"), "fp": concluded("false_positive", "x")}}
	out, _, err := runEvalCommand(t, f, "--cases", dir)
	require.EqualError(t, err, "2 of 4 runs did not conclude (see the ERROR column)")
	assert.Contains(t, out, "baseline: the worker planned and called tools in an alert-only baseline: it is older than this starter")
}

// `go tool task eval -- --cases mine.yaml` from another directory names
// that directory's file (EVAL_USER_CWD), not one under the repository root.
func TestEvalCasesFromTheUserDirectory(t *testing.T) {
	user := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(user, "mine.yaml"), []byte("x"), 0o644))
	got := fromUserDir([]string{"mine.yaml", defaultCases, "/abs/case.yaml"}, user)
	assert.Equal(t, []string{filepath.Join(user, "mine.yaml"), defaultCases, "/abs/case.yaml"}, got)
	assert.Equal(t, []string{"mine.yaml"}, fromUserDir([]string{"mine.yaml"}, ""))
}

// TestEvidenceInQuestionIsNotScored: the model is shown the case's question
// as well as the alert, so evidence the question gives away is listed as
// given, never scored: a conclusion that echoes the question finds nothing.
func TestEvidenceInQuestionIsNotScored(t *testing.T) {
	dir := t.TempDir()
	writeCase(t, dir, "alert.json", testAlert)
	p := writeCase(t, dir, "c.yaml", "alert: alert.json\nquestion: Did DEPLOY log in from ２０３.０.１１３.９９?\nexpected_verdict: true_positive\nwhy: w\nevidence: [deploy, 203.0.113.99, cron]\n")
	cs, err := loadCases([]string{p})
	require.NoError(t, err)
	c := cs[0]
	assert.Equal(t, []string{"deploy", "203.0.113.99"}, c.InAlert)
	assert.Equal(t, []string{"cron"}, c.novel())
	assert.Empty(t, citedEvidence(c.novel(), "You asked: did deploy log in from 203.0.113.99? Nothing settles it.", nil))
}

// TestEvalNeverWaitsForAPerson: nobody answers or approves during an eval,
// so a question is answered with "no answer" and an action (a call of an
// MCP tool that acts) expires at once instead of holding the run for the
// default 24 hours until --timeout fails it; the plan never waits either.
func TestEvalNeverWaitsForAPerson(t *testing.T) {
	c := evalCase{Name: "c", Alert: alerts.Alert{ID: "generic-0123456789ab"}, Question: "q"}
	for _, baseline := range []bool{false, true} {
		in := evalInput(c, baseline)
		l := in.Limits.WithDefaults()
		assert.LessOrEqual(t, l.ApprovalTimeout.Duration(), time.Second, "an action expires at once")
		assert.LessOrEqual(t, l.AnswerTimeout.Duration(), time.Second)
		assert.False(t, in.ApprovePlan)
		assert.Equal(t, baseline, in.ConcludeFromAlert)
	}
}

// TestEvalRecordsProposedActions: an action the agent asked for (it never
// runs: it expires) is in the scorecard with its outcome, in the JSON and
// in the table, its text made safe to print.
func TestEvalRecordsProposedActions(t *testing.T) {
	dir := evalDir(t)
	tp := concluded("true_positive", "198.51.100.23 logged in as deploy.")
	tp.Actions = []investigation.Action{{CallID: "k", Tool: "response.block_ip", Args: "{\"ip\":\"198.51.100.23\x1b[2J\"}", Status: investigation.ActionExpired}}
	f := &fakeEval{model: investigation.ModelEndpoint{Model: "m", Backend: "gemini-api", BaseURL: "https://x/"},
		results: map[string]investigation.Result{"tp": tp, "fp": concluded("false_positive", "x")}}
	out, _, err := runEvalCommand(t, f, "--cases", dir, "--baseline=false", "--json")
	require.NoError(t, err)
	var s scorecard
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Len(t, s.Cases[1].Runs[0].Actions, 1)
	assert.Equal(t, proposedAction{Tool: "response.block_ip", Args: `{"ip":"198.51.100.23"}`, Status: "expired"}, s.Cases[1].Runs[0].Actions[0])
	assert.Empty(t, s.Cases[0].Runs[0].Actions)
	assert.Equal(t, 1, s.Totals.RunsWithActions)

	out, _, err = runEvalCommand(t, f, "--cases", dir, "--baseline=false")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^tp\s.*\sresponse\.block_ip \(expired\)\s*$`, out)
	assert.Regexp(t, `(?m)^runs proposing actions\s+1 of 2$`, out)
	assert.NotContains(t, out, "\x1b")
}

// TestEvalRunsOnlyOnTheEvalsWorker: the worker, not only the starter, must
// keep its data in the eval's database. A starter given only
// --firestore-database investigator-eval reached the analyst's worker on
// its own database: the cases ran against the analyst's alerts and
// memories, and the report still said "each case on an emptied store".
// Nothing runs then, and the refusal never recommends --isolate=false.
func TestEvalRunsOnlyOnTheEvalsWorker(t *testing.T) {
	dir := evalDir(t)
	results := map[string]investigation.Result{"tp": concluded("true_positive", "x"), "fp": concluded("false_positive", "x")}
	m := investigation.ModelEndpoint{Model: "m", Backend: "gemini-api", BaseURL: "https://x/"}
	for _, tc := range []struct {
		name string
		f    *fakeEval
		args []string
		want string
	}{
		{"the analyst's worker", &fakeEval{store: &investigation.StoreEndpoint{Project: config.EmulatorProject, Database: "(default)", Emulator: true}}, nil,
			`the worker on task queue "investigations" keeps its data in Firestore database "(default)" of project "` + config.EmulatorProject + `", not in the eval's database "investigator-eval"`},
		{"another project", &fakeEval{store: &investigation.StoreEndpoint{Project: "prod", Database: "investigator-eval"}}, nil,
			`keeps its data in Firestore database "investigator-eval" of project "prod" (not on the emulator), not in the eval's database "investigator-eval" of project "` + config.EmulatorProject + `" on the Firestore emulator`},
		{"not the emulator", &fakeEval{store: &investigation.StoreEndpoint{Project: config.EmulatorProject, Database: "investigator-eval"}}, nil,
			`(not on the emulator), not in the eval's database "investigator-eval" of project "` + config.EmulatorProject + `" on the Firestore emulator`},
		{"an older worker", &fakeEval{oldWorker: true}, nil,
			`the worker on task queue "investigations" does not say which Firestore database it uses (it is older than this starter)`},
		{"shared, the analyst's worker", &fakeEval{store: &investigation.StoreEndpoint{Project: config.EmulatorProject, Database: "(default)", Emulator: true}},
			[]string{"--isolate=false"}, `keeps its data in Firestore database "(default)"`},
		{"shared, into the analyst's database", &fakeEval{}, []string{"--isolate=false", "--firestore-database", "(default)"},
			`--isolate=false writes the cases' alerts and made-up history into Firestore database "(default)", and the eval writes only into a database whose ID ends in "-eval"`},
		{"isolated, the analyst's database", &fakeEval{}, []string{"--firestore-database", "(default)"},
			`--isolate empties Firestore database "(default)" before each case, and it empties only a database whose ID ends in "-eval"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.model, tc.f.results = m, results
			_, _, err := runEvalCommand(t, tc.f, append([]string{"--cases", dir}, tc.args...)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "--isolate=false to", "the refusal does not recommend the unsafe path")
			assert.NotContains(t, err.Error(), "\n")
			assert.Empty(t, tc.f.ids, "nothing ran")
			assert.Empty(t, tc.f.log, "nothing was stored")
		})
	}

	// On the eval's worker, or forced into any database: the cases run.
	f := &fakeEval{model: m, results: results}
	_, log, err := runEvalCommand(t, f, "--cases", dir, "--baseline=false")
	require.NoError(t, err)
	assert.Contains(t, log, "each case on an emptied store")
	f = &fakeEval{model: m, results: results, store: &investigation.StoreEndpoint{Project: "p", Database: "(default)"}}
	_, log, err = runEvalCommand(t, f, "--cases", dir, "--baseline=false", "--isolate=false", "--firestore-database", "(default)", "--allow-any-database")
	require.NoError(t, err)
	assert.Contains(t, log, "sharing one store")
	assert.Contains(t, log, `WARNING: --allow-any-database: the cases' alerts and made-up history go into Firestore database "(default)"`)
	_, _, err = runEvalCommand(t, &fakeEval{model: m, results: results}, "--cases", dir, "--allow-any-database")
	require.EqualError(t, err, "--allow-any-database goes only with --isolate=false: --isolate empties only an eval's database")
}

// closingClient is a Temporal client whose run concludes never: it closes
// closeAfter after it is cancelled (never when negative).
type closingClient struct {
	closeAfter time.Duration
	mu         sync.Mutex
	cancelled  time.Time
	closed     bool
}

func (c *closingClient) Catalog(context.Context) (investigation.Catalog, error) {
	return investigation.Catalog{}, nil
}
func (c *closingClient) Start(context.Context, agentclient.Start, io.Writer) error { return nil }
func (c *closingClient) Cancel(context.Context, string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelled = time.Now()
	return nil
}
func (c *closingClient) Result(ctx context.Context, _ string) (investigation.Result, error) {
	c.mu.Lock()
	cancelled := c.cancelled
	c.mu.Unlock()
	if cancelled.IsZero() || c.closeAfter < 0 {
		<-ctx.Done()
		return investigation.Result{}, ctx.Err()
	}
	select {
	case <-time.After(time.Until(cancelled.Add(c.closeAfter))):
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		return investigation.Result{}, errors.New("workflow canceled")
	case <-ctx.Done():
		return investigation.Result{}, ctx.Err()
	}
}

// TestTimedOutRunClosesBeforeTheNextCase: after --timeout the run is
// cancelled, and the eval waits (bounded) for it to close before the store
// is emptied for the next case: a cancelled run writes until it closes.
func TestTimedOutRunClosesBeforeTheNextCase(t *testing.T) {
	c := &closingClient{closeAfter: 50 * time.Millisecond}
	te := &temporalEval{c: c, timeout: 10 * time.Millisecond, closeWait: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := te.investigate(ctx, evalCase{Name: "c"}, "eval-c", false)
	require.EqualError(t, err, "no conclusion within 10ms; investigation eval-c was cancelled")
	assert.True(t, c.closed, "investigate returned before the cancelled run closed")

	c = &closingClient{closeAfter: -1}
	te = &temporalEval{c: c, timeout: 10 * time.Millisecond, closeWait: 20 * time.Millisecond}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = te.investigate(ctx, evalCase{Name: "c"}, "eval-c", false)
	require.EqualError(t, err, "no conclusion within 10ms; investigation eval-c was cancelled but had not closed 20ms later, so it may still write into the next case's store")
}

// TestScorecardSaysWhatProducedIt: the JSON scorecard names the starter's
// build, the options, the worker's task queue, database and tools, so that
// two scorecards can be compared.
func TestScorecardSaysWhatProducedIt(t *testing.T) {
	dir := evalDir(t)
	f := &fakeEval{model: investigation.ModelEndpoint{Model: "gemini-2.5-pro", Backend: "gemini-api", BaseURL: "https://x/"},
		results: map[string]investigation.Result{"tp": concluded("true_positive", "x"), "fp": concluded("false_positive", "x")},
		tools:   []investigation.ToolStatus{{Name: "bigquery_agent", Enabled: true}, {Name: "query_otx", Reason: "no key"}, {Name: "response.block_ip", Enabled: true, Acts: true}}}
	out, _, err := runEvalCommand(t, f, "--cases", dir, "--json", "--repeat", "2", "--timeout", "3m", "--baseline=false")
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	assert.Equal(t, "gemini-2.5-pro", s["model"].(map[string]any)["model"])
	setup, ok := s["setup"].(map[string]any)
	require.True(t, ok, "no setup in %s", out)
	assert.NotEmpty(t, setup["starter_build"])
	assert.NotEmpty(t, setup["started_at"])
	assert.Equal(t, "investigations", setup["task_queue"])
	assert.Equal(t, "investigator-eval", setup["firestore_database"])
	assert.Equal(t, []any{"bigquery_agent", "response.block_ip (acts)"}, setup["tools"])
	assert.Equal(t, map[string]any{"cases": []any{dir}, "concurrency": 2.0, "repeat": 2.0, "timeout": "3m0s", "baseline": false, "isolate": true, "allow_any_database": false}, setup["options"])
}
