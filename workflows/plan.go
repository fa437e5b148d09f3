package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// planExchange runs one Plan & Execute exchange for a request: plan
// (waiting for approval when asked), execute, conclude. The request and the
// conclusion join the conversation.
func (r *run) planExchange(ctx workflow.Context, request string) error {
	r.beginExchange(ctx, request)
	if r.Steering.StopReason != "" && stopSkipsPlanning(ctx) {
		return r.concludeStopped(ctx, request)
	}
	if err := r.makePlan(ctx, request); err != nil {
		if r.followingUp && ctx.Err() == nil && planGuarded(ctx) {
			return r.followUpUnplanned(ctx, request, err)
		}
		return failure("planning failed", err)
	}
	if r.Input.ApprovePlan && r.Turn == 1 {
		if err := r.awaitApproval(ctx, request); err != nil {
			return err
		}
	}
	endedEarly, err := r.executePlan(ctx)
	if err != nil {
		return err
	}
	return r.conclude(ctx, request, endedEarly)
}

// followUpUnplanned ends a follow-up whose plan could not be made (the
// planner, steered by what it read, answered no executable step twice, or
// failed): the exchange's answer says so, and the standing verdict, the
// conclusion and the active plan stay, as does the run for the next
// question. makePlan failed before it changed the plan or the tools.
func (r *run) followUpUnplanned(ctx workflow.Context, request string, err error) error {
	r.emit(investigation.Event{Kind: investigation.EventNote, Text: "the follow-up was not investigated: planning failed: " + message(err)})
	answer := activities.UnplannedNote(r.Input.Language)
	r.emit(investigation.Event{Kind: investigation.EventConclusion, Text: answer}) // no verdict: it did not change
	r.setDetails(ctx, "follow-up not planned")
	r.remember(request, answer)
	if r.Input.Intake != nil {
		r.tellAdmission(ctx) // what the mode decision and the failed plans cost counts against the day at once
	}
	return nil
}

// concludeStopped concludes an exchange the analyst stopped before it
// planned (a follow-up whose mode decision was in flight). A stop asks for
// the conclusion now, from what the investigation has, and the conclusion
// is the one model call it allows: so no plan and no step, the conclusion
// at once, as after a stop while the first plan was made (CutAnswer is
// how a stopped step answers so that this conclusion follows at once; an
// exchange that ran no step has nothing for it to lay out). The exchange
// continues the active plan with no new step, so the conclusion sees the
// steps that ran and their results, and a follow-up would continue it.
func (r *run) concludeStopped(ctx workflow.Context, request string) error {
	if r.ActivePlan != nil {
		r.Plan = withResultsFrom(*r.ActivePlan, r.Plan)
	} else {
		r.Plan = plan.Plan{Objective: request}
	}
	r.emit(investigation.Event{Kind: investigation.EventNote, Text: "no plan is made: " + r.Steering.StopReason + "; concluding from what the investigation has"})
	return r.conclude(ctx, request, r.Steering.StopReason)
}

// stopSkipsPlanning gates the stop that skips planning: once stopped, an
// exchange asks for no plan (concludeStopped), a revision taken with the
// stop is not applied (awaitApproval), and a revise signal after it is
// refused (checkRevisionSignal). Histories recorded before asked for the
// plan, and re-planned, after the stop.
func stopSkipsPlanning(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, "stop-skips-planning", workflow.DefaultVersion, 1) == 1
}

// alertOnlyNote tells the conclusion of an alert-only exchange why no step ran.
const alertOnlyNote = "no plan was made and no tool was called: this exchange concludes from the alert alone"

// alertOnlyExchange concludes from the alert alone, without a plan, a step
// or a tool call (Input.ConcludeFromAlert, starter eval's baseline). The
// same conclusion activity, prompt and model judge it, so what a full
// exchange adds is what its steps found. Nothing is left to continue.
func (r *run) alertOnlyExchange(ctx workflow.Context, request string) error {
	r.beginExchange(ctx, request)
	r.Plan = plan.Plan{Objective: request}
	r.emit(investigation.Event{Kind: investigation.EventNote, Text: "concluding from the alert alone: no plan, no tool calls"})
	if err := r.conclude(ctx, request, alertOnlyNote); err != nil {
		return err
	}
	r.ActivePlan = nil
	return nil
}

// beginExchange resets what one exchange measures.
func (r *run) beginExchange(ctx workflow.Context, request string) {
	r.ranTurn = true
	r.Request = request
	r.Phase = investigation.PhasePlanning
	r.Budget = Budget{TurnStart: workflow.Now(ctx)}
	r.Finished = nil
}

// makePlan asks for a plan. For a follow-up that continues the active plan,
// the new steps are appended to it (renumbered, duplicates dropped).
func (r *run) makePlan(ctx workflow.Context, request string) error {
	var out activities.PlanOutput
	in := activities.PlanInput{
		AlertID:    r.Input.AlertID,
		Request:    request,
		Asker:      r.asker(request),
		History:    r.History,
		MaxSteps:   r.Input.Limits.MaxSteps,
		ActivePlan: planWithoutResults(r.ActivePlan),
		Feedback:   r.Steering.Feedback,
		Previous:   planWithoutResults(r.previousPlan()),
		Hints:      r.Steering.Hints,
		Arrivals:   r.arrivals(), // intake.go
	}
	if in.Context = r.context(ctx); in.Context != "" {
		in.Session, in.History, in.Hints, in.ActivePlan = r.session, nil, nil, nil
		in.Request = r.withoutRequest(in.Context, in.Request)
	}
	err := workflow.ExecuteActivity(llmOptions(ctx, "plan"), a.GeneratePlan, in).Get(ctx, &out)
	r.charge(&r.ByPhase.Plan, billedUsage(out.Usage, err))
	if err != nil {
		return err
	}
	r.Tools = out.Tools
	notes := out.Notes
	r.StepCap = r.Input.Limits.MaxSteps
	if out.Continues && r.ActivePlan != nil {
		r.StepCap += len(r.ActivePlan.Steps)
		merged := withResultsFrom(*r.ActivePlan, r.Plan)
		// The new steps get new IDs as they are appended; their
		// dependencies on one another follow them, and those on a step of
		// the active plan stay (the step gets that step's answer,
		// stepHost.earlier). A dependency that names one of the new steps
		// means that step (plan.RepairAfter numbers them after the active
		// plan's; plans recorded before it numbered them from step_1).
		// A new step dropped as a duplicate stands for the step it repeats:
		// one that depends on it depends on that step instead.
		renamed, duplicated := map[string]string{}, map[string]string{}
		fresh := make([]string, len(out.Plan.Steps))
		for i, step := range out.Plan.Steps {
			fresh[i] = step.ID
		}
		for _, step := range out.Plan.Steps {
			if step.DependsOn != nil {
				deps := []string{}
				for _, d := range step.DependsOn {
					if id, ok := renamed[d]; ok {
						deps = append(deps, id)
					} else if !slices.Contains(fresh, d) && r.ActivePlan.Index(d) >= 0 {
						deps = append(deps, d)
					} else if dup, ok := duplicated[d]; ok && insightsAndDuplicates(ctx) {
						deps = append(deps, dup)
					} else if slices.Contains(fresh, d) {
						notes = append(notes, fmt.Sprintf("a new step no longer depends on %s: that step was not added", d))
					}
				}
				step.DependsOn = deps
			}
			var outcomes []plan.Outcome
			add := []plan.Update{{Type: plan.AddStep, Step: &step, Reason: "follow-up: " + request}}
			merged, outcomes = plan.Apply(merged, add, plan.Limits{MaxSteps: r.StepCap, Tools: r.toolNames(), Bound: boundsPlanText(ctx, plan.UpdatesWithinBounds(add))})
			if o := outcomes[0]; o.Applied {
				renamed[step.ID] = o.StepID
			} else {
				if o.Duplicate != "" {
					duplicated[step.ID] = o.Duplicate
				}
				notes = append(notes, describeOutcome(o))
			}
		}
		notes = append(notes, "continues the active plan")
		r.Plan = merged
	} else {
		// Bounded as Repair bounds it: the objective and the step ride in
		// every model turn's input. The plan rides in the stored context,
		// whose size decides whether a local activity stores it
		// (inlineContext): behind the gate, so a run recorded before it
		// replays (the failed-lookup fixtures pad their objective).
		r.Plan = out.Plan
		if boundsPlanText(ctx, out.Plan.WithinBounds()) {
			r.Plan = out.Plan.Bounded()
		}
	}
	p := r.Plan.Clone()
	// The notes reach only the plan's event (no command, no gate): bounded
	// as Repair bounds them, for a result recorded before it did.
	r.emit(investigation.Event{Kind: investigation.EventPlan, Plan: &p, Notes: plan.BoundNotes(notes)})
	r.setDetails(ctx, "planned")
	return nil
}

// previousPlan is the plan being revised, if the analyst asked for a revision.
func (r *run) previousPlan() *plan.Plan {
	if r.Steering.Feedback == "" {
		return nil
	}
	p := r.Plan.Clone()
	return &p
}

// awaitApproval holds a new plan until the analyst approves it, or re-plans
// with the analyst's feedback and waits again. Waiting does not count
// against the exchange's time budget; a plan left without a decision for
// the idle timeout is not run (the investigation concludes that it was
// not approved).
func (r *run) awaitApproval(ctx workflow.Context, request string) error {
	for {
		r.Phase, r.Steering.Approval = investigation.PhaseAwaitingApproval, ""
		r.emit(investigation.Event{Kind: investigation.EventApproval, Text: "awaiting"})
		r.setDetails(ctx, "plan awaits approval")
		start := workflow.Now(ctx)
		decided, err := wait(ctx, r.Input.IdleTimeout.Duration(), "waiting for the plan's approval", func() bool {
			return r.Steering.Approval != "" || r.Steering.StopReason != ""
		})
		if err != nil {
			return err
		}
		r.Budget.Waited += workflow.Now(ctx).Sub(start)
		if !decided {
			r.Steering.StopReason = fmt.Sprintf("the plan was not approved within %s", r.Input.IdleTimeout)
			r.emit(investigation.Event{Kind: investigation.EventStop, Text: r.Steering.StopReason})
		}
		revised := r.Steering.Approval == approvalRevise
		if revised && r.Steering.StopReason != "" && stopSkipsPlanning(ctx) {
			// A revise and a stop taken in the same workflow task: the stop
			// wins, nothing is planned again (executePlan skips every step).
			r.emit(investigation.Event{Kind: investigation.EventNote, Text: "the revision is not applied: " + r.Steering.StopReason})
			revised = false
		}
		if !revised {
			r.Phase = investigation.PhaseExecuting
			r.Steering.Feedback = ""
			return nil
		}
		r.Phase = investigation.PhasePlanning
		if err := r.makePlan(ctx, request); err != nil {
			return failure("re-planning failed", err)
		}
		r.Steering.Feedback = ""
	}
}

// withoutResults returns copies of steps without their inline results:
// activities read the whole answers from the transcript store by
// ResultKey, so inputs stay small.
func withoutResults(steps []plan.Step) []plan.Step {
	out := make([]plan.Step, len(steps))
	for i, s := range steps {
		s.Result = ""
		out[i] = s
	}
	return out
}

func planWithoutResults(p *plan.Plan) *plan.Plan {
	if p == nil {
		return nil
	}
	c := plan.Plan{Objective: p.Objective, Steps: withoutResults(p.Steps)}
	return &c
}

// withResultsFrom is a copy of the active plan whose steps carry their
// results again, from the plan of the exchange that concluded it (still
// r.Plan when the next exchange plans), matched by step ID and transcript
// key. A result the active step holds itself (a run before results were
// held once) stays.
func withResultsFrom(active, from plan.Plan) plan.Plan {
	p := active.Clone()
	for i, s := range p.Steps {
		if j := from.Index(s.ID); s.Result == "" && j >= 0 && from.Steps[j].ResultKey == s.ResultKey {
			p.Steps[i].Result = from.Steps[j].Result
		}
	}
	return p
}
