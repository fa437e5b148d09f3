package workflows

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// blockAgainPlan is mcpPlan with a second step that acts with the same tool.
func blockAgainPlan() activities.PlanOutput {
	p := mcpPlan()
	p.Plan.Steps = append(p.Plan.Steps, plan.Step{ID: "step_2", Description: "Block it again after a re-check",
		Tools: []string{"response.block_ip"}, Expected: "blocked", Status: plan.Pending, DependsOn: []string{"step_1"}})
	return p
}

// The model asks again for an action that already ran (a later step, or
// a follow-up after someone undid it): it is not served from the earlier
// result, unasked and unrun; the analyst decides it again and it runs
// again. Two identical actions in one turn are two decisions too.
func TestRepeatedActionAsksAgain(t *testing.T) {
	t.Run("later step", func(t *testing.T) {
		h := newHarness(t)
		h.onPlan(blockAgainPlan(), nil)
		h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
			if len(in.Transcript) == 0 {
				return activities.TurnOutput{Calls: []toolcall.Call{
					{ID: "c1", Name: "response.block_ip", Args: map[string]any{"ip": "198.51.100.23"}},
				}}, nil
			}
			return activities.TurnOutput{Text: "done"}, nil
		})
		h.onTool(okTool)
		h.onReflect(noChange)
		h.update(time.Hour, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "t1-step_1-i1-c1"})
		second := h.update(2*time.Hour, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "t1-step_2-i1-c1"})
		res, err := h.run(t, investigation.Input{AlertID: "a1"})
		require.NoError(t, err)

		require.Len(t, res.Actions, 2, "the repeated action is an action of its own")
		require.NoError(t, second.rejected, "the analyst was asked about the repeated action")
		for _, act := range res.Actions {
			require.Equal(t, investigation.ActionApproved, act.Status)
		}
		require.Len(t, h.tools, 2, "each approval ran the action once")
		requested := 0
		for _, e := range h.events(t) {
			require.NotContains(t, e.Text, "served from the identical earlier call")
			if e.Kind == investigation.EventApprovalRequested {
				requested++
			}
		}
		require.Equal(t, 2, requested)
	})
	t.Run("same turn", func(t *testing.T) {
		h := newHarness(t)
		h.onPlan(mcpPlan(), nil)
		h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
			if len(in.Transcript) == 0 {
				return activities.TurnOutput{Calls: []toolcall.Call{
					{ID: "c1", Name: "response.block_ip", Args: map[string]any{"ip": "198.51.100.23"}},
					{ID: "c2", Name: "response.block_ip", Args: map[string]any{"ip": "198.51.100.23"}},
				}}, nil
			}
			return activities.TurnOutput{Text: "done"}, nil
		})
		h.onTool(okTool)
		h.onReflect(noChange)
		h.update(time.Hour, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "t1-step_1-i1-c1"})
		h.update(time.Hour, investigation.UpdateDenyCall, investigation.CallDecision{CallID: "t1-step_1-i1-c2", Reason: "once is enough"})
		res, err := h.run(t, investigation.Input{AlertID: "a1"})
		require.NoError(t, err)
		require.Len(t, res.Actions, 2)
		require.Equal(t, investigation.ActionApproved, res.Actions[0].Status)
		require.Equal(t, investigation.ActionDenied, res.Actions[1].Status)
		require.Len(t, h.tools, 1)
		require.Contains(t, h.turns[1].Transcript[2].Inline, `"outcome":"denied"`, "the denied twin reads its own outcome")
	})
}

// One approval runs an action at most once: a failure after the attempt
// began (a broken connection after the server acted, a lost worker) is
// not retried, and the model and the analyst read that the action may or
// may not have run. A failure known to come before the call (the server
// not connected) says it did not run: a status of its own (not_run) and
// an event, never "approved" as if performed.
func TestApprovedActionRunsAtMostOnce(t *testing.T) {
	for _, c := range []struct {
		name   string
		fail   error
		status string
		model  string
	}{
		{"connection lost", errors.New("read tcp: connection reset by peer"), investigation.ActionUnknown, "may or may not have run"},
		{"server down", temporal.NewApplicationError(`MCP server "response" is not connected on this worker (EOF)`, activities.ErrMCPNotConnected),
			investigation.ActionNotRun, "did not run"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.onPlan(mcpPlan(), nil)
			h.onTurn(blockTurn)
			h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
				if in.Call.Name == "response.block_ip" {
					return activities.ToolOutput{}, c.fail // an attempt after it would have succeeded
				}
				return okTool(in)
			})
			h.onReflect(noChange)
			h.update(time.Hour, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "t1-step_1-i1-c2"})
			res, err := h.run(t, investigation.Input{AlertID: "a1"})
			require.NoError(t, err)

			blocks := 0
			for _, in := range h.tools {
				if in.Call.Name == "response.block_ip" {
					blocks++
				}
			}
			require.Equal(t, 1, blocks, "one approval, one attempt")
			require.Len(t, res.Actions, 1)
			require.Equal(t, c.status, res.Actions[0].Status)
			read := h.turns[1].Transcript[2]
			require.Contains(t, read.Inline+read.Error, c.model)
			if c.status == investigation.ActionUnknown {
				require.Contains(t, read.Inline, "Check its effect")
				require.Contains(t, res.Actions[0].Note, "may or may not have run")
				require.Equal(t, res.Actions, h.conclude[len(h.conclude)-1].Actions, "the conclusion says so")
			} else {
				require.Contains(t, res.Actions[0].Note, "did not run")
				said := false
				for _, e := range h.events(t) {
					said = said || e.Kind == investigation.EventApprovalDecided && strings.HasPrefix(e.Text, "not run: ")
				}
				require.True(t, said, "the follower reads that the approved action did not run")
				require.Equal(t, res.Actions, h.conclude[len(h.conclude)-1].Actions, "the conclusion says so")
			}
		})
	}
}

// An approval names its action: one without a call ID (a late approval
// meant for an action that expired) approves nothing, even when a single
// action waits; nor does a denial without one.
func TestApprovalWithoutCallIDIsRefused(t *testing.T) {
	h := newHarness(t)
	h.onPlan(mcpPlan(), nil)
	h.onTurn(blockTurn)
	h.onTool(okTool)
	h.onReflect(noChange)
	byUpdate := h.update(time.Hour, investigation.UpdateApproveCall, investigation.CallDecision{})
	h.signal(90*time.Minute, investigation.UpdateApproveCall, "")
	h.signal(100*time.Minute, investigation.UpdateApproveCall, map[string]any{"call_id": " "})
	denied := h.update(110*time.Minute, investigation.UpdateDenyCall, investigation.CallDecision{Reason: "no"})
	res, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{ApprovalTimeout: investigation.Duration(3 * time.Hour)}})
	require.NoError(t, err)

	require.ErrorContains(t, byUpdate.rejected, "call ID")
	require.ErrorContains(t, denied.rejected, "call ID")
	require.Len(t, res.Actions, 1)
	require.Equal(t, investigation.ActionExpired, res.Actions[0].Status, "nothing decided the action")
	for _, in := range h.tools {
		require.NotEqual(t, "response.block_ip", in.Call.Name, "the action never ran")
	}
}

// The analyst sees an action's arguments with every hidden character
// escaped (6 bytes each): arguments within the bound as sent but over it
// as shown would reach Slack's 3,000-character section clipped, a run of
// \u200b where the address should be. They are refused, like arguments
// too long as sent, and the analyst is never asked.
func TestActionArgumentsOverTheBoundAsShownAreRefused(t *testing.T) {
	args := map[string]any{"a": strings.Repeat("\u200b", 600), "ip": "203.0.113.9"}
	require.LessOrEqual(t, len(activities.ActionArgs(args)), maxActionArgs, "within the bound as sent")
	h := newHarness(t)
	h.onPlan(mcpPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{ID: "c1", Name: "response.block_ip", Args: args}}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Empty(t, res.Actions, "the analyst was not asked")
	require.Empty(t, h.tools)
	read := h.turns[1].Transcript[1]
	require.Contains(t, read.Error, "too long for the analyst to see whole")
	for _, e := range h.events(t) {
		require.NotEqual(t, investigation.EventApprovalRequested, e.Kind)
	}
}
