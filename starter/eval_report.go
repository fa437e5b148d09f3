package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/secops-agent/investigator/investigation"
)

// caseResult is one row of the scorecard.
type caseResult struct {
	Name         string   `json:"name"`
	Expected     string   `json:"expected_verdict"`
	Verdict      string   `json:"verdict,omitempty"`
	Confidence   string   `json:"confidence,omitempty"`
	Correct      bool     `json:"correct"`
	Evidence     []string `json:"evidence_expected"`
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
	// Error says, in one sentence, why the case did not conclude.
	Error string `json:"error,omitempty"`
}

// tokens is the case's prompt plus output tokens.
func (r caseResult) tokens() int { return r.PromptTokens + r.OutputTokens }

// totals sums a scorecard. Accuracy and recall count every case (one that
// did not conclude scores nothing); the means are over concluded cases.
type totals struct {
	Cases            int     `json:"cases"`
	Concluded        int     `json:"concluded"`
	Correct          int     `json:"correct"`
	Accuracy         float64 `json:"verdict_accuracy"`
	EvidenceExpected int     `json:"evidence_expected"`
	EvidenceCited    int     `json:"evidence_cited"`
	Recall           float64 `json:"evidence_recall"`
	MeanTokens       float64 `json:"mean_tokens"`
	MeanWallSecs     float64 `json:"mean_wall_seconds"`
}

// scorecard is what starter eval prints, as a table or as JSON.
type scorecard struct {
	Model *investigation.ModelEndpoint `json:"model,omitempty"`
	// Warning says why the scores mean nothing (a scripted stand-in), or
	// that the model could not be told.
	Warning string       `json:"warning,omitempty"`
	Cases   []caseResult `json:"cases"`
	Totals  totals       `json:"totals"`
}

// sum fills the totals from the rows.
func (s *scorecard) sum() {
	t := totals{Cases: len(s.Cases)}
	var tokens int
	var wall time.Duration
	for _, r := range s.Cases {
		t.EvidenceExpected += len(r.Evidence)
		t.EvidenceCited += len(r.Cited)
		if r.Correct {
			t.Correct++
		}
		if r.Error == "" {
			t.Concluded++
			tokens += r.tokens()
			wall += r.Wall
		}
	}
	t.Accuracy = ratio(t.Correct, t.Cases)
	t.Recall = ratio(t.EvidenceCited, t.EvidenceExpected)
	if t.Concluded > 0 {
		t.MeanTokens = float64(tokens) / float64(t.Concluded)
		t.MeanWallSecs = roundSecs(wall / time.Duration(t.Concluded))
	}
	s.Totals = t
}

func ratio(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

func roundSecs(d time.Duration) float64 { return d.Round(100 * time.Millisecond).Seconds() }

// standInWarning is printed above and below the table when the worker's
// model is a local server.
func standInWarning(m investigation.ModelEndpoint) string {
	return fmt.Sprintf("WARNING: the worker's model endpoint %s is a local server, such as the offline Gemini stand-in: "+
		"its answers are scripted, so these scores mean nothing about any model.", m.BaseURL)
}

// printScorecard writes the model line, the table and the totals.
func printScorecard(w io.Writer, s scorecard) error {
	if s.Model != nil {
		if line := modelLine(*s.Model); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	if s.Warning != "" {
		fmt.Fprintln(w, s.Warning)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tEXPECTED\tVERDICT\tEVIDENCE\tSTEPS\tTOOL CALLS\tMODEL CALLS\tTOKENS\tWALL\tERROR")
	for _, r := range s.Cases {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t-\t%d/%d\t-\t-\t-\t-\t%s\t%s\n", r.Name, r.Expected, len(r.Cited), len(r.Evidence), wallText(r.Wall), r.Error)
			continue
		}
		verdict := r.Verdict
		if verdict == "" {
			verdict = "(none)"
		}
		if !r.Correct {
			verdict += " ✗"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%d\t%d\t%d\t%s\t\n", r.Name, r.Expected, verdict, len(r.Cited), len(r.Evidence),
			r.Steps, r.ToolCalls, r.ModelCalls, r.tokens(), wallText(r.Wall))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	t := s.Totals
	fmt.Fprintf(w, "\nverdict accuracy:  %d/%d (%s)\n", t.Correct, t.Cases, percent(t.Accuracy))
	fmt.Fprintf(w, "evidence recall:   %d/%d (%s)\n", t.EvidenceCited, t.EvidenceExpected, percent(t.Recall))
	if t.Concluded > 0 {
		fmt.Fprintf(w, "mean tokens/case:  %.0f (over the %s that concluded)\n", t.MeanTokens, casesText(t.Concluded))
		fmt.Fprintf(w, "mean wall time:    %s\n", wallText(time.Duration(t.MeanWallSecs*float64(time.Second))))
	} else {
		fmt.Fprintln(w, "mean tokens/case:  n/a (no case concluded)")
	}
	if s.Warning != "" {
		fmt.Fprintln(w, s.Warning)
	}
	return nil
}

// casesText is "1 case" or "n cases".
func casesText(n int) string {
	if n == 1 {
		return "1 case"
	}
	return fmt.Sprintf("%d cases", n)
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
	for i := range s.Cases {
		s.Cases[i].WallSecs = roundSecs(s.Cases[i].Wall)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// outcomeError is the one sentence starter eval exits 1 with, or nil: when
// a case did not conclude, or accuracy is below minAccuracy (when >= 0).
func outcomeError(t totals, minAccuracy float64) error {
	var parts []string
	if failed := t.Cases - t.Concluded; failed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d cases did not conclude (see the ERROR column)", failed, t.Cases))
	}
	if minAccuracy >= 0 && t.Accuracy < minAccuracy {
		parts = append(parts, fmt.Sprintf("verdict accuracy %s is below --min-accuracy %s", percent(t.Accuracy), percent(minAccuracy)))
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(parts, ", and "))
}
