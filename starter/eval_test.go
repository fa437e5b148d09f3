package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

var alertIDShape = regexp.MustCompile(`^(guardduty|scc|edr|generic)-[0-9a-f]{12}$`)

// TestExampleCases: the project's cases load, cover the sources and the
// verdicts the scorecard is meant to measure, and every past-alert ID they
// expect as evidence is the ID of an alert the case imports (IDs are
// content-addressed, so an edited history file would break it).
func TestExampleCases(t *testing.T) {
	cases, err := loadCases([]string{"../" + defaultCases})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(cases), 10)
	sources, verdicts := map[string]int{}, map[string]int{}
	for _, c := range cases {
		sources[c.Alert.Source]++
		verdicts[c.Expected]++
		ids := []string{c.Alert.ID}
		for _, h := range c.History {
			ids = append(ids, h.ID)
		}
		for _, e := range c.Evidence {
			if alertIDShape.MatchString(e) {
				assert.Contains(t, ids, e, "case %s expects alert %s as evidence but does not import it", c.Name, e)
			}
		}
	}
	for _, s := range []string{alerts.SourceGuardDuty, alerts.SourceSCC, alerts.SourceEDR, alerts.SourceGeneric} {
		assert.NotZero(t, sources[s], "no case with a %s alert", s)
	}
	for _, v := range []string{investigation.VerdictTruePositive, investigation.VerdictBenign, investigation.VerdictFalsePositive} {
		assert.NotZero(t, verdicts[v], "no case expects %s", v)
	}
}

// writeCase writes a case file (and an alert next to it) in a temp dir.
func writeCase(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

const testAlert = `{"rule_name": "test rule", "title": "a test alert", "severity": "low", "client_ip": "192.0.2.1"}`

// TestLoadCaseErrors: a bad case file gives one sentence naming the file
// and the problem, before anything runs.
func TestLoadCaseErrors(t *testing.T) {
	dir := t.TempDir()
	writeCase(t, dir, "alert.json", testAlert)
	writeCase(t, dir, "array.json", `[1, 2]`)
	good := "alert: alert.json\nexpected_verdict: benign\nevidence: [192.0.2.1]\n"
	for _, tc := range []struct{ name, body, want string }{
		{"empty", "  \n", "the file is empty"},
		{"syntax", "name: [unclosed\n", "not valid YAML or JSON: line 1: did not find expected ',' or ']'"},
		{"unknown field", good + "verdict: benign\n", `line 4: unknown field "verdict" (a case has name, alert, question, expected_verdict, evidence, history, why)`},
		{"no verdict", "alert: alert.json\nevidence: [x]\n", "expected_verdict is missing: give one of true_positive, benign, false_positive, undetermined"},
		{"bad verdict", "alert: alert.json\nexpected_verdict: malicious\nevidence: [x]\n", `expected_verdict "malicious" is not one of true_positive, benign, false_positive, undetermined`},
		{"no evidence", "alert: alert.json\nexpected_verdict: benign\n", "no evidence listed"},
		{"blank evidence", "alert: alert.json\nexpected_verdict: benign\nevidence: [x, '  ']\n", "evidence item 2 is empty"},
		{"no alert", "expected_verdict: benign\nevidence: [x]\n", "no alert: give the path of the alert JSON, relative to the case file"},
		{"missing alert", "alert: nope.json\nexpected_verdict: benign\nevidence: [x]\n", `cannot read alert file "` + filepath.Join(dir, "nope.json") + `": no such file or directory`},
		{"alert not an object", "alert: array.json\nexpected_verdict: benign\nevidence: [x]\n", "alert array.json: the alert must be a JSON object, got an array"},
		{"bad history", good + "history: [array.json]\n", "history: alert array.json: the alert must be a JSON object"},
		{"wrong type", "alert: alert.json\nexpected_verdict: benign\nevidence: {a: b}\n", "line 3: cannot unmarshal !!map into []string"},
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
		b := writeCase(t, d, "b.json", `{"name": "SAME", "alert": "alert.json", "expected_verdict": "benign", "evidence": ["x"]}`)
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
		p := writeCase(t, d, "my-case.yml", "alert: alert.json\nexpected_verdict: benign\nevidence: [192.0.2.1, ' 192.0.2.1 ', Alice]\nquestion: ' why? '\n")
		cases, err := loadCases([]string{p})
		require.NoError(t, err)
		require.Len(t, cases, 1)
		c := cases[0]
		assert.Equal(t, "my-case", c.Name, "the name defaults to the file's")
		assert.Equal(t, "why?", c.Question)
		assert.Equal(t, []string{"192.0.2.1", "Alice"}, c.Evidence, "trimmed, duplicates dropped")
		assert.Equal(t, alerts.SourceGeneric, c.Alert.Source)
		assert.Regexp(t, alertIDShape, c.Alert.ID)
	})
}

// TestCitedEvidence: expected strings count when the conclusion or a
// verdict evidence fact holds them, in any case.
func TestCitedEvidence(t *testing.T) {
	v := &investigation.Verdict{Verdict: "true_positive", Evidence: []investigation.Evidence{
		{StepID: "step_2", Tool: "bigquery_agent", Fact: "Accepted password for DEPLOY from 198.51.100.23"},
	}}
	expected := []string{"198.51.100.23", "deploy", "Kdevtmpfsi", "guardduty-8db0f55e83fd", "203.0.113.50"}
	got := citedEvidence(expected, "The miner /tmp/kdevtmpfsi runs; see GuardDuty-8DB0F55E83FD.", v)
	assert.Equal(t, []string{"198.51.100.23", "deploy", "Kdevtmpfsi", "guardduty-8db0f55e83fd"}, got)
	assert.Empty(t, citedEvidence(expected, "", nil))
	assert.NotNil(t, citedEvidence(expected, "", nil), "an empty list, not null, in JSON")
}

// testScorecard has a correct row, a wrong one and one that failed.
func testScorecard() scorecard {
	m := investigation.ModelEndpoint{Model: "gemini-2.5-flash", Backend: "gemini-api", BaseURL: "http://127.0.0.1:8089", Local: true}
	s := scorecard{Model: &m, Warning: standInWarning(m), Cases: []caseResult{
		{Name: "tp-case", Expected: "true_positive", Verdict: "true_positive", Confidence: "high", Correct: true,
			Evidence: []string{"a", "b", "c"}, Cited: []string{"a", "c"}, Steps: 3, ToolCalls: 4, ModelCalls: 11,
			PromptTokens: 12000, OutputTokens: 345, Wall: 4230 * time.Millisecond},
		{Name: "benign-case-long-name", Expected: "benign", Verdict: "undetermined", Confidence: "low",
			Evidence: []string{"x"}, Cited: []string{}, Steps: 2, ToolCalls: 1, ModelCalls: 7,
			PromptTokens: 8000, OutputTokens: 655, Wall: 72*time.Second + 440*time.Millisecond},
		{Name: "fp-case", Expected: "false_positive", Evidence: []string{"y", "z"}, Cited: []string{}, Wall: 900 * time.Millisecond,
			Error: "the investigation failed: planning failed: Gemini rejected the request (HTTP 400)"},
	}}
	s.sum()
	return s
}

const scorecardGolden = `Model: gemini-2.5-flash (gemini-api, http://127.0.0.1:8089) — a local server, such as the offline Gemini stand-in: its answers are scripted
WARNING: the worker's model endpoint http://127.0.0.1:8089 is a local server, such as the offline Gemini stand-in: its answers are scripted, so these scores mean nothing about any model.

CASE                   EXPECTED        VERDICT         EVIDENCE  STEPS  TOOL CALLS  MODEL CALLS  TOKENS  WALL     ERROR
tp-case                true_positive   true_positive   2/3       3      4           11           12345   4.2s     
benign-case-long-name  benign          undetermined ✗  0/1       2      1           7            8655    1m12.4s  
fp-case                false_positive  -               0/2       -      -           -            -       900ms    the investigation failed: planning failed: Gemini rejected the request (HTTP 400)

verdict accuracy:  1/3 (33.3%)
evidence recall:   2/6 (33.3%)
mean tokens/case:  10500 (over the 2 cases that concluded)
mean wall time:    38.3s
WARNING: the worker's model endpoint http://127.0.0.1:8089 is a local server, such as the offline Gemini stand-in: its answers are scripted, so these scores mean nothing about any model.
`

// TestScorecardRendering: the table, the totals (accuracy and recall over
// every case, means over the concluded ones) and the stand-in warning
// above and below, as text and as JSON.
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
	assert.Equal(t, map[string]any{"cases": 3.0, "concluded": 2.0, "correct": 1.0, "verdict_accuracy": 1.0 / 3, "evidence_expected": 6.0,
		"evidence_cited": 2.0, "evidence_recall": 2.0 / 6, "mean_tokens": 10500.0, "mean_wall_seconds": 38.3}, totals)
	rows := got["cases"].([]any)
	require.Len(t, rows, 3)
	assert.Equal(t, 72.4, rows[1].(map[string]any)["wall_seconds"])
	assert.Equal(t, "the investigation failed: planning failed: Gemini rejected the request (HTTP 400)", rows[2].(map[string]any)["error"])
	assert.Equal(t, true, got["model"].(map[string]any)["local"])
	assert.Contains(t, got["warning"], "scores mean nothing")

	// A real model: no warning; no case concluded: no means.
	s = scorecard{Model: &investigation.ModelEndpoint{Model: "gemini-2.5-pro", Backend: "vertex-ai", BaseURL: "https://us-central1-aiplatform.googleapis.com/"},
		Cases: []caseResult{{Name: "c", Expected: "benign", Evidence: []string{"x"}, Cited: []string{}, Error: "no conclusion within 1m0s; investigation eval-c-1 was cancelled"}}}
	s.sum()
	out.Reset()
	require.NoError(t, printScorecard(&out, s))
	assert.NotContains(t, out.String(), "WARNING")
	assert.Contains(t, out.String(), "Model: gemini-2.5-pro (vertex-ai, https://us-central1-aiplatform.googleapis.com/)\n")
	assert.Contains(t, out.String(), "mean tokens/case:  n/a (no case concluded)\n")
}

// fakeEval answers cases from a script keyed by alert title.
type fakeEval struct {
	mu         sync.Mutex
	catalogErr error
	model      investigation.ModelEndpoint
	results    map[string]investigation.Result
	errs       map[string]error
	ids        []string
	block      bool // wait for the context instead of answering
}

func (f *fakeEval) catalog(context.Context) (investigation.Catalog, error) {
	return investigation.Catalog{Model: f.model}, f.catalogErr
}

func (f *fakeEval) investigate(ctx context.Context, c evalCase, id string) (investigation.Result, error) {
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return investigation.Result{}, errors.New("no conclusion within the timeout")
	}
	if err := f.errs[c.Name]; err != nil {
		return investigation.Result{}, err
	}
	return f.results[c.Name], nil
}

// evalDir writes two cases: tp (expects true_positive) and fp.
func evalDir(t *testing.T) string {
	d := t.TempDir()
	writeCase(t, d, "alert.json", testAlert)
	writeCase(t, d, "tp.yaml", "alert: alert.json\nexpected_verdict: true_positive\nevidence: [192.0.2.1, alice]\n")
	writeCase(t, d, "fp.yaml", "alert: alert.json\nexpected_verdict: false_positive\nevidence: [cron]\n")
	return d
}

func concluded(verdict, md string) investigation.Result {
	p := plan.Plan{Steps: []plan.Step{{ID: "step_1", Status: plan.Done}, {ID: "step_2", Status: plan.Done}, {ID: "step_3", Status: plan.Cancelled}}}
	return investigation.Result{Conclusion: md, Verdict: &investigation.Verdict{Verdict: verdict, Confidence: "medium"}, Plan: p,
		Spend: investigation.Spend{ToolCalls: 3, Usage: investigation.Usage{Calls: 8, PromptTokens: 1000, OutputTokens: 150, ThoughtTokens: 50}}}
}

// runEvalCommand runs `starter eval args...` against f.
func runEvalCommand(t *testing.T, f *fakeEval, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	old := newEvalBackend
	t.Cleanup(func() { newEvalBackend = old })
	newEvalBackend = func(*app, *cobra.Command, evalOptions) (evalBackend, func(), error) { return f, func() {}, nil }
	var out, errOut bytes.Buffer
	root := newRootApp(testApp(), &out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"eval"}, args...))
	err = root.ExecuteContext(testCtx(t))
	return out.String(), errOut.String(), err
}

// TestEvalExitCodes: 0 (no error) when every case concluded, whatever the
// verdicts; 1 with one sentence when a case did not conclude (its row holds
// the error) or --min-accuracy is not met; bad options stop before any case
// runs.
func TestEvalExitCodes(t *testing.T) {
	dir := evalDir(t)
	ok := func() *fakeEval {
		return &fakeEval{model: investigation.ModelEndpoint{Model: "gemini-2.5-flash", Backend: "gemini-api", BaseURL: "https://generativelanguage.googleapis.com/"},
			results: map[string]investigation.Result{
				"tp": concluded("true_positive", "198.51.100.23 logged in as Alice."),
				"fp": concluded("true_positive", "A reverse shell."),
			}}
	}

	f := ok()
	out, log, err := runEvalCommand(t, f, "--cases", dir)
	require.NoError(t, err, "every case concluded: exit 0 even with a wrong verdict")
	// Thinking counts as output, as in the starter's totals line: 1000 + 150 + 50.
	assert.Regexp(t, `(?m)^fp\s+false_positive\s+true_positive ✗\s+0/1\s+2\s+3\s+8\s+1200\s`, out)
	assert.Regexp(t, `(?m)^tp\s+true_positive\s+true_positive\s+1/2\s+2\s+3\s+8\s+1200\s`, out)
	assert.Contains(t, out, "verdict accuracy:  1/2 (50.0%)\n")
	assert.Contains(t, out, "evidence recall:   1/3 (33.3%)\n")
	assert.NotContains(t, out, "WARNING")
	assert.Contains(t, log, "eval: 2 cases, 2 at a time\n")
	require.Len(t, f.ids, 2)
	for _, id := range f.ids {
		assert.Regexp(t, `^eval-(tp|fp)-\d{8}-\d{6}\.\d{3}$`, id)
	}

	_, _, err = runEvalCommand(t, ok(), "--cases", dir, "--min-accuracy", "0.5")
	require.NoError(t, err, "50% meets 0.5")
	_, _, err = runEvalCommand(t, ok(), "--cases", dir, "--min-accuracy", "0.9")
	require.EqualError(t, err, "verdict accuracy 50.0% is below --min-accuracy 90.0%")

	f = ok()
	f.errs = map[string]error{"fp": errors.New("the investigation failed: planning failed: the plan names no tool the worker offers")}
	out, _, err = runEvalCommand(t, f, "--cases", dir, "--json")
	require.EqualError(t, err, "1 of 2 cases did not conclude (see the ERROR column)")
	var s scorecard
	require.NoError(t, json.Unmarshal([]byte(out), &s), "--json prints only JSON on stdout")
	require.Len(t, s.Cases, 2)
	assert.Equal(t, "fp", s.Cases[0].Name, "rows in case-file order")
	assert.Equal(t, "the investigation failed: planning failed: the plan names no tool the worker offers", s.Cases[0].Error)
	assert.Equal(t, 1, s.Totals.Concluded)

	f = &fakeEval{model: investigation.ModelEndpoint{Model: "m", BaseURL: "http://localhost:8089", Local: true}, block: true}
	out, log, err = runEvalCommand(t, f, "--cases", dir, "--timeout", "10ms", "--concurrency", "1", "--min-accuracy", "0")
	require.EqualError(t, err, "2 of 2 cases did not conclude (see the ERROR column)")
	assert.Equal(t, 2, strings.Count(out, "no conclusion within the timeout"))
	assert.Equal(t, 2, strings.Count(out, "scores mean nothing"), "the stand-in warning above and below the table")
	assert.Contains(t, log, "scores mean nothing")
	assert.Contains(t, log, "eval: 2 cases, 1 at a time\n")

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
		{[]string{"--cases", filepath.Join(dir, "none")}, "cases " + filepath.Join(dir, "none") + ": no such file or directory"},
	} {
		f := ok()
		_, _, err := runEvalCommand(t, f, append([]string{"--cases", dir}, tc.args...)...)
		require.EqualError(t, err, tc.want)
		assert.Empty(t, f.ids, "nothing ran")
	}
}
