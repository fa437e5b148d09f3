package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
)

// runResult is one investigation of a case: a full run or a baseline run.
type runResult struct {
	Verdict    string `json:"verdict,omitempty"`
	Confidence string `json:"confidence,omitempty"`
	Correct    bool   `json:"correct"`
	// Cited are the expected evidence strings, of those neither the alert
	// nor the question holds, that the conclusion or the verdict's evidence
	// cites.
	Cited        []string `json:"evidence_cited"`
	Steps        int      `json:"steps"`
	ToolCalls    int      `json:"tool_calls"`
	ModelCalls   int      `json:"model_calls"`
	PromptTokens int      `json:"prompt_tokens"`
	OutputTokens int      `json:"output_tokens"` // thinking included
	// Wall is the time from the start of the workflow to its conclusion.
	Wall       time.Duration `json:"-"`
	WallSecs   float64       `json:"wall_seconds"`
	WorkflowID string        `json:"workflow_id,omitempty"`
	// Actions are the calls of acting tools the agent asked for: none runs
	// in an eval (each expires at once), but a team wants to know that the
	// agent proposed containment.
	Actions []proposedAction `json:"actions_proposed,omitempty"`
	// Error says, in one sentence, why the run did not conclude.
	Error string `json:"error,omitempty"`
}

// proposedAction is one call of an acting tool a run asked for, and what
// became of it (expired, unless someone decided it in the instant).
type proposedAction struct {
	Tool   string `json:"tool"`
	Args   string `json:"args"`
	Status string `json:"status"`
}

// tokens is the run's prompt plus output tokens.
func (r runResult) tokens() int { return r.PromptTokens + r.OutputTokens }

// failed is the confusion matrix's column for runs without a verdict.
const failed = "failed"

// got is the run's column in the confusion matrix.
func (r runResult) got() string {
	if r.Error != "" || r.Verdict == "" {
		return failed
	}
	return r.Verdict
}

// caseResult is one row of the scorecard: a case, its runs and, with
// --baseline, its baseline runs.
type caseResult struct {
	Name     string `json:"name"`
	Expected string `json:"expected_verdict"`
	// Evidence is the expected evidence that scores: what the alert does
	// not already hold. InAlert is the rest, listed but never scored.
	Evidence []string    `json:"evidence_expected"`
	InAlert  []string    `json:"evidence_in_alert"`
	Runs     []runResult `json:"runs"`
	Baseline []runResult `json:"baseline,omitempty"`
}

// tally sums one mode's runs (the agent's or the baseline's). Accuracy and
// recall count every run (one that did not conclude scores nothing); the
// means are over concluded runs.
type tally struct {
	Runs      int     `json:"runs"`
	Concluded int     `json:"concluded"`
	Correct   int     `json:"correct"`
	Accuracy  float64 `json:"verdict_accuracy"`
	// BalancedAccuracy is the mean of the per-class recalls, over the
	// verdicts some case expects: answering one verdict always scores
	// 1/classes, however the cases are spread.
	BalancedAccuracy float64      `json:"balanced_accuracy"`
	Classes          []classTally `json:"per_class"`
	// Confusion counts runs by expected verdict, then by the verdict given
	// (or "failed").
	Confusion map[string]map[string]int `json:"confusion"`
	// Intrusions are the runs whose case expects true_positive; a missed
	// one was judged benign or false_positive (undetermined is not a miss:
	// it sends the alert to a person).
	Intrusions       int     `json:"intrusions"`
	MissedIntrusions int     `json:"missed_intrusions"`
	EvidenceExpected int     `json:"evidence_expected"`
	EvidenceCited    int     `json:"evidence_cited"`
	Recall           float64 `json:"evidence_recall"`
	MeanTokens       float64 `json:"mean_tokens"`
	MeanWallSecs     float64 `json:"mean_wall_seconds"`
	// RunsWithActions counts the runs that asked for an action.
	RunsWithActions int `json:"runs_proposing_actions"`
}

// classTally is the recall of one expected verdict.
type classTally struct {
	Verdict string  `json:"verdict"`
	Runs    int     `json:"runs"`
	Correct int     `json:"correct"`
	Recall  float64 `json:"recall"`
}

// stats are the lowest, the median and the highest of some figures.
type stats struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// spread says how much a mode's scores move between the repeats: the
// figures of each pass over all cases (the first run of every case, then
// the second, ...), and how often a case got the same verdict every time.
type spread struct {
	Accuracy         stats `json:"verdict_accuracy"`
	BalancedAccuracy stats `json:"balanced_accuracy"`
	MissedIntrusions stats `json:"missed_intrusions"`
	Recall           stats `json:"evidence_recall"`
	// Unanimous counts the cases whose every run gave the same verdict
	// (or failed alike); MeanAgreement is the mean over cases of the share
	// of runs that gave the case's most frequent verdict.
	Unanimous     int     `json:"unanimous_cases"`
	MeanAgreement float64 `json:"mean_agreement"`
}

// scorecard is what starter eval prints, as a table or as JSON.
type scorecard struct {
	Model *investigation.ModelEndpoint `json:"model,omitempty"`
	// Setup says what else produced the scores, so that two scorecards
	// can be compared.
	Setup *evalSetup `json:"setup,omitempty"`
	// Warning says why the scores mean nothing (a scripted stand-in), or
	// that the model could not be told.
	Warning string `json:"warning,omitempty"`
	// Repeat is how many times each case ran; Isolated says each case
	// started from an empty store.
	Repeat   int          `json:"repeat"`
	Isolated bool         `json:"isolated"`
	Cases    []caseResult `json:"cases"`
	Totals   tally        `json:"totals"`
	Baseline *tally       `json:"baseline_totals,omitempty"`
	Spread   *spread      `json:"spread,omitempty"`
	// BaselineSpread is the baseline's spread, with --repeat and --baseline.
	BaselineSpread *spread `json:"baseline_spread,omitempty"`
}

// evalSetup is the starter's build, its options and the worker's queue,
// database and tools (the model is Model).
type evalSetup struct {
	StarterBuild string       `json:"starter_build"`
	StartedAt    time.Time    `json:"started_at"`
	TaskQueue    string       `json:"task_queue"`
	Database     string       `json:"firestore_database"`
	Options      setupOptions `json:"options"`
	// Tools are the worker's enabled tools, "(acts)" after those whose
	// calls need an approval (they expire in an eval); MCP its servers.
	Tools []string                  `json:"tools"`
	MCP   []investigation.MCPServer `json:"mcp,omitempty"`
}

// setupOptions are the options that change what the scores mean.
type setupOptions struct {
	Cases            []string `json:"cases"`
	Concurrency      int      `json:"concurrency"`
	Repeat           int      `json:"repeat"`
	Timeout          string   `json:"timeout"`
	Baseline         bool     `json:"baseline"`
	Isolate          bool     `json:"isolate"`
	AllowAnyDatabase bool     `json:"allow_any_database"`
}

// starterBuild names the commit the starter was built from (with
// "-modified" for uncommitted changes), or its module version.
func starterBuild() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, modified := "", false
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.modified":
			modified = st.Value == "true"
		}
	}
	if rev == "" {
		return cmp.Or(bi.Main.Version, "unknown")
	}
	if modified {
		rev += "-modified"
	}
	return rev
}

// agentRuns and baselineRuns pick a mode's runs of a case.
func agentRuns(c caseResult) []runResult    { return c.Runs }
func baselineRuns(c caseResult) []runResult { return c.Baseline }

// hasBaseline says the baseline ran.
func (s *scorecard) hasBaseline() bool {
	return slices.ContainsFunc(s.Cases, func(c caseResult) bool { return len(c.Baseline) > 0 })
}

// sum fills the totals and spreads from the rows.
func (s *scorecard) sum() {
	s.Repeat = max(s.Repeat, 1)
	s.Totals = tallyOf(s.Cases, agentRuns, -1)
	s.Baseline, s.Spread, s.BaselineSpread = nil, nil, nil
	if s.hasBaseline() {
		b := tallyOf(s.Cases, baselineRuns, -1)
		s.Baseline = &b
	}
	if s.Repeat > 1 {
		sp := spreadOf(s.Cases, agentRuns, s.Repeat)
		s.Spread = &sp
		if s.Baseline != nil {
			bsp := spreadOf(s.Cases, baselineRuns, s.Repeat)
			s.BaselineSpread = &bsp
		}
	}
}

// tallyOf sums the runs pick chooses of every case: all of them, or only
// run number only (from 0) when only >= 0.
func tallyOf(cases []caseResult, pick func(caseResult) []runResult, only int) tally {
	t := tally{Confusion: map[string]map[string]int{}}
	classes := map[string]*classTally{}
	var tokens int
	var wall time.Duration
	for _, c := range cases {
		for i, r := range pick(c) {
			if only >= 0 && i != only {
				continue
			}
			t.Runs++
			t.EvidenceExpected += len(c.Evidence)
			t.EvidenceCited += len(r.Cited)
			row := t.Confusion[c.Expected]
			if row == nil {
				row = map[string]int{}
				t.Confusion[c.Expected] = row
			}
			row[r.got()]++
			ct := classes[c.Expected]
			if ct == nil {
				ct = &classTally{Verdict: c.Expected}
				classes[c.Expected] = ct
			}
			ct.Runs++
			if r.Correct {
				t.Correct++
				ct.Correct++
			}
			if c.Expected == investigation.VerdictTruePositive {
				t.Intrusions++
				if r.Verdict == investigation.VerdictBenign || r.Verdict == investigation.VerdictFalsePositive {
					t.MissedIntrusions++
				}
			}
			if len(r.Actions) > 0 {
				t.RunsWithActions++
			}
			if r.Error == "" {
				t.Concluded++
				tokens += r.tokens()
				wall += r.Wall
			}
		}
	}
	t.Accuracy = ratio(t.Correct, t.Runs)
	t.Recall = ratio(t.EvidenceCited, t.EvidenceExpected)
	for _, v := range investigation.Verdicts {
		if ct := classes[v]; ct != nil {
			ct.Recall = ratio(ct.Correct, ct.Runs)
			t.Classes = append(t.Classes, *ct)
			t.BalancedAccuracy += ct.Recall
		}
	}
	if len(t.Classes) > 0 {
		t.BalancedAccuracy /= float64(len(t.Classes))
	}
	if t.Concluded > 0 {
		t.MeanTokens = float64(tokens) / float64(t.Concluded)
		t.MeanWallSecs = roundSecs(wall / time.Duration(t.Concluded))
	}
	return t
}

// spreadOf measures how a mode's scores move over repeat passes.
func spreadOf(cases []caseResult, pick func(caseResult) []runResult, repeat int) spread {
	var acc, bal, missed, recall []float64
	for i := range repeat {
		t := tallyOf(cases, pick, i)
		acc, bal, recall = append(acc, t.Accuracy), append(bal, t.BalancedAccuracy), append(recall, t.Recall)
		missed = append(missed, float64(t.MissedIntrusions))
	}
	sp := spread{Accuracy: statsOf(acc), BalancedAccuracy: statsOf(bal), MissedIntrusions: statsOf(missed), Recall: statsOf(recall)}
	n := 0
	for _, c := range cases {
		runs := pick(c)
		if len(runs) == 0 {
			continue
		}
		n++
		share := agreement(runs)
		if share == 1 {
			sp.Unanimous++
		}
		sp.MeanAgreement += share
	}
	if n > 0 {
		sp.MeanAgreement /= float64(n)
	}
	return sp
}

// agreement is the share of runs that gave the most frequent verdict.
func agreement(runs []runResult) float64 {
	counts := verdictCounts(runs)
	if len(counts) == 0 {
		return 0
	}
	return float64(counts[0].n) / float64(len(runs))
}

type verdictCount struct {
	verdict string
	n       int
}

// verdictCounts counts the runs by verdict (or "failed"), most frequent
// first, ties in the order of investigation.Verdicts.
func verdictCounts(runs []runResult) []verdictCount {
	order := append(slices.Clone(investigation.Verdicts), failed)
	var out []verdictCount
	for _, v := range order {
		n := 0
		for _, r := range runs {
			if r.got() == v {
				n++
			}
		}
		if n > 0 {
			out = append(out, verdictCount{v, n})
		}
	}
	slices.SortStableFunc(out, func(a, b verdictCount) int { return cmp.Compare(b.n, a.n) })
	return out
}

func statsOf(xs []float64) stats {
	if len(xs) == 0 {
		return stats{}
	}
	s := slices.Sorted(slices.Values(xs))
	mid := s[len(s)/2]
	if len(s)%2 == 0 {
		mid = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{Min: s[0], Median: mid, Max: s[len(s)-1]}
}

func ratio(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

func roundSecs(d time.Duration) float64 { return d.Round(100 * time.Millisecond).Seconds() }

// standInWarning is printed above and below the report when the worker's
// model is a local server.
func standInWarning(m investigation.ModelEndpoint) string {
	return fmt.Sprintf("WARNING: the worker's model endpoint %s is a local server, such as the offline Gemini stand-in: "+
		"its answers are scripted, so these scores mean nothing about any model.", m.BaseURL)
}

// baselineTitle names the baseline wherever it is printed.
const baselineTitle = "BASELINE (alert only, no tools)"

// printScorecard writes the model line, the table of cases, the confusion
// matrices, the totals side by side and, with repeats, the spread.
func printScorecard(w io.Writer, s scorecard) error {
	if s.Model != nil {
		if line := modelLine(*s.Model); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	if s.Setup != nil {
		fmt.Fprintf(w, "Setup: starter %s, task queue %s, Firestore database %s, tools: %s\n", s.Setup.StarterBuild,
			termtext.Line(s.Setup.TaskQueue), termtext.Line(s.Setup.Database), strings.Join(s.Setup.Tools, ", "))
	}
	if s.Warning != "" {
		fmt.Fprintln(w, s.Warning)
	}
	baseline := s.Baseline != nil
	fmt.Fprintln(w)
	if err := printCases(w, s, baseline); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := printConfusion(w, "agent", s.Totals); err != nil {
		return err
	}
	if baseline {
		fmt.Fprintln(w)
		if err := printConfusion(w, "baseline", *s.Baseline); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if err := printTotals(w, s); err != nil {
		return err
	}
	if s.Spread != nil {
		fmt.Fprintln(w)
		if err := printSpread(w, s); err != nil {
			return err
		}
	}
	if s.Warning != "" {
		fmt.Fprintln(w, s.Warning)
	}
	return nil
}

// printCases writes one row per case. With repeats, VERDICT counts the
// verdicts of the runs, RIGHT the runs that got the expected one and AGREE
// the share that gave the most frequent one; the figures are means over
// the runs that concluded.
func printCases(w io.Writer, s scorecard, baseline bool) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	head := []string{"CASE", "EXPECTED", "VERDICT"}
	if s.Repeat > 1 {
		head = append(head, "RIGHT", "AGREE")
	}
	head = append(head, "EVIDENCE")
	if baseline {
		head = append(head, "BASELINE")
	}
	head = append(head, "STEPS", "TOOL CALLS", "MODEL CALLS", "TOKENS", "WALL", "ACTIONS PROPOSED", "ERROR")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, c := range s.Cases {
		row := []string{c.Name, c.Expected, verdictText(c.Runs)}
		if s.Repeat > 1 {
			right := 0
			for _, r := range c.Runs {
				if r.Correct {
					right++
				}
			}
			row = append(row, fmt.Sprintf("%d/%d", right, len(c.Runs)), percent(agreement(c.Runs)))
		}
		row = append(row, evidenceText(c))
		if baseline {
			row = append(row, verdictText(c.Baseline))
		}
		row = append(row, meanCells(c.Runs)...)
		row = append(row, actionsText(c.Runs), errorText(c))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// verdictText is the verdict of one run, or the verdicts of several with
// their counts; ✗ marks runs that missed.
func verdictText(runs []runResult) string {
	if len(runs) == 0 {
		return "-"
	}
	var parts []string
	for _, vc := range verdictCounts(runs) {
		v := vc.verdict
		if v == failed && len(runs) == 1 {
			v = "-"
		}
		if vc.n > 1 || len(runs) > 1 {
			v += fmt.Sprintf(" ×%d", vc.n)
		}
		parts = append(parts, v)
	}
	text := strings.Join(parts, ", ")
	if slices.ContainsFunc(runs, func(r runResult) bool { return !r.Correct && r.Error == "" }) {
		text += " ✗"
	}
	return text
}

// evidenceText is cited/expected: for one run the count, for several the
// mean; "-" when the alert or question already holds every expected string.
func evidenceText(c caseResult) string {
	if len(c.Evidence) == 0 {
		return "-"
	}
	cited := 0
	for _, r := range c.Runs {
		cited += len(r.Cited)
	}
	if len(c.Runs) == 1 {
		return fmt.Sprintf("%d/%d", cited, len(c.Evidence))
	}
	return fmt.Sprintf("%.1f/%d", float64(cited)/float64(max(len(c.Runs), 1)), len(c.Evidence))
}

// meanCells are steps, tool calls, model calls, tokens and wall time, the
// means over the runs that concluded ("-" when none did, but the wall time
// of a failed run is still shown).
func meanCells(runs []runResult) []string {
	var steps, calls, model, tokens, n int
	var wall, failedWall time.Duration
	for _, r := range runs {
		if r.Error != "" {
			failedWall += r.Wall
			continue
		}
		n++
		steps, calls, model, tokens, wall = steps+r.Steps, calls+r.ToolCalls, model+r.ModelCalls, tokens+r.tokens(), wall+r.Wall
	}
	if n == 0 {
		if len(runs) == 0 {
			return []string{"-", "-", "-", "-", "-"}
		}
		return []string{"-", "-", "-", "-", wallText(failedWall / time.Duration(len(runs)))}
	}
	mean := func(x int) string { return fmt.Sprint(int(math.Round(float64(x) / float64(n)))) }
	return []string{mean(steps), mean(calls), mean(model), mean(tokens), wallText(wall / time.Duration(n))}
}

// actionsText names the actions the runs asked for, each tool with its
// outcomes and how many times ("-" for none).
func actionsText(runs []runResult) string {
	counts := map[string]int{}
	var order []string
	for _, r := range runs {
		for _, a := range r.Actions {
			k := a.Tool + " (" + a.Status + ")"
			if counts[k] == 0 {
				order = append(order, k)
			}
			counts[k]++
		}
	}
	if len(order) == 0 {
		return "-"
	}
	for i, k := range order {
		if counts[k] > 1 {
			order[i] += fmt.Sprintf(" ×%d", counts[k])
		}
	}
	return strings.Join(order, ", ")
}

// errorText is the first error of the case's runs, with how many failed.
func errorText(c caseResult) string {
	var parts []string
	for _, mode := range []struct {
		name string
		runs []runResult
	}{{"", c.Runs}, {"baseline: ", c.Baseline}} {
		n, first := 0, ""
		for _, r := range mode.runs {
			if r.Error != "" {
				if n == 0 {
					first = r.Error
				}
				n++
			}
		}
		switch {
		case n == 0:
		case len(mode.runs) == 1:
			parts = append(parts, mode.name+first)
		default:
			parts = append(parts, fmt.Sprintf("%s%d of %d runs failed, first: %s", mode.name, n, len(mode.runs), first))
		}
	}
	return strings.Join(parts, "; ")
}

// printConfusion writes a mode's confusion matrix with each expected
// verdict's recall.
func printConfusion(w io.Writer, mode string, t tally) error {
	fmt.Fprintf(w, "confusion matrix, %s (rows: expected verdict; columns: the verdict given, in runs):\n", mode)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	cols := append(slices.Clone(investigation.Verdicts), failed)
	fmt.Fprintln(tw, "EXPECTED\t"+strings.Join(cols, "\t")+"\tRECALL")
	for _, ct := range t.Classes {
		row := []string{ct.Verdict}
		for _, got := range cols {
			row = append(row, fmt.Sprint(t.Confusion[ct.Verdict][got]))
		}
		row = append(row, fmt.Sprintf("%d/%d (%s)", ct.Correct, ct.Runs, percent(ct.Recall)))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// printTotals writes the agent's totals and, with --baseline, the
// baseline's beside them.
func printTotals(w io.Writer, s scorecard) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	modes := []tally{s.Totals}
	head := "\tAGENT"
	if s.Baseline != nil {
		modes = append(modes, *s.Baseline)
		head += "\t" + baselineTitle
	}
	fmt.Fprintln(tw, head)
	line := func(label string, cell func(t tally) string) {
		row := []string{label}
		for _, t := range modes {
			row = append(row, cell(t))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	line("verdict accuracy", func(t tally) string { return fmt.Sprintf("%d/%d (%s)", t.Correct, t.Runs, percent(t.Accuracy)) })
	line("balanced accuracy", func(t tally) string { return percent(t.BalancedAccuracy) + " (mean per-class recall)" })
	line("missed intrusions", func(t tally) string { return fmt.Sprintf("%d of %d", t.MissedIntrusions, t.Intrusions) })
	line("evidence recall", func(t tally) string {
		return fmt.Sprintf("%d/%d (%s)", t.EvidenceCited, t.EvidenceExpected, percent(t.Recall))
	})
	line("runs proposing actions", func(t tally) string { return fmt.Sprintf("%d of %d", t.RunsWithActions, t.Runs) })
	line("mean tokens/run", func(t tally) string {
		if t.Concluded == 0 {
			return "n/a (no run concluded)"
		}
		return fmt.Sprintf("%.0f (over the %s that concluded)", t.MeanTokens, runsText(t.Concluded))
	})
	line("mean wall time", func(t tally) string {
		if t.Concluded == 0 {
			return "n/a"
		}
		return wallText(time.Duration(t.MeanWallSecs * float64(time.Second)))
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(a missed intrusion is a true_positive judged benign or false_positive; evidence recall counts only expected evidence neither the alert nor the question already holds)")
	return nil
}

// printSpread writes min / median / max of each pass over the cases.
func printSpread(w io.Writer, s scorecard) error {
	fmt.Fprintf(w, "spread over %d runs of each case (min / median / max over the %d passes):\n", s.Repeat, s.Repeat)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	modes := []spread{*s.Spread}
	head := "\tAGENT"
	if s.BaselineSpread != nil {
		modes = append(modes, *s.BaselineSpread)
		head += "\t" + baselineTitle
	}
	fmt.Fprintln(tw, head)
	line := func(label string, cell func(sp spread) string) {
		row := []string{label}
		for _, sp := range modes {
			row = append(row, cell(sp))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	pct := func(st stats) string {
		return percent(st.Min) + " / " + percent(st.Median) + " / " + percent(st.Max)
	}
	line("verdict accuracy", func(sp spread) string { return pct(sp.Accuracy) })
	line("balanced accuracy", func(sp spread) string { return pct(sp.BalancedAccuracy) })
	line("missed intrusions", func(sp spread) string {
		return fmt.Sprintf("%g / %g / %g", sp.MissedIntrusions.Min, sp.MissedIntrusions.Median, sp.MissedIntrusions.Max)
	})
	line("evidence recall", func(sp spread) string { return pct(sp.Recall) })
	line("verdict agreement", func(sp spread) string {
		return fmt.Sprintf("%d of %d cases unanimous; mean %s", sp.Unanimous, len(s.Cases), percent(sp.MeanAgreement))
	})
	return tw.Flush()
}

// casesText is "1 case" or "n cases".
func casesText(n int) string {
	if n == 1 {
		return "1 case"
	}
	return fmt.Sprintf("%d cases", n)
}

// runsText is "1 run" or "n runs".
func runsText(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

func percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func wallText(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(100 * time.Millisecond).String()
}

// printScorecardJSON writes the scorecard as one indented JSON document.
func printScorecardJSON(w io.Writer, s scorecard) error {
	s.Cases = slices.Clone(s.Cases)
	for i, c := range s.Cases {
		c.Runs, c.Baseline = withWallSecs(c.Runs), withWallSecs(c.Baseline)
		s.Cases[i] = c
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

func withWallSecs(runs []runResult) []runResult {
	if runs == nil {
		return nil
	}
	out := slices.Clone(runs)
	for i := range out {
		out[i].WallSecs = roundSecs(out[i].Wall)
	}
	return out
}

// outcomeError is the one sentence starter eval exits 1 with, or nil: when
// a run did not conclude, the agent's accuracy is below --min-accuracy or
// it missed more intrusions than --max-missed-intrusions (each when given).
func outcomeError(s scorecard, o evalOptions) error {
	var parts []string
	runs, concluded := s.Totals.Runs, s.Totals.Concluded
	if s.Baseline != nil {
		runs, concluded = runs+s.Baseline.Runs, concluded+s.Baseline.Concluded
	}
	if failed := runs - concluded; failed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d runs did not conclude (see the ERROR column)", failed, runs))
	}
	if o.hasMinAccuracy && s.Totals.Accuracy < o.minAccuracy {
		parts = append(parts, fmt.Sprintf("verdict accuracy %s is below --min-accuracy %s", percent(s.Totals.Accuracy), percent(o.minAccuracy)))
	}
	if o.hasMaxMissed && s.Totals.MissedIntrusions > o.maxMissed {
		parts = append(parts, fmt.Sprintf("%d missed intrusions, more than --max-missed-intrusions %d", s.Totals.MissedIntrusions, o.maxMissed))
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(parts, ", and "))
}
