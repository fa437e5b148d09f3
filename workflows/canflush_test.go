package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
)

// Inputs that arrive while the run's last progress write before
// continue-as-new is in flight are acknowledged: the next run must carry
// them, and their progress notes under the numbers acknowledged.
func TestInputDuringLastWriteBeforeContinueAsNewIsCarried(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onTurn(conclusionOnly)
	var once sync.Once
	var ack investigation.Ack
	var ackErr error
	h.env.OnActivity(a.StoreProgress, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ProgressInput) error {
		if in.Wait {
			once.Do(func() {
				h.env.SignalWorkflow(investigation.UpdateAsk, "Q4 by signal")
				h.env.UpdateWorkflow(investigation.UpdateAsk, "ask-x", &testsuite.TestUpdateCallback{
					OnAccept: func() {}, OnReject: func(err error) { ackErr = err },
					OnComplete: func(v any, err error) {
						ackErr = err
						ack, _ = v.(investigation.Ack)
					},
				}, "Q5 by update")
			})
		}
		return nil
	}).Maybe()
	active := twoStepPlan().Plan
	h.env.SetCurrentHistoryLength(100)
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1",
		Limits: investigation.Limits{MaxHistoryEvents: 50}},
		&State{Turn: 2, ActivePlan: &active, Steering: Steering{FollowUps: []string{"Q2", "Q3"}}, LastSeq: 10})
	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "%v", h.env.GetWorkflowError())
	require.NoError(t, ackErr)
	next := carriedState(t, can)
	require.Equal(t, []string{"Q3", "Q4 by signal", "Q5 by update"}, next.Steering.FollowUps)
	require.Contains(t, next.Steering.UpdateIDs, "ask-x", "a retry of the update is recognised by the next run")
	// Their notes follow, numbered as acknowledged.
	require.Len(t, next.Unwritten, 2)
	require.Equal(t, "follow-up question queued: Q5 by update", next.Unwritten[1].Text)
	require.Equal(t, next.LastSeq+2, ack.Seq)

	// The next run emits them first, under those numbers.
	h2 := newHarness(t)
	h2.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h2.onTurn(conclusionOnly)
	var stored []investigation.Event
	h2.env.OnActivity(a.StoreProgress, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ProgressInput) error {
		stored = append(stored, in.Events...)
		return nil
	}).Maybe()
	h2.env.ExecuteWorkflow(investigation.WorkflowName, next.Input, next)
	require.True(t, h2.env.IsWorkflowCompleted())
	require.GreaterOrEqual(t, len(stored), 2)
	require.Equal(t, next.LastSeq+2, stored[1].Seq)
	require.Equal(t, "follow-up question queued: Q5 by update", stored[1].Text)
}
