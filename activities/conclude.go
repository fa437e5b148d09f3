package activities

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
)

// Conclude writes the Markdown conclusion and the verdict from the objective,
// the steps with their status and results, and the insights (not the
// conversation).
func (a *Activities) Conclude(ctx context.Context, in ConcludeInput) (Conclusion, error) {
	al, err := a.loadAlert(ctx, in.AlertID)
	if err != nil {
		return Conclusion{}, err
	}
	alert, err := alertSection(al)
	if err != nil {
		return Conclusion{}, err
	}
	results, err := a.stepResults(ctx, in.Session, in.Steps)
	if err != nil {
		return Conclusion{}, err
	}
	steps := make([]stepView, len(in.Steps))
	for i, s := range in.Steps {
		steps[i] = stepView{Step: s, Result: clip.String(results[i], maxResultInPrompt)}
	}
	p, err := renderPhase("conclude", map[string]any{
		"Request":         in.Request,
		"Objective":       in.Objective,
		"Alert":           alert,
		"Steps":           steps,
		"Insights":        insightsText(in.Insights),
		"EarlierInsights": insightsText(in.Earlier),
		"Language":        languageName(in.Language),
		"EndedEarly":      in.EndedEarly,
		"Hints":           in.Hints,
		"Example":         concludeExample,
	})
	if err != nil {
		return Conclusion{}, err
	}
	var raw struct {
		Report     string                   `json:"report"`
		Evidence   []investigation.Evidence `json:"evidence"`
		Verdict    string                   `json:"verdict"`
		Confidence string                   `json:"confidence"`
	}
	var out Conclusion
	out.Usage, err = a.Model.GenerateJSON(ctx, "conclusion", p.system, p.user, concludeSchema, &raw, func() error {
		switch {
		case strings.TrimSpace(raw.Report) == "":
			return fmt.Errorf("the report is empty")
		case !slices.Contains(investigation.Verdicts, raw.Verdict):
			return fmt.Errorf("verdict must be one of %s, not %q", strings.Join(investigation.Verdicts, ", "), raw.Verdict)
		case !slices.Contains(investigation.Confidences, raw.Confidence):
			return fmt.Errorf("confidence must be one of %s, not %q", strings.Join(investigation.Confidences, ", "), raw.Confidence)
		}
		return nil
	})
	if err != nil {
		return Conclusion{}, err
	}
	out.Markdown = unfence(raw.Report)
	out.Verdict = &investigation.Verdict{Verdict: raw.Verdict, Confidence: raw.Confidence, Evidence: raw.Evidence}
	return out, nil
}

// unfence removes a code fence the model wrapped the whole report in,
// despite the prompt.
func unfence(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	body := strings.TrimSuffix(s[3:], "```")
	if nl := strings.IndexByte(body, '\n'); nl >= 0 && !strings.Contains(body[:nl], " ") {
		body = body[nl+1:] // the fence's language tag ("markdown")
	}
	return strings.TrimSpace(body)
}
