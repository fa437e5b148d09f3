package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// executePlan runs the plan's steps until none is left, reflection says the
// objective is achieved, the exchange's budget is spent or the step cap is
// reached; it returns a reason when the exchange ended before the plan was
// finished. A step starts once the steps it depends on are finished (see
// plan.Ready), at most Limits.MaxParallelSteps at a time: a plan without
// depends_on runs in order. Each step is reflected on as it finishes; the
// reflections that finish together are applied in step order. Once the
// exchange is ending, no step starts, and the running ones finish (cut
// short if the budget is spent or the analyst stopped).
func (r *run) executePlan(ctx workflow.Context) (string, error) {
	r.Phase = investigation.PhaseExecuting
	x := &execution{}
	for {
		if err := r.startReady(ctx, x); err != nil {
			return "", err
		}
		if x.running == 0 {
			// A reflection that finished after the end may have added steps.
			r.Plan.SkipPending(x.note)
			return x.ended, nil
		}
		if err := workflow.Await(ctx, func() bool { return len(x.finished) > 0 }); err != nil {
			return "", err
		}
		batch := x.finished
		x.finished = nil
		if err := r.applyOutcomes(ctx, x, batch); err != nil {
			return "", err
		}
	}
}

// applyOutcomes applies what finished steps handed back, in step order
// (steps that finish in the same workflow task may hand back in any order).
func (r *run) applyOutcomes(ctx workflow.Context, x *execution, batch []*stepOutcome) error {
	slices.SortFunc(batch, func(a, b *stepOutcome) int { return r.Plan.Index(a.step) - r.Plan.Index(b.step) })
	for _, o := range batch {
		x.running--
		if o.err != nil {
			return failure(o.step+" failed", o.err)
		}
		if o.cut != "" {
			// The step answered early because the exchange's budget ran
			// out (or the analyst stopped it): conclude, and say why.
			x.end(r, o.cut, r.notRunNote(o.cut), investigation.Event{Kind: investigation.EventStop, Text: o.cut})
			continue
		}
		if !o.reflected {
			continue
		}
		switch achieved := r.applyReflection(ctx, o.step, o.reflection, o.reflectErr); {
		case achieved && !x.ending:
			x.achieved = true
			// The conclusion is told what was left unchecked (EndedEarly):
			// only its input changes, no command.
			why := ""
			var left []string
			for _, s := range r.Plan.WithStatus(plan.Pending) {
				left = append(left, s.ID)
			}
			if len(left) > 0 {
				why = fmt.Sprintf("reflection found the objective achieved after %s, so these planned steps did not run: %s",
					o.step, strings.Join(left, ", "))
			}
			x.end(r, why, "reflection found the objective achieved after "+o.step,
				investigation.Event{Kind: investigation.EventNote, Text: "Objective achieved: concluding early."})
			r.setDetails(ctx, "objective achieved")
		case !x.ending:
			r.setDetails(ctx, "reflected on "+o.step)
		}
	}
	return nil
}

// execution is the state of one executePlan: it lives within a workflow
// task sequence of one exchange and is never carried.
type execution struct {
	started  int // steps started, against the step cap
	running  int
	finished []*stepOutcome // finished steps not yet applied
	// ending says no step starts any more; ended is the reason the exchange
	// ended early ("" when the objective was achieved), note what pending
	// steps are marked with.
	ending      bool
	ended, note string
	achieved    bool
}

// end stops starting steps: pending ones are skipped with note and ev says why.
func (x *execution) end(r *run, reason, note string, ev investigation.Event) {
	if x.ending {
		return
	}
	x.ending, x.ended, x.note = true, reason, note
	r.Plan.SkipPending(note)
	r.emit(ev)
}

// stepOutcome is what a step's coroutine hands back to executePlan.
type stepOutcome struct {
	step string
	err  error
	cut  string
	// reflected says the step was reflected on (not when cut short, or once
	// the objective was achieved), with this outcome.
	reflected  bool
	reflection activities.Reflection
	reflectErr error
}

// notRunNote is the note of the steps an exchange ended by reason leaves
// pending. The analyst's stop reason (up to 8 KiB) is said once, in the
// stop event and EndedEarly, not copied into every pending step's note
// (only payloads change: no gate).
func (r *run) notRunNote(reason string) string {
	if reason == r.Steering.StopReason {
		return "not run: the investigation was stopped"
	}
	return "not run: " + reason
}

// startReady starts the ready steps the limits allow, each in a coroutine
// that runs the step, records it done and reflects on it.
func (r *run) startReady(ctx workflow.Context, x *execution) error {
	for _, i := range r.Plan.Ready() {
		if x.ending || x.running >= r.Input.Limits.MaxParallelSteps {
			return nil
		}
		if reason := r.exhausted(ctx); reason != "" {
			x.end(r, reason, r.notRunNote(reason), investigation.Event{Kind: investigation.EventStop, Text: reason})
			return nil
		}
		if x.started >= r.Input.Limits.MaxSteps {
			reason := fmt.Sprintf("the step cap of %d was reached", r.Input.Limits.MaxSteps)
			x.end(r, reason, reason, investigation.Event{Kind: investigation.EventNote, Text: "Stopping: " + reason})
			return nil
		}
		x.started++
		x.running++
		step := &r.Plan.Steps[i]
		step.Status = plan.Running
		r.emit(investigation.Event{Kind: investigation.EventStep, Step: step.ID, Text: step.Description, Expected: step.Expected})
		r.setDetails(ctx, "running "+runningIDs(r.Plan))
		s := *step
		workflow.Go(ctx, func(ctx workflow.Context) {
			x.finished = append(x.finished, r.runAndReflect(ctx, x, s))
		})
	}
	return nil
}

// runAndReflect runs one step, records it done and, unless the exchange is
// ending, asks for its reflection (applied by executePlan, in step order).
func (r *run) runAndReflect(ctx workflow.Context, x *execution, step plan.Step) *stepOutcome {
	o := &stepOutcome{step: step.ID}
	res, err := r.runStep(ctx, step)
	if err != nil {
		o.err = err
		return o
	}
	done := &r.Plan.Steps[r.Plan.Index(step.ID)]
	done.Status = plan.Done
	done.Result = clip.String(res.Text, r.Input.Limits.MaxStepResultBytes)
	done.ResultKey = res.Key
	r.Finished = append(r.Finished, activities.StepRef{StepID: step.ID, Description: step.Description, Key: res.Key})
	r.addRan(ctx, step.ID, res)
	r.emit(investigation.Event{Kind: investigation.EventStepDone, Step: step.ID, Text: done.Result})
	if o.cut = res.Cut; o.cut != "" || x.achieved {
		return o
	}
	o.reflected = true
	o.reflection, o.reflectErr = r.reflection(ctx, *done)
	return o
}

// runStep runs a step's tool loop: the investigation is the loop's host.
func (r *run) runStep(ctx workflow.Context, step plan.Step) (loopResult, error) {
	l := &toolLoop{
		host:     &stepHost{r: r, step: step},
		session:  r.session,
		prefix:   fmt.Sprintf("t%d-%s", r.Turn, step.ID),
		label:    step.ID,
		maxIter:  r.Input.Limits.MaxIterations,
		maxBytes: r.Input.Limits.MaxToolResultBytes,
		results:  &r.Results,
		exchange: fmt.Sprintf("t%d-", r.Turn),
	}
	res, err := l.run(ctx)
	r.Reused += res.Reused
	return res, err
}

// runningIDs lists the running steps' IDs, "step_1, step_3".
func runningIDs(p plan.Plan) string {
	var ids []string
	for _, s := range p.WithStatus(plan.Running) {
		ids = append(ids, s.ID)
	}
	return strings.Join(ids, ", ")
}
