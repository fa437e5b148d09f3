package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// A threat-intelligence call runs as a regular activity on its provider's
// task queue (where Temporal holds the provider's rate limit), and a store
// read as a local activity on the investigation's own.
func TestProviderCallsRunOnTheirQueue(t *testing.T) {
	h := newHarness(t)
	tools := []toolcall.Tool{{Name: "ask_user", Kind: toolcall.Analyst}, {Name: "get_alert", Kind: toolcall.LocalActivity},
		{Name: "virustotal_lookup", Kind: toolcall.Activity, TaskQueue: "investigations-intel-virustotal"}}
	h.onPlan(activities.PlanOutput{Tools: tools, Plan: plan.Plan{Objective: "o", Steps: []plan.Step{
		{ID: "step_1", Description: "Look it up", Tools: []string{"get_alert", "virustotal_lookup"}, Status: plan.Pending},
	}}}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{ID: "c1", Name: "get_alert", Args: map[string]any{"id": "a1"}},
				{ID: "c2", Name: "virustotal_lookup", Args: map[string]any{"resource": "198.51.100.23"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	type ran struct {
		queue string
		local bool
	}
	got := map[string]ran{}
	h.env.OnActivity(a.CallTool, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.ToolInput) (activities.ToolOutput, error) {
		info := activity.GetInfo(ctx)
		h.mu.Lock()
		got[in.Call.Name] = ran{info.TaskQueue, info.IsLocalActivity}
		h.mu.Unlock()
		return activities.ToolOutput{Key: in.Key, OK: true}, nil
	})
	h.onReflect(noChange)
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Equal(t, ran{queue: "investigations-intel-virustotal"}, got["virustotal_lookup"])
	require.True(t, got["get_alert"].local)
}

// A provider's queue holds its calls to the provider's rate limit (4 a
// minute for VirusTotal), so in a burst a call may wait there for minutes
// before it starts: the wait is bounded by the exchange's time budget, not
// by the 3 minutes (retry budget and one attempt) of a call that runs at
// once. A started attempt keeps its own bounds, and retries are counted.
func TestProviderCallsMayWaitInTheirQueueForTheTimeBudget(t *testing.T) {
	h := newHarness(t)
	tools := []toolcall.Tool{{Name: "get_alert", Kind: toolcall.Activity},
		{Name: "virustotal_lookup", Kind: toolcall.Activity, TaskQueue: "investigations-intel-virustotal"}}
	h.onPlan(activities.PlanOutput{Tools: tools, Plan: plan.Plan{Objective: "o", Steps: []plan.Step{
		{ID: "step_1", Description: "Look it up", Tools: []string{"get_alert", "virustotal_lookup"}, Status: plan.Pending},
	}}}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{ID: "c1", Name: "get_alert", Args: map[string]any{"id": "a1"}},
				{ID: "c2", Name: "virustotal_lookup", Args: map[string]any{"resource": "198.51.100.23"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	got := map[string]activity.Info{}
	h.env.OnActivity(a.CallTool, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.ToolInput) (activities.ToolOutput, error) {
		h.mu.Lock()
		got[in.Call.Name] = activity.GetInfo(ctx)
		h.mu.Unlock()
		return activities.ToolOutput{Key: in.Key, OK: true}, nil
	})
	h.onReflect(noChange)
	_, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{TimeBudget: investigation.Duration(30 * time.Minute)}})
	require.NoError(t, err)
	vt, own := got["virustotal_lookup"], got["get_alert"]
	require.Greater(t, vt.ScheduleToCloseTimeout, 29*time.Minute, "queue time up to the exchange's deadline")
	require.LessOrEqual(t, vt.ScheduleToCloseTimeout, 30*time.Minute, "never past it")
	require.Equal(t, defaultToolAttempt, vt.StartToCloseTimeout, "an attempt keeps its bound")
	require.Equal(t, heartbeatTimeout, vt.HeartbeatTimeout)
	require.Equal(t, toolRetryBudget+defaultToolAttempt, own.ScheduleToCloseTimeout, "a call on the investigation's queue keeps its retry budget")
}
