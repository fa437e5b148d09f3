package activities

import (
	"context"
	"fmt"
	"strings"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// Conclude writes the Markdown conclusion and the verdict from the objective,
// the steps with their status and results, the insights (not the
// conversation) and the standing verdict of earlier exchanges. The verdict's
// evidence is checked in code (VerdictContext): the model is asked once to
// fix what does not check out, then invalid items are dropped.
func (a *Activities) Conclude(ctx context.Context, in ConcludeInput) (Conclusion, error) {
	if err := a.withContext(ctx, in.Session, in.Context, in.UseContext); err != nil {
		return Conclusion{}, err
	}
	al, err := a.loadAlert(ctx, in.AlertID)
	if err != nil {
		return Conclusion{}, err
	}
	tag := prompt.NewTag()
	alert, err := alertSection(tag, al)
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
	check := in.Verdict.readingAlerts(a.Tools)
	p, err := renderPhase(tag, "conclude", map[string]any{
		"Request":         in.Request,
		"Asker":           string(in.Asker),
		"Alert":           alert,
		"Plan":            planText(&plan.Plan{Objective: in.Objective, Steps: in.Steps}),
		"Steps":           steps,
		"Insights":        insightsText(in.Insights),
		"EarlierInsights": insightsText(in.Earlier),
		"Language":        languageName(in.Language),
		"Lang":            in.Language,
		"EndedEarly":      in.EndedEarly,
		"Hints":           in.Hints,
		"Standing":        check.Standing,
		"Waits":           check.Standing != nil && !check.Analyst, // a lower verdict waits for an analyst (waitsForAnalyst)
		"Cite":            check.citable(),
		"Example":         inLanguage(concludeExamples, in.Language),
		"Actions":         in.Actions,
	})
	if err != nil {
		return Conclusion{}, err
	}
	var raw struct {
		Report string `json:"report"`
		modelVerdict
	}
	var out Conclusion
	out.Usage, err = a.Model.GenerateJSON(ctx, "conclusion", p.system, p.user, concludeSchema, &raw, func() error {
		if strings.TrimSpace(raw.Report) == "" {
			return fmt.Errorf("the report is empty")
		}
		if err := raw.values(); err != nil {
			return err
		}
		if problems := check.problems(raw.modelVerdict); len(problems) > 0 {
			return correctable{fmt.Errorf("the verdict does not check out: %s", strings.Join(problems, "; "))}
		}
		return nil
	})
	if err != nil {
		return Conclusion{}, err
	}
	var overruled string
	out.Verdict, out.Notes, overruled = check.settle(raw.modelVerdict, in.Language)
	out.Markdown = clip.String(unfence(raw.Report), MaxReportBytes)
	if overruled != "" {
		// The check's sentence leads the first section, and the model's own
		// text of it follows quoted, as what it proposed: what a delivery
		// carries (investigation.SummaryOf) never says the model's verdict,
		// or its advice (close the alert), as the current one.
		out.Markdown = investigation.OverruledSummary(out.Markdown, overruledNote(in.Language, overruled, out.Verdict, check.Standing != nil, check.waitsForAnalyst(raw.modelVerdict)),
			fmt.Sprintf(notesIn(in.Language).proposed, overruled))
	}
	out.Markdown = clip.String(out.Markdown+actionsSection(in.Actions), MaxConclusionBytes)
	out.Notes = boundedNotes(out.Notes)
	out.SameEvidence = check.compact(out.Verdict)
	return out, nil
}

// Bounds of a structured phase's result, kept by the activity: the result
// is a Temporal payload (at most 2 MB, and an answer may be up to 8 MiB),
// so one over the limit would fail the attempt, after the model was paid,
// and every retry alike. The report is the model's; the conclusion adds
// the code-written sections (whose inputs the workflow bounds). A verdict's
// own fields are bounded by settle (bounded, maxReasonBytes).
const (
	MaxReportBytes     = 32 << 10
	MaxConclusionBytes = 64 << 10
	maxVerdictNotes    = 20
	maxVerdictNote     = 600
)

// boundedNotes keeps the first maxVerdictNotes-1 notes of an evidence
// check, each clipped, and counts the others in a last one (in any
// language: the notes are in the report's).
func boundedNotes(notes []string) []string {
	if len(notes) == 0 {
		return notes
	}
	out := make([]string, 0, min(len(notes), maxVerdictNotes))
	for i, n := range notes {
		if i == maxVerdictNotes-1 && len(notes) > maxVerdictNotes {
			out = append(out, fmt.Sprintf("… (+%d)", len(notes)-i))
			break
		}
		out = append(out, clip.String(n, maxVerdictNote))
	}
	return out
}

// ReviewVerdict decides, after a follow-up's direct answer, whether that
// exchange changed the standing verdict, checked as a conclusion's is.
func (a *Activities) ReviewVerdict(ctx context.Context, in ReviewInput) (Review, error) {
	if err := a.withContext(ctx, in.Session, in.Context, in.UseContext); err != nil {
		return Review{}, err
	}
	answers, err := a.Model.answers(ctx, in.Session, []string{in.AnswerKey})
	if err != nil {
		return Review{}, err
	}
	check := in.Verdict.readingAlerts(a.Tools)
	p, err := renderPhase(prompt.NewTag(), prompt.PhaseVerdict, map[string]any{
		"Question": in.Question,
		"Asker":    string(in.Asker),
		"Answer":   clip.String(answers[0], maxResultInPrompt),
		"Language": languageName(in.Language),
		"Standing": check.Standing,
		"Cite":     check.citable(),
		"Hints":    in.Hints,
		"Example":  inLanguage(verdictExamples, in.Language),
	})
	if err != nil {
		return Review{}, err
	}
	var raw modelVerdict
	var out Review
	out.Usage, err = a.Model.GenerateJSON(ctx, "verdict review", p.system, p.user, verdictSchema, &raw, func() error {
		if err := raw.values(); err != nil {
			return err
		}
		if problems := check.problems(raw); len(problems) > 0 {
			return correctable{fmt.Errorf("the verdict does not check out: %s", strings.Join(problems, "; "))}
		}
		return nil
	})
	if err != nil {
		return Review{}, err
	}
	var overruled string
	out.Verdict, out.Notes, overruled = check.settle(raw, in.Language)
	if overruled != "" {
		out.Overruled = answerOverruledNote(in.Language, overruled, out.Verdict, check.Standing != nil, check.waitsForAnalyst(raw))
	}
	out.Notes = boundedNotes(out.Notes)
	out.SameEvidence = check.compact(out.Verdict)
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

// actionsSection lists every action the investigation asked for and what
// became of it, written by code so the conclusion lists them whatever the
// model wrote. Arguments are the model's: shown as quoted JSON in code
// spans, without backticks, so they cannot format the report.
func actionsSection(actions []investigation.Action) string {
	if len(actions) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n## Actions requested\n")
	for _, a := range actions {
		args := strings.ReplaceAll(a.Args, "`", "'")
		fmt.Fprintf(&b, "- `%s` `%s` (%s, call %s): **%s**", a.Tool, args, a.Step, a.CallID, a.Status)
		if a.Note != "" {
			fmt.Fprintf(&b, " (%s)", strings.ReplaceAll(clip.String(a.Note, 300), "\n", " "))
		}
		b.WriteString("\n")
	}
	return b.String()
}
