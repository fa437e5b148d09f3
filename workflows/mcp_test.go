package workflows

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// mcpPlan is a plan with one step that reads with an MCP tool and asks to
// act with another, as the plan recorded them.
func mcpPlan() activities.PlanOutput {
	read := &toolcall.Declared{Description: "looks up a host", Parameters: json.RawMessage(`{"type":"OBJECT","properties":{"host":{"type":"STRING"}}}`)}
	act := &toolcall.Declared{Description: "blocks an IP", Parameters: json.RawMessage(`{"type":"OBJECT","properties":{"ip":{"type":"STRING"}}}`)}
	tools := append([]toolcall.Tool{}, toolNames...)
	tools = append(tools,
		toolcall.Tool{Name: "response.lookup_host", Kind: toolcall.Activity, Declared: read},
		toolcall.Tool{Name: "response.block_ip", Kind: toolcall.Activity, Declared: act, Acts: true})
	return activities.PlanOutput{Tools: tools, Plan: plan.Plan{Objective: "Contain the brute force", Steps: []plan.Step{
		{ID: "step_1", Description: "Block 198.51.100.23", Tools: []string{"response.lookup_host", "response.block_ip"}, Expected: "blocked", Status: plan.Pending},
	}}, Usage: investigation.Usage{Calls: 1}}
}

// blockTurn asks, in its first turn, to look up the host and block the IP.
func blockTurn(in activities.TurnInput) (activities.TurnOutput, error) {
	if len(in.Transcript) == 0 {
		return activities.TurnOutput{Calls: []toolcall.Call{
			{ID: "c1", Name: "response.lookup_host", Args: map[string]any{"host": "web-1"}},
			{ID: "c2", Name: "response.block_ip", Args: map[string]any{"ip": "198.51.100.23"}},
		}}, nil
	}
	return activities.TurnOutput{Text: "done"}, nil
}

// An action waits for approve_call, deny_call or its timeout; the read call
// beside it runs at once; the wait does not count against the time budget;
// the conclusion and the result list the action. Step turns get the
// declarations the plan recorded.
func TestActionWaitsForApproval(t *testing.T) {
	for _, c := range []struct {
		name, decide string
		want         string
		ran          bool
	}{
		{"approved", investigation.UpdateApproveCall, investigation.ActionApproved, true},
		{"denied", investigation.UpdateDenyCall, investigation.ActionDenied, false},
		{"expired", "", investigation.ActionExpired, false},
		{"stopped", investigation.UpdateStop, investigation.ActionDenied, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.onPlan(mcpPlan(), nil)
			h.onTurn(blockTurn)
			h.onTool(okTool)
			h.onReflect(noChange)
			var st investigation.Status
			h.env.RegisterDelayedCallback(func() { st = h.status(t) }, time.Hour)
			wrong := h.update(90*time.Minute, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "nope"})
			switch c.decide {
			case investigation.UpdateApproveCall:
				h.update(2*time.Hour, c.decide, investigation.CallDecision{CallID: "t1-step_1-i1-c2"})
			case investigation.UpdateDenyCall:
				h.update(2*time.Hour, c.decide, investigation.CallDecision{CallID: "t1-step_1-i1-c2", Reason: "CEO's laptop"})
			case investigation.UpdateStop:
				h.update(2*time.Hour, c.decide, "enough")
			}
			res, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{
				ApprovalTimeout: investigation.Duration(3 * time.Hour), TimeBudget: investigation.Duration(30 * time.Minute)}})
			require.NoError(t, err)

			require.Equal(t, investigation.PhaseAwaitingCallApproval, st.Phase)
			require.Len(t, st.Actions, 1)
			require.Equal(t, investigation.Action{CallID: "t1-step_1-i1-c2", Tool: "response.block_ip", Args: `{"ip":"198.51.100.23"}`,
				Step: "step_1", Reason: "Block 198.51.100.23", Status: investigation.ActionPending, Turn: 1}, st.Actions[0])
			require.ErrorContains(t, wrong.rejected, `no action "nope" is waiting`)

			var ran []string
			for _, in := range h.tools {
				ran = append(ran, in.Call.Name)
			}
			if c.ran {
				require.ElementsMatch(t, []string{"response.lookup_host", "response.block_ip"}, ran)
			} else {
				require.Equal(t, []string{"response.lookup_host"}, ran, "the action never ran")
			}
			require.Len(t, res.Actions, 1)
			require.Equal(t, c.want, res.Actions[0].Status)
			require.Equal(t, res.Actions, h.conclude[len(h.conclude)-1].Actions, "the conclusion lists the action")
			if c.name == "stopped" {
				return // the step answered from what it had: no second turn
			}
			require.NotContains(t, h.conclude[0].EndedEarly, "time budget", "waiting does not spend the time budget")
			second := h.turns[1]
			require.Len(t, second.Declared, 2, "the turn declares the MCP tools the plan recorded")
			require.Equal(t, "looks up a host", second.Declared[0].Declared.Description)
			require.True(t, second.Declared[1].Acts)
			if !c.ran {
				require.Contains(t, second.Transcript[2].Inline, `"performed":false`)
				require.Contains(t, second.Transcript[2].Inline, `"outcome":"`+c.want+`"`)
			}
			if c.name == "denied" {
				require.Equal(t, "CEO's laptop", res.Actions[0].Note)
			}
			kinds := map[investigation.EventKind]int{}
			for _, e := range h.events(t) {
				kinds[e.Kind]++
			}
			require.Equal(t, 1, kinds[investigation.EventApprovalRequested])
			require.Equal(t, 1, kinds[investigation.EventApprovalDecided])
		})
	}
}

// The signals carry the same decisions.
func TestActionDecidedBySignal(t *testing.T) {
	h := newHarness(t)
	h.onPlan(mcpPlan(), nil)
	h.onTurn(blockTurn)
	h.onTool(okTool)
	h.onReflect(noChange)
	h.signal(time.Minute, investigation.UpdateDenyCall, map[string]any{"call_id": "t1-step_1-i1-c2", "reason": "no"})
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Equal(t, investigation.ActionDenied, res.Actions[0].Status)
	require.Equal(t, "no", res.Actions[0].Note)
}

// An action whose arguments come from another call (ref:) does not run:
// the analyst would approve a value they cannot see.
func TestActionRefusesRefs(t *testing.T) {
	h := newHarness(t)
	h.onPlan(mcpPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{ID: "c1", Name: "response.lookup_host", Args: map[string]any{"host": "web-1"}},
				{ID: "c2", Name: "response.block_ip", Args: map[string]any{"ip": "ref:c1.ips.0"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Empty(t, res.Actions)
	require.Len(t, h.tools, 1)
	require.Contains(t, h.turns[1].Transcript[2].Error, "must be written out for the analyst to approve")
}

// An investigation the intake started with Slack delivery asks Slack to
// approve its action, with what the analyst needs to decide.
func TestActionRequestGoesToSlack(t *testing.T) {
	h := newHarness(t)
	h.env.RegisterActivity(&activities.Intake{})
	var sig signals
	sig.on(h.env)
	h.onPlan(mcpPlan(), nil)
	h.onTurn(blockTurn)
	h.onTool(okTool)
	h.onReflect(noChange)
	var asked []activities.ApprovalInput
	h.env.OnActivity(ia.RequestApproval, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ApprovalInput) (activities.DeliveryOutput, error) {
		asked = append(asked, in)
		return activities.DeliveryOutput{}, nil
	})
	h.env.OnActivity(ia.DeliverSlack, mock.Anything, mock.Anything).Return(activities.DeliveryOutput{}, nil)
	h.update(time.Hour, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "t1-step_1-i1-c2"})
	_, err := h.run(t, investigation.Input{AlertID: "guardduty-0", IdleTimeout: investigation.Duration(time.Minute), Intake: &investigation.IntakeInput{
		Identity: "guardduty:1:f", Admission: "intake-admission-q", Delivery: investigation.Delivery{Slack: true}}})
	require.NoError(t, err)
	require.Len(t, asked, 1)
	require.Equal(t, activities.ApprovalInput{WorkflowID: asked[0].WorkflowID, AlertID: "guardduty-0", CallID: "t1-step_1-i1-c2",
		Tool: "response.block_ip", Args: `{"ip":"198.51.100.23"}`, Reason: "Block 198.51.100.23"}, asked[0])
}

// A decision on an action that no longer waits says what became of it: a
// late approval of an expired action was told only that no action of that
// call ID was waiting, as for a mistyped ID.
func TestLateDecisionSaysWhatBecameOfTheAction(t *testing.T) {
	for _, c := range []struct {
		name, first string
		want        string
	}{
		{"expired", "", `action "t1-step_1-i1-c2" is no longer waiting for approval: it expired (no decision within 1h), so it did not run`},
		{"denied", investigation.UpdateDenyCall, `action "t1-step_1-i1-c2" is no longer waiting for approval: it was denied, so it did not run`},
		{"approved", investigation.UpdateApproveCall, `action "t1-step_1-i1-c2" is no longer waiting for approval: it was approved already`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.onPlan(mcpPlan(), nil)
			h.onTurn(blockTurn)
			h.onTool(okTool)
			h.onReflect(noChange)
			if c.first != "" {
				h.update(30*time.Minute, c.first, investigation.CallDecision{CallID: "t1-step_1-i1-c2"})
			}
			late := h.update(90*time.Minute, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "t1-step_1-i1-c2"})
			lateDeny := h.update(91*time.Minute, investigation.UpdateDenyCall, investigation.CallDecision{CallID: "t1-step_1-i1-c2", Reason: "r"})
			unknown := h.update(92*time.Minute, investigation.UpdateApproveCall, investigation.CallDecision{CallID: "t1-step_1-i1-c9"})
			_, err := h.run(t, investigation.Input{AlertID: "a1", IdleTimeout: investigation.Duration(3 * time.Hour),
				Limits: investigation.Limits{ApprovalTimeout: investigation.Duration(time.Hour)}})
			require.NoError(t, err)
			require.EqualError(t, late.rejected, c.want)
			require.EqualError(t, lateDeny.rejected, c.want)
			require.EqualError(t, unknown.rejected, `no action "t1-step_1-i1-c9" is waiting for approval`)
		})
	}
}
