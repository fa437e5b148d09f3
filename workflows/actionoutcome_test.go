package workflows

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
)

// notPerformed runs the approved block_ip action of mcpPlan with the tool
// answering out, and returns the result and the events.
func notPerformed(t *testing.T, out activities.ToolOutput) (investigation.Result, []investigation.Event, *harness) {
	h := newHarness(t)
	h.onPlan(mcpPlan(), nil)
	h.onTurn(blockTurn)
	h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
		if in.Call.Name == "response.block_ip" {
			out.Key = in.Key
			return out, nil
		}
		return okTool(in)
	})
	h.onReflect(noChange)
	h.update(time.Minute, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "t1-step_1-i1-c2"})
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	return res, h.events(t), h
}

// An approved action the server did not answer in time (or answered too
// largely to read, or whose outcome the result does not say) may have
// acted: it is reported unknown, never "approved", and the model reads so.
func TestApprovedActionNotAnsweredIsUnknown(t *testing.T) {
	for name, out := range map[string]activities.ToolOutput{
		"timeout":        {OK: false, Error: "the MCP server response did not answer within 30s", Outcome: activities.CallUnknown},
		"outcome unsaid": {OK: false, Error: "the MCP server response did not answer within 30s"},
	} {
		t.Run(name, func(t *testing.T) {
			res, evs, h := notPerformed(t, out)
			require.Len(t, res.Actions, 1)
			require.Equal(t, investigation.ActionUnknown, res.Actions[0].Status)
			require.Contains(t, res.Actions[0].Note, "may or may not have run (the MCP server response did not answer within 30s)")
			require.Equal(t, res.Actions, h.conclude[len(h.conclude)-1].Actions, "the conclusion lists the outcome")
			require.Contains(t, notes(evs), "t1-step_1-i1-c2: "+res.Actions[0].Note)
			require.Contains(t, h.turns[1].Transcript[2].Inline, `"performed":"unknown"`)
		})
	}
}

// An approved action the server refused unread, or that the worker
// refused (arguments not the ones approved), did not run:
// not_run with the error as note, an approval_decided event, and the model
// reads the error.
func TestApprovedActionRefusedDidNotRun(t *testing.T) {
	for _, why := range []string{
		`the MCP server response refused the call: unknown tool "block_ip"`,
		"response.block_ip did not run: its arguments are not the ones the analyst approved",
	} {
		t.Run(why, func(t *testing.T) {
			res, evs, h := notPerformed(t, activities.ToolOutput{OK: false, Error: why, Outcome: activities.CallRefused})
			require.Len(t, res.Actions, 1)
			require.Equal(t, investigation.ActionNotRun, res.Actions[0].Status)
			require.Equal(t, "approved, but it did not run: "+why, res.Actions[0].Note)
			require.Equal(t, res.Actions, h.conclude[len(h.conclude)-1].Actions)
			var decided []string
			for _, e := range evs {
				if e.Kind == investigation.EventApprovalDecided {
					decided = append(decided, e.Text)
				}
			}
			require.Equal(t, []string{"approved", "not run: " + res.Actions[0].Note}, decided)
			read := h.turns[1].Transcript[2]
			require.Equal(t, "t1-step_1-i1-c2", read.Key, "the model reads the error the call stored")
			require.Empty(t, read.Inline)
		})
	}
}

// An approval signalled in the workflow task that took a stop starts no
// action: it is not_run, "the investigation was stopped"; an approve_call
// update after a stop is refused.
func TestNoActionStartsAfterAStop(t *testing.T) {
	t.Run("signals", func(t *testing.T) {
		h := newHarness(t)
		h.onPlan(mcpPlan(), nil)
		h.onTurn(blockTurn)
		h.onTool(okTool)
		h.onReflect(noChange)
		h.env.RegisterDelayedCallback(func() {
			// One workflow task takes both, as a worker back from a restart.
			h.env.SignalWorkflowSkippingWorkflowTask(investigation.UpdateStop, "enough")
			h.env.SignalWorkflow(investigation.UpdateApproveCall, "t1-step_1-i1-c2")
		}, time.Minute)
		res, err := h.run(t, investigation.Input{AlertID: "a1"})
		require.NoError(t, err)
		for _, in := range h.tools {
			require.NotEqual(t, "response.block_ip", in.Call.Name, "the action ran after the stop")
		}
		require.Len(t, res.Actions, 1)
		require.Equal(t, investigation.ActionNotRun, res.Actions[0].Status)
		require.Equal(t, "approved, but it did not run: the investigation was stopped first (stopped by the analyst: enough)", res.Actions[0].Note)
	})
	t.Run("updates", func(t *testing.T) {
		h := newHarness(t)
		h.onPlan(mcpPlan(), nil)
		h.onTurn(blockTurn)
		h.onTool(okTool)
		h.onReflect(noChange)
		h.update(time.Minute, investigation.UpdateStop, "enough")
		approve := h.update(time.Minute, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "t1-step_1-i1-c2"})
		res, err := h.run(t, investigation.Input{AlertID: "a1"})
		require.NoError(t, err)
		require.Len(t, h.tools, 1, "only the lookup ran")
		require.ErrorContains(t, approve.rejected, "the investigation was stopped")
		require.Equal(t, investigation.ActionDenied, res.Actions[0].Status)
	})
}

// actionOutcomePaths says whether h shows one of the paths of the
// action-outcomes fixtures; known is false for any other path.
func actionOutcomePaths(h *historypb.History, path string) (ok, known bool) {
	// The stop signal and the events after it.
	var afterStop []*historypb.HistoryEvent
	for i, e := range h.Events {
		if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.UpdateStop {
			afterStop = h.Events[i+1:]
			break
		}
	}
	conclude := func(sub string) bool {
		for _, e := range h.Events {
			if a := e.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "Conclude" &&
				bytes.Contains(a.GetInput().GetPayloads()[0].GetData(), []byte(sub)) {
				return true
			}
		}
		return false
	}
	marker := hasVersionMarker(h, "action-outcomes")
	switch path {
	case "approved action refused by the server":
		return slices.ContainsFunc(h.Events, func(e *historypb.HistoryEvent) bool {
			out := e.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()
			return completedActivity(h, e) == "CallTool" && len(out) > 0 &&
				bytes.Contains(out[0].GetData(), []byte(`"ok":false`)) && bytes.Contains(out[0].GetData(), []byte(`"outcome":"refused"`))
		}), true
	case "approval signalled with the stop":
		// No workflow task started between the two signals: one took both.
		for _, e := range afterStop {
			switch {
			case e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				return false, true
			case e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.UpdateApproveCall:
				return true, true
			}
		}
		return false, true
	case "refused action not run":
		return marker && conclude(`"status":"not_run"`) && !conclude(`"status":"approved"`), true
	case "refused action reported approved":
		return !marker && conclude(`"status":"approved"`), true
	case "no action after the stop":
		return afterStop != nil && scheduled(afterStop, "CallTool") == 0 && marker, true
	case "action started after the stop":
		return scheduled(afterStop, "CallTool") == 1 && !marker, true
	}
	return false, false
}
