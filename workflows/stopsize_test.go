package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// stoppableEightSteps is a harness whose first step's tool call hangs, so
// a stop arrives while seven steps are pending.
func stoppableEightSteps(t *testing.T) *harness {
	h := newHarness(t)
	out := twoStepPlan()
	for i := 3; i <= 8; i++ {
		out.Plan.Steps = append(out.Plan.Steps, plan.Step{ID: fmt.Sprintf("step_%d", i), Description: fmt.Sprintf("step number %d distinct %d", i, i*7), Tools: []string{"get_alert"}, Status: plan.Pending})
	}
	h.onPlan(out, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
	})
	h.env.OnActivity(a.CallTool, mock.Anything, mock.Anything).After(time.Hour).Return(activities.ToolOutput{OK: true}, nil)
	return h
}

// A stop reason is held to the bound of every other input: an update
// over it is refused with one sentence (and the investigation runs on).
func TestStopReasonOverTheBoundIsRefused(t *testing.T) {
	h := stoppableEightSteps(t)
	stop := h.update(time.Minute, investigation.UpdateStop, strings.Repeat("x", 500<<10))
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.EqualError(t, stop.rejected, fmt.Sprintf("the stop reason is longer than %d bytes", maxInputBytes))
}

// A stop signal cannot be refused for its length: its reason is clipped,
// and said once, not copied into every pending step's note.
func TestStopSignalReasonIsClippedAndSaidOnce(t *testing.T) {
	h := stoppableEightSteps(t)
	h.signal(time.Minute, investigation.UpdateStop, strings.Repeat("x", 500<<10))
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, h.conclude, 1)
	require.LessOrEqual(t, len(h.conclude[0].EndedEarly), maxInputBytes+len("stopped by the analyst: "))
	require.True(t, strings.HasPrefix(h.conclude[0].EndedEarly, "stopped by the analyst: xxx"), h.conclude[0].EndedEarly[:40])
	skipped := 0
	for _, s := range res.Plan.Steps {
		if s.Status == plan.Skipped {
			skipped++
			require.Equal(t, "not run: the investigation was stopped", s.Note)
		}
	}
	require.Equal(t, 7, skipped)
	raw, _ := json.Marshal(res)
	require.Less(t, len(raw), 64<<10, "the result holds the reason a bounded number of times")
}

// A stop that comes between steps (here while a step is reflected on) ends
// the exchange with the reason said once too.
func TestStopBetweenStepsIsSaidOnce(t *testing.T) {
	h := newHarness(t)
	out := twoStepPlan()
	for i := 3; i <= 8; i++ {
		out.Plan.Steps = append(out.Plan.Steps, plan.Step{ID: fmt.Sprintf("step_%d", i), Description: fmt.Sprintf("step number %d distinct %d", i, i*7), Tools: []string{"get_alert"}, Status: plan.Pending})
	}
	h.onPlan(out, nil)
	h.onTurn(func(activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.env.OnActivity(a.Reflect, mock.Anything, mock.Anything).After(time.Minute).Return(activities.Reflection{}, nil)
	reason := strings.Repeat("x", maxInputBytes-10)
	h.update(30*time.Second, investigation.UpdateStop, reason)
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	skipped := 0
	for _, s := range res.Plan.Steps {
		if s.Status == plan.Skipped {
			skipped++
			require.Equal(t, "not run: the investigation was stopped", s.Note)
		}
	}
	require.Positive(t, skipped)
}

// A model turn refused while the analyst's stop waits for it keeps the
// stop: the step answers as it is and nothing is reflected on it.
func TestStopDuringARefusedTurnStillStops(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onSlowTurn(time.Minute, func(activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{}, temporal.NewNonRetryableApplicationError("the model refused to answer (SAFETY)", activities.ErrModelRefused, nil)
	})
	h.onReflect(noChange)
	stop := h.update(30*time.Second, investigation.UpdateStop, "enough")
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.NoError(t, stop.rejected)
	require.Empty(t, h.reflects, "no Reflect model call after the analyst's stop")
}
