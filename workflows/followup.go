package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// answerStepID is the step ID of the tool loop that answers a follow-up
// directly.
const answerStepID = "answer"

// followUp runs one follow-up question: the model decides between Plan &
// Execute (continuing the active plan unless the question is new) and a
// direct answer with tools.
func (r *run) followUp(ctx workflow.Context, question string) error {
	var m activities.Mode
	if err := workflow.ExecuteActivity(llmOptions(ctx, "decide mode"), a.DecideMode, activities.ModeInput{
		AlertID: r.Input.AlertID, Question: question, History: r.History, ActivePlan: planWithoutResults(r.ActivePlan),
	}).Get(ctx, &m); err != nil || (m.Mode != investigation.ModePlan && m.Mode != investigation.ModeDirect) {
		m = activities.Mode{Mode: investigation.ModePlan, Reason: "the mode decision failed; planning to be safe"}
	}
	r.charge(&r.ByPhase.Plan, m.Usage)
	r.emit(investigation.Event{Kind: investigation.EventTurn, Text: question, Mode: m.Mode, Reason: m.Reason})
	if m.Mode == investigation.ModePlan {
		return r.planExchange(ctx, question)
	}
	return r.answerDirectly(ctx, question)
}

// answerDirectly answers a follow-up with one tool loop that sees the
// conversation; the answer joins the conversation, the verdict stays.
func (r *run) answerDirectly(ctx workflow.Context, question string) error {
	r.beginExchange(ctx, question)
	r.Phase = investigation.PhaseExecuting
	step := plan.Step{ID: answerStepID, Description: "Answer the analyst's follow-up question: " + question, Expected: "A direct answer with the evidence for it."}
	res, err := r.runStep(ctx, step)
	if err != nil {
		return failure("answering failed", err)
	}
	text := res.Text
	if res.Cut != "" {
		r.emit(investigation.Event{Kind: investigation.EventStop, Text: res.Cut})
		text += "\n\n(This answer was cut short: " + res.Cut + ".)"
	}
	r.Conclusion = boundedConclusion(text)
	r.emit(investigation.Event{Kind: investigation.EventConclusion, Text: r.Conclusion})
	r.setDetails(ctx, "answered")
	r.remember(question, r.Conclusion)
	return nil
}
