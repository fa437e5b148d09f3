package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// stepHost runs a step's tool loop for an investigation: model turns with
// the step, the exchange's budget, questions to the analyst and the
// sub-agent as a child workflow.
type stepHost struct {
	r    *run
	step plan.Step
}

func (h *stepHost) modelTurn(ctx workflow.Context, iter int, key string, transcript []activities.Ref, final bool) (activities.TurnOutput, error) {
	r := h.r
	in := activities.TurnInput{
		Session:    r.session,
		Key:        key,
		AlertID:    r.Input.AlertID,
		Objective:  r.Plan.Objective,
		Step:       h.step,
		Earlier:    h.earlier(),
		Transcript: transcript,
		Final:      final,
		Hints:      r.Steering.Hints,
		Arrivals:   r.arrivals(), // intake.go
	}
	if h.step.ID == answerStepID {
		in.Direct, in.Question, in.Language, in.History, in.Standing = true, r.Request, r.Input.Language, r.History, r.Verdict
		in.Asker = r.asker(r.Request)
	}
	in.Declared = r.declared(h.step.Tools, in.Direct) // mcp.go
	if in.Direct && r.storesContext {
		// A direct answer's prompt reads the question, not the step.
		in.Objective, in.Step = "", plan.Step{ID: answerStepID}
	}
	if in.Context = r.context(ctx); in.Context != "" {
		in.Hints, in.History, in.Standing = nil, nil, nil
		in.Question = r.withoutRequest(in.Context, in.Question)
		in.Earlier = slices.Clone(in.Earlier)
		for i := range in.Earlier {
			in.Earlier[i].Description = "" // the stored plan has it
		}
	}
	var out activities.TurnOutput
	err := workflow.ExecuteActivity(llmOptions(ctx, fmt.Sprintf("%s turn %d", h.step.ID, iter)), a.ModelTurn, in).Get(ctx, &out)
	r.charge(&r.ByPhase.Steps, billedUsage(out.Usage, err))
	return out, err
}

// earlier are the finished steps whose answers the step sees: those it
// depends on, or with no depends_on every step this exchange finished before
// it (in plan order, all earlier ones), so what it sees does not depend on
// timing. A step that continues the plan of an earlier exchange may depend
// on that exchange's steps: their answers come first, by the keys the plan
// kept (plan.Step.ResultKey).
func (h *stepHost) earlier() []activities.StepRef {
	if h.step.DependsOn == nil {
		return h.r.Finished
	}
	var refs []activities.StepRef
	for _, s := range h.r.Plan.Steps {
		now := slices.ContainsFunc(h.r.Finished, func(f activities.StepRef) bool { return f.StepID == s.ID })
		if s.Status == plan.Done && s.ResultKey != "" && !now && slices.Contains(h.step.DependsOn, s.ID) {
			refs = append(refs, activities.StepRef{StepID: s.ID, Description: s.Description, Key: s.ResultKey})
		}
	}
	for _, f := range h.r.Finished {
		if slices.Contains(h.step.DependsOn, f.StepID) {
			refs = append(refs, f)
		}
	}
	return refs
}

// mustAnswer says why the step must answer now. A cancelled investigation
// does not answer at all: it ends as cancelled. The exchange's calls are
// counted as they finish, this loop's among them.
func (h *stepHost) mustAnswer(ctx workflow.Context, _ int) string {
	if ctx.Err() != nil {
		return ""
	}
	return h.r.exhausted(ctx)
}

// answersAsIs: once the analyst stopped the investigation, a step answers
// from what it has, so the conclusion follows the stop at once.
func (h *stepHost) answersAsIs(ctx workflow.Context) bool {
	return h.r.Steering.StopReason != "" && ctx.Err() == nil && stopAnswersAtOnce(ctx)
}

// language is the analyst's: a step's answer is read in the progress.
func (h *stepHost) language() string { return h.r.Input.Language }

// deadline is the end of the exchange's time budget; while the analyst is
// asked something, the budget does not run and there is none.
func (h *stepHost) deadline(ctx workflow.Context) (time.Time, bool) {
	if h.r.Budget.Waiting > 0 {
		return time.Time{}, false
	}
	return h.r.budgetDeadline(ctx), true
}

// timeLeft is the exchange's time budget left, the analyst's waits aside.
func (h *stepHost) timeLeft(ctx workflow.Context) time.Duration {
	return max(h.r.budgetDeadline(ctx).Sub(workflow.Now(ctx)), 0)
}

// defaultToolAttempt bounds one attempt of a tool activity.
const defaultToolAttempt = 2 * time.Minute

func (h *stepHost) toolTimeout(string) time.Duration { return defaultToolAttempt }

// callsLeft is what the exchange's budget leaves, counting the calls that
// run in the steps running alongside.
func (h *stepHost) callsLeft(int) int {
	return h.r.Input.Limits.MaxToolCalls - h.r.Budget.TurnCalls - h.r.callsInFlight
}

func (h *stepHost) callStarted() { h.r.callsInFlight++ }

func (h *stepHost) callDone(ctx workflow.Context, key string, out activities.ToolOutput, err error) {
	lent := h.r.loans.end(key)
	h.r.callsInFlight--
	h.r.Budget.TurnCalls++
	h.r.ToolCalls++
	h.r.ScannedBytes += out.ScannedBytes
	if err != nil && lent > 0 && chargesFailedChildren(ctx) {
		// A sub-agent that failed, timed out or was cancelled reports no
		// bytes, yet may have scanned up to its loan: charge all of it.
		h.r.ScannedBytes += lent
	}
	h.r.charge(&h.r.ByPhase.SubAgent, billedUsage(out.Usage, err))
}

// scanFor: the investigation's tools scan nothing; its sub-agents borrow
// their budget when they start (startBigQueryAgent).
func (h *stepHost) scanFor(string, toolcall.Call, int) int64 { return h.r.scanLeft() }

func (h *stepHost) emit(e investigation.Event) { h.r.emit(e) }

func (h *stepHost) tool(name string) toolcall.Tool { return h.r.tool(name) }

func (h *stepHost) toolset() string { return "" }

// offers is what ModelTurn declares to the step's turns
// (activities.stepDeclarations): every tool for a direct answer, none to a
// step planned without tools, else the step's tools, ask_user and get_alert.
func (h *stepHost) offers(name string) bool {
	switch {
	case h.step.ID == answerStepID:
		return true
	case len(h.step.Tools) == 0:
		return false
	}
	return slices.Contains(h.step.Tools, name) || name == toolcall.AskUser || name == toolcall.GetAlert
}

func (h *stepHost) startSpecial(ctx workflow.Context, key string, t toolcall.Tool, c toolcall.Call, siblings int) workflow.Future {
	switch {
	case t.Kind == toolcall.Analyst:
		return h.r.askUser(ctx, c, h.step.ID)
	case t.Workflow == investigation.BigQueryWorkflowName:
		return h.r.startBigQueryAgent(ctx, h.step.ID, key, c, siblings)
	}
	f, settle := workflow.NewFuture(ctx)
	settle.SetError(temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("the call did not run: %s runs as child workflow %q, which this investigation cannot start", c.Name, t.Workflow), "UnknownChild", nil))
	return f
}

func (h *stepHost) gate(ctx workflow.Context, key string, c toolcall.Call, run func(workflow.Context, string) workflow.Future) workflow.Future {
	return h.r.gateAction(ctx, key, c, h.step.ID, h.step.Description, run)
}
