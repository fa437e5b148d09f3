package workflows

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// Outside tools (MCP servers') in the workflow: the declarations a plan
// recorded, and the approval every call of an acting tool waits for.

// declared are the outside (MCP) tools a step's turns may call, as the
// plan recorded them (State.Tools): those the step names, or every one for
// a direct answer. A server that changed since gives the same turn input.
func (s *State) declared(step []string, direct bool) []toolcall.Tool {
	var out []toolcall.Tool
	for _, t := range s.Tools {
		if t.Declared != nil && (direct || slices.Contains(step, t.Name)) {
			out = append(out, t)
		}
	}
	return out
}

// maxActions bounds the actions one investigation may ask for (they stay
// in its state, for the conclusion); maxActionArgs the arguments of each,
// as sent and as shown with hidden characters escaped (termtext.Reveal),
// so every approval surface shows them whole (a longer call does not run).
const (
	maxActions    = 50
	maxActionArgs = 2 << 10
	maxActionNote = 1 << 10
)

// gateAction holds a call of an acting tool until the analyst approves it
// (then run runs it), denies it, the approval timeout passes, or the
// investigation stops (a denial). Every outcome but approval is the call's
// result, which the model reads. The wait, in its own coroutine, does not
// count against the time budget, as an ask_user question's does not.
// The approval binds to the arguments shown: run gets their
// activities.Approval, which CallTool checks against what it would run.
// No version gate: only a tool the plan recorded as acting (Tool.Acts)
// comes here, and no history recorded before this code has one, so every
// earlier history replays the commands it recorded (design/versioning.md).
// Nor for the refusal of arguments over maxActionArgs, as sent or as
// shown (Reveal): the recorded actions (testdata mcp, mcp-changed) hold
// 127 bytes of plain ASCII arguments, which Reveal leaves as they are, and
// no release has run this code, so no history reaches either path. Reveal
// is pure string code over Go's Unicode tables; a Go upgrade that assigns
// code points could move a call within a few bytes of the bound across
// it, which no recorded history is near.
func (r *run) gateAction(ctx workflow.Context, key string, c toolcall.Call, label, reason string, run func(workflow.Context, string) workflow.Future) workflow.Future {
	f, settle := workflow.NewFuture(ctx)
	if len(r.Actions) >= maxActions {
		settle.SetError(temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the call did not run: this investigation already asked for %d actions", maxActions), "TooManyActions", nil))
		return f
	}
	if refs := refValues(c.Args); len(refs) > 0 {
		// The analyst approves what they see: a value another call will
		// supply is not shown, so an action takes none.
		settle.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the call did not run: an action's arguments must be written out for the analyst to approve, not taken from another call (%s%s)",
			toolcall.RefPrefix, refs[0]), "BadRef", nil))
		return f
	}
	shown := activities.ActionArgs(c.Args)
	if n := max(len(shown), len(termtext.Reveal(shown))); n > maxActionArgs {
		// Clipped, the analyst would approve a part and the whole would run.
		// The bound is on what the analyst reads: each hidden character
		// shows as a 6- or 12-byte escape, and Slack's section (3,000
		// bytes after plain's escaping, delivery) then holds it whole.
		settle.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the call did not run: an action's arguments are too long for the analyst to see whole (%d bytes as shown, at most %d); call it with shorter ones, without hidden characters",
			n, maxActionArgs), "ActionTooLong", nil))
		return f
	}
	act := &investigation.Action{CallID: key, Tool: c.Name, Args: shown, Step: label,
		Reason: clip.String(reason, 500), Status: investigation.ActionPending, Turn: r.Turn}
	r.Actions = append(r.Actions, act)
	r.emit(investigation.Event{Kind: investigation.EventApprovalRequested, Step: label, Tool: c.Name, CallID: key, Text: act.Args, Reason: act.Reason})
	r.requestApproval(ctx, act)
	workflow.Go(ctx, func(ctx workflow.Context) {
		r.Phase = investigation.PhaseAwaitingCallApproval
		r.setDetails(ctx, fmt.Sprintf("waiting for the analyst's approval of %s (starter approve-call / deny-call %s)", c.Name, key))
		if r.Budget.Waiting == 0 {
			r.Budget.WaitStart = workflow.Now(ctx)
		}
		r.Budget.Waiting++
		timeout := r.Input.Limits.ApprovalTimeout.Duration()
		decided, err := wait(ctx, timeout, "waiting for approval of "+key, func() bool {
			return act.Status != investigation.ActionPending || r.Steering.StopReason != ""
		})
		r.Budget.Waiting--
		if r.Budget.Waiting == 0 {
			r.Budget.Waited += workflow.Now(ctx).Sub(r.Budget.WaitStart)
			r.Phase = investigation.PhaseExecuting
		}
		switch {
		case act.Status == investigation.ActionApproved && r.Steering.StopReason != "" && actionOutcomes(ctx):
			// Approved in the workflow task that took the stop (a signal;
			// the update's validator refuses it): after a stop no action
			// starts.
			act.Status = investigation.ActionNotRun
			act.Note = clip.String("approved, but it did not run: the investigation was stopped first ("+r.Steering.StopReason+")", maxActionNote)
			r.emit(investigation.Event{Kind: investigation.EventApprovalDecided, Step: label, Tool: c.Name, CallID: key, Text: "not run: " + act.Note})
		case act.Status == investigation.ActionApproved:
			var out activities.ToolOutput
			err := run(ctx, activities.Approval(shown)).Get(ctx, &out)
			switch {
			case err != nil:
				out, err = r.failedAction(act, err)
			case !out.OK && actionOutcomes(ctx):
				out = r.unperformedAction(act, out)
			}
			settle.Set(out, err)
			return
		case err != nil || act.Status == investigation.ActionPending && r.Steering.StopReason != "":
			// Cut short (a cancel, a spent budget) or stopped: never run.
			why := cmp.Or(r.Steering.StopReason, r.exhausted(ctx), "the step was cut short")
			act.Status, act.Note = investigation.ActionDenied, "not approved before the investigation stopped: "+why
			r.emit(investigation.Event{Kind: investigation.EventApprovalDecided, Step: label, Tool: c.Name, CallID: key, Text: "denied: " + act.Note})
			if err != nil {
				settle.SetError(err)
				return
			}
		case !decided:
			act.Status, act.Note = investigation.ActionExpired, fmt.Sprintf("no decision within %s", r.Input.Limits.ApprovalTimeout)
			r.emit(investigation.Event{Kind: investigation.EventApprovalDecided, Step: label, Tool: c.Name, CallID: key, Text: "expired: " + act.Note})
		}
		result := map[string]any{"performed": false, "outcome": act.Status, "note": actionNote(act)}
		if act.Note != "" {
			result["reason"] = act.Note
		}
		out, _ := json.Marshal(result)
		settle.Set(activities.ToolOutput{OK: true, Inline: string(out), Bytes: len(out), Unperformed: true}, nil)
	})
	return f
}

// failedAction is the outcome of an approved action whose one attempt
// failed (once, options.go). A failure known to come before the call
// reached the server is the call's error: the action did not run. Any
// other (a lost connection, a timeout, a lost worker, a cut) may have come
// after the server acted: the action's outcome is unknown, and the model
// and the analyst read that, never a retry. No gate: only the state (the
// status, not_run or unknown), the events and the result the model reads
// change, no command, and no recorded action failed (mcp, mcp-changed:
// block_ip completed at its first attempt).
func (r *run) failedAction(act *investigation.Action, err error) (activities.ToolOutput, error) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && slices.Contains([]string{activities.ErrMCPToolMissing, activities.ErrMCPNotConnected, activities.ErrToolsetDisabled}, app.Type()) {
		// A status of its own, and an event the follower shows: left
		// "approved", the action read as performed.
		act.Status = investigation.ActionNotRun
		act.Note = clip.String("approved, but it did not run: "+message(err), maxActionNote)
		r.emit(investigation.Event{Kind: investigation.EventApprovalDecided, Step: act.Step, Tool: act.Tool, CallID: act.CallID, Text: "not run: " + act.Note})
		return activities.ToolOutput{}, temporal.NewNonRetryableApplicationError("the call did not run: "+message(err), app.Type(), nil)
	}
	return r.unknownAction(act, message(err)), nil
}

// actionOutcomes gates what an approved action that did not run reports
// (design/versioning.md, "action-outcomes"): asked only where an approved
// action returned a failed result (before, it stayed "approved") or where
// one approved with the stop would start (before, it ran).
func actionOutcomes(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, "action-outcomes", workflow.DefaultVersion, 1) != workflow.DefaultVersion
}

// unperformedAction is the outcome of an approved action whose call
// returned no result: refused by the worker or the server, or reported an
// error by the tool (activities.CallRefused), it did not run, and the
// model reads the error; any other failure (no answer in time, one too
// large to read, or an outcome not said) may have come after the server
// acted: unknown, as failedAction says.
func (r *run) unperformedAction(act *investigation.Action, out activities.ToolOutput) activities.ToolOutput {
	if out.Outcome == activities.CallRefused {
		act.Status = investigation.ActionNotRun
		act.Note = clip.String("approved, but it did not run: "+out.Error, maxActionNote)
		r.emit(investigation.Event{Kind: investigation.EventApprovalDecided, Step: act.Step, Tool: act.Tool, CallID: act.CallID, Text: "not run: " + act.Note})
		return out
	}
	return r.unknownAction(act, out.Error)
}

// unknownAction marks act as of unknown outcome after why, and is the
// result the model reads.
func (r *run) unknownAction(act *investigation.Action, why string) activities.ToolOutput {
	act.Status = investigation.ActionUnknown
	act.Note = clip.String("approved, and the action may or may not have run ("+why+"): check before asking for it again", maxActionNote)
	r.emit(investigation.Event{Kind: investigation.EventNote, Step: act.Step, Tool: act.Tool, CallID: act.CallID, Text: act.CallID + ": " + act.Note})
	result, _ := json.Marshal(map[string]any{"performed": "unknown", "outcome": act.Status, "reason": why, "note": actionNote(act)})
	return activities.ToolOutput{OK: true, Inline: string(result), Bytes: len(result), Unperformed: true}
}

// actionNote tells the model what an action that did not run means.
func actionNote(a *investigation.Action) string {
	switch a.Status {
	case investigation.ActionExpired:
		return "The analyst did not decide on this action in time, so it was NOT performed. Do not call it again; report that it is still to be decided."
	case investigation.ActionUnknown:
		return "The analyst approved this action, but its only attempt failed in a way that does not say whether it took effect: it may or may not have run, and it was not retried. Check its effect (with a read tool, if one can) before asking for it again; report that its outcome is unknown."
	case investigation.ActionNotRun:
		return "The analyst approved this action, but the investigation was stopped before it started, so it was NOT performed. Do not call it again; report that it did not run."
	}
	return "The analyst denied this action (or the investigation stopped), so it was NOT performed. Do not call it again; report the denial and its reason."
}

// action returns the pending action with this call ID. An empty ID names
// none, for an approval as for a denial: a decision without one, arriving
// late (meant for an action that expired), would decide an action the
// analyst never saw, and a denial tells the model not to ask again. No
// gate: the validators do not run in replay, and no recorded history holds
// an approve_call or deny_call signal (mcp, mcp-changed: one update, with
// its ID); no release has run the action path.
func (r *run) action(id string) (*investigation.Action, error) {
	if id == "" {
		return nil, errors.New("name the action by its call ID (starter status lists the actions waiting)")
	}
	var decided *investigation.Action
	for _, a := range r.Actions {
		switch {
		case a.CallID != id:
		case a.Status == investigation.ActionPending:
			return a, nil
		default:
			decided = a
		}
	}
	if decided != nil {
		return nil, fmt.Errorf("action %q is no longer waiting for approval: %s", id, decidedText(decided))
	}
	return nil, fmt.Errorf("no action %q is waiting for approval", id)
}

// decidedText says what became of an action no longer waiting, so that a
// decision arriving late is told it expired or was decided, not that the
// call ID is unknown.
func decidedText(a *investigation.Action) string {
	switch a.Status {
	case investigation.ActionExpired:
		return fmt.Sprintf("it expired (%s), so it did not run", a.Note)
	case investigation.ActionDenied:
		return "it was denied, so it did not run"
	case investigation.ActionNotRun:
		return "it was approved, but it did not run"
	case investigation.ActionUnknown:
		return "it was approved, and whether it ran is unknown (starter status shows the action)"
	}
	return "it was approved already"
}

func (r *run) checkApproveCall(d investigation.CallDecision) error {
	_, err := r.action(strings.TrimSpace(d.CallID))
	return err
}

// checkApproveCallUpdate is the approve_call update's validator: after a
// stop (one taken earlier in the same workflow task too) no action starts,
// so the approval is refused. No gate: validators do not run in replay.
// The signal shares checkApproveCall: signals replay, and one approving
// with the stop is handled where the action would start (actionOutcomes).
func (r *run) checkApproveCallUpdate(d investigation.CallDecision) error {
	if r.Steering.StopReason != "" {
		return errors.New("the investigation was stopped: no action starts after a stop")
	}
	return r.checkApproveCall(d)
}

func (r *run) checkDenyCall(d investigation.CallDecision) error {
	if err := r.checkApproveCall(d); err != nil {
		return err
	}
	if len(d.Reason) > maxInputBytes {
		return fmt.Errorf("the reason is longer than %d bytes", maxInputBytes)
	}
	return nil
}

func (r *run) approveCall(d investigation.CallDecision) investigation.Ack {
	a, err := r.action(strings.TrimSpace(d.CallID))
	if err != nil {
		return investigation.Ack{Message: err.Error()} // validated: reached by no history (action)
	}
	a.Status = investigation.ActionApproved
	seq := r.emit(investigation.Event{Kind: investigation.EventApprovalDecided, Step: a.Step, Tool: a.Tool, CallID: a.CallID, Text: "approved"})
	return investigation.Ack{Seq: seq, Message: fmt.Sprintf("%s approved: the call runs now", a.CallID)}
}

func (r *run) denyCall(d investigation.CallDecision) investigation.Ack {
	a, err := r.action(strings.TrimSpace(d.CallID))
	if err != nil {
		return investigation.Ack{Message: err.Error()}
	}
	a.Status, a.Note = investigation.ActionDenied, clip.String(cmp.Or(strings.TrimSpace(d.Reason), "no reason given"), maxActionNote)
	seq := r.emit(investigation.Event{Kind: investigation.EventApprovalDecided, Step: a.Step, Tool: a.Tool, CallID: a.CallID, Text: "denied: " + a.Note})
	return investigation.Ack{Seq: seq, Message: fmt.Sprintf("%s denied: the step reads the denial as the call's result", a.CallID)}
}

// actions is a copy of the actions, for status, result and conclusion.
func (s *State) actions() []investigation.Action {
	out := make([]investigation.Action, len(s.Actions))
	for i, a := range s.Actions {
		out[i] = *a
	}
	return out
}

// signalDecision reads an approve_call or deny_call signal's payload: a
// call ID as a string, or {"call_id": ..., "reason": ...}.
func signalDecision(v any) (investigation.CallDecision, error) {
	switch x := v.(type) {
	case string:
		return investigation.CallDecision{CallID: x}, nil
	case map[string]any:
		id, _ := x["call_id"].(string)
		reason, _ := x["reason"].(string)
		return investigation.CallDecision{CallID: id, Reason: reason}, nil
	case nil:
		return investigation.CallDecision{}, nil
	}
	return investigation.CallDecision{}, errors.New(`its payload must be a call ID or {"call_id": "...", "reason": "..."}`)
}

// requestApproval tells the intake's Slack channel that an action waits,
// for an investigation the intake started with Slack delivery on. Best
// effort, in the background: the wait does not depend on it.
func (r *run) requestApproval(ctx workflow.Context, act *investigation.Action) {
	in := r.Input.Intake
	if in == nil || !in.Delivery.Slack {
		return
	}
	req := activities.ApprovalInput{WorkflowID: r.id, AlertID: r.Input.AlertID, CallID: act.CallID, Tool: act.Tool, Args: act.Args, Reason: act.Reason}
	r.background(ctx, func(ctx workflow.Context) {
		var out activities.DeliveryOutput
		if err := workflow.ExecuteActivity(deliveryOptions(ctx, "ask Slack to approve "+act.CallID), ia.RequestApproval, req).Get(ctx, &out); err != nil {
			r.emit(investigation.Event{Kind: investigation.EventNote, Text: "the approval request could not be posted to Slack: " + message(err)})
		}
	})
}
