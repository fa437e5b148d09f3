package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
)

// maxHistoryBytes bounds the conversation that every later exchange carries
// and shows the model: the oldest exchanges go first.
const maxHistoryBytes = 64 << 10

// conclude writes the conclusion and verdict of a Plan & Execute exchange;
// the request and the conclusion (prefixed with the objective) join the
// conversation, and the plan becomes the active plan.
func (r *run) conclude(ctx workflow.Context, request, endedEarly string) error {
	r.Phase = investigation.PhaseConcluding
	current, earlier := r.splitInsights()
	standing := r.Verdict
	var c activities.Conclusion
	in := activities.ConcludeInput{
		Session:    r.session,
		AlertID:    r.Input.AlertID,
		Request:    request,
		Asker:      r.asker(request),
		Objective:  r.Plan.Objective,
		Steps:      withoutResults(r.Plan.Steps),
		Insights:   current,
		Earlier:    earlier,
		Language:   r.Input.Language,
		EndedEarly: endedEarly,
		Hints:      r.Steering.Hints,
		Verdict:    r.verdictContext(),
		Actions:    r.actions(), // mcp.go
	}
	if in.Context = r.context(ctx); in.Context != "" {
		in.Earlier, in.Hints, in.Verdict.Ran, in.Verdict.Standing, in.Insights, in.Steps = nil, nil, nil, nil, nil, nil
		in.Request = r.withoutRequest(in.Context, in.Request)
	}
	err := workflow.ExecuteActivity(llmOptions(ctx, "conclude"), a.Conclude, in).Get(ctx, &c)
	r.charge(&r.ByPhase.Conclusion, billedUsage(c.Usage, err))
	if err != nil {
		return failure("writing the conclusion failed", err)
	}
	r.checkNotes(c.Notes)
	c.Verdict = withEvidence(c.Verdict, c.SameEvidence, standing)
	r.recordVerdict(ctx, c.Verdict, true)
	r.Conclusion = boundedConclusion(c.Markdown)
	r.deliver(ctx) // intake.go: the admission workflow and the verdict's deliveries
	r.emit(investigation.Event{Kind: investigation.EventConclusion, Text: r.Conclusion, Verdict: c.Verdict})
	r.setDetails(ctx, "concluded")
	r.remember(request, "Objective: "+r.Plan.Objective+"\n\n"+r.Conclusion)
	r.ActivePlan = r.activePlan()
	return nil
}

// verdictContext is what an exchange's verdict is checked against: the
// steps that ran, the standing verdict, and whether the analyst spoke in
// this exchange (their request, or a statement since the last check, which
// it marks as checked).
func (r *run) verdictContext() activities.VerdictContext {
	analyst := r.Steering.AnalystAsked || r.Steering.Said > r.Steering.SaidChecked
	r.Steering.SaidChecked = r.Steering.Said
	return activities.VerdictContext{Turn: r.Turn, Ran: slices.Clone(r.Ran), Standing: r.Verdict, Compact: true, Analyst: analyst}
}

// asker is who asked request, read from the record verdictContext reads: a
// request the analyst did not ask is a follow-up the intake queued
// (Steering.Generated) or the default one the investigation started with.
func (r *run) asker(request string) activities.Asker {
	switch {
	case r.Steering.AnalystAsked:
		return activities.AskerAnalyst
	case request == DefaultQuestion && r.Input.Intake == nil:
		return activities.AskerDefault
	}
	return activities.AskerIntake
}

// withEvidence puts back into v the evidence the activity left out because
// it was the standing verdict's (VerdictContext.Compact).
func withEvidence(v *investigation.Verdict, same bool, standing *investigation.Verdict) *investigation.Verdict {
	if same && v != nil && standing != nil {
		v.Evidence = slices.Clone(standing.Evidence)
	}
	return v
}

// checkNotes reports what the verdict's evidence check dropped or refused,
// in the run's language as the notes are (activities' settle). No gate:
// the event's text is a payload (the progress, StoreProgress's input),
// never a command, and in English it is unchanged.
func (r *run) checkNotes(notes []string) {
	if len(notes) > 0 {
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: activities.CheckedNote(r.Input.Language), Notes: notes})
	}
}

// recordVerdict makes v the investigation's verdict (the activity checked
// it against the standing one). The first verdict and each change enter the
// verdict's history; a change is also a verdict_changed event, emitted
// before the exchange's conclusion event, where a follower stops. The
// Verdict search attribute, when it was registered when the investigation
// started, follows: a conclusion sets it every time (as it always has), a
// direct answer only when it set or changed the verdict. It says whether it
// did.
func (r *run) recordVerdict(ctx workflow.Context, v *investigation.Verdict, always bool) bool {
	if v == nil {
		return false
	}
	standing := r.Verdict
	r.Verdict = v
	countVerdict(ctx, standing, v)
	moved := !standing.Same(v)
	if moved {
		r.VerdictHistory = append(r.VerdictHistory, investigation.VerdictChange{Turn: r.Turn, Verdict: v.Verdict, Confidence: v.Confidence, Reason: v.Reason})
		r.VerdictHistory = r.VerdictHistory[max(len(r.VerdictHistory)-maxVerdicts, 0):]
	}
	if moved && standing != nil {
		r.emit(investigation.Event{Kind: investigation.EventVerdictChanged, From: standing, Verdict: v, Reason: v.Reason})
	}
	if (always || moved) && slices.Contains(r.Input.SearchAttributes, investigation.VerdictAttribute) {
		r.upsertVerdict(ctx, v)
	}
	return moved
}

// countVerdict counts the investigation at its first verdict, and each
// later change of the verdict, through Temporal's metrics handler, which
// records nothing while a run replays its history: a replay never counts
// twice.
func countVerdict(ctx workflow.Context, standing, v *investigation.Verdict) {
	h := workflow.GetMetricsHandler(ctx)
	switch {
	case standing == nil:
		h.WithTags(map[string]string{"verdict": known(v.Verdict, investigation.Verdicts), "confidence": known(v.Confidence, investigation.Confidences)}).
			Counter(investigation.MetricInvestigations).Inc(1)
	case standing.Verdict != v.Verdict:
		h.WithTags(map[string]string{"from": known(standing.Verdict, investigation.Verdicts), "to": known(v.Verdict, investigation.Verdicts)}).
			Counter(investigation.MetricVerdictChanges).Inc(1)
	}
}

// known keeps a metric's label within its allowed values.
func known(v string, allowed []string) string {
	if slices.Contains(allowed, v) {
		return v
	}
	return "other"
}

// upsertVerdict sets the Verdict search attribute, so the Web UI can filter
// on it.
func (r *run) upsertVerdict(ctx workflow.Context, v *investigation.Verdict) {
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		temporal.NewSearchAttributeKeyKeyword(investigation.VerdictAttribute).ValueSet(v.Verdict)); err != nil {
		workflow.GetLogger(ctx).Warn("could not set the Verdict search attribute", "error", err)
	}
}

// remember appends one exchange to the conversation, dropping the oldest
// exchanges when it grows past maxHistoryBytes.
func (r *run) remember(request, answer string) {
	r.History = append(slices.Clone(r.History),
		investigation.Message{Role: "user", Text: request},
		investigation.Message{Role: "assistant", Text: answer},
	)
	r.Turn++
	size := 0
	for _, m := range r.History {
		size += len(m.Text)
	}
	dropped := 0
	for size > maxHistoryBytes && len(r.History) > 2 {
		size -= len(r.History[0].Text) + len(r.History[1].Text)
		r.History = r.History[2:]
		dropped++
	}
	if dropped > 0 {
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf(
			"the %d oldest exchanges of the conversation were dropped to keep it under %d KiB", dropped, maxHistoryBytes>>10)})
	}
}
