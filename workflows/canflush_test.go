package workflows

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

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
	next := continuedOverThreshold(t, h)
	require.NoError(t, ackErr)
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

// More updates than State.Unwritten carries arrive during the last write:
// each one accepted is acknowledged with a number of its own, under which
// the next run emits its events (all of them: the last one accepted brings
// three alerts); the rest are refused with a sentence that says to try
// again, never acknowledged with a number already used.
func TestUpdatesPastTheUnwrittenBoundAreRefused(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onTurn(conclusionOnly)
	var once sync.Once
	acks := map[string]investigation.Ack{}
	refused := map[string]error{}
	callback := func(name string) *testsuite.TestUpdateCallback {
		return &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { refused[name] = err },
			OnComplete: func(v any, err error) {
				if err != nil {
					refused[name] = err
					return
				}
				acks[name], _ = v.(investigation.Ack)
			},
		}
	}
	hints := func(from, to int) {
		for i := from; i < to; i++ {
			hint := fmt.Sprintf("hint %d by update", i)
			h.env.UpdateWorkflow(investigation.UpdateHint, fmt.Sprint("hint-", i), callback(hint), hint)
		}
	}
	alerts := investigation.ArrivalBatch{Arrivals: []investigation.Arrival{
		{Kind: investigation.ArrivalRelated, AlertID: "r1"}, {Kind: investigation.ArrivalRelated, AlertID: "r2"}, {Kind: investigation.ArrivalRelated, AlertID: "r3"}}}
	h.env.OnActivity(a.StoreProgress, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ProgressInput) error {
		if in.Wait {
			once.Do(func() {
				h.env.SignalWorkflow(investigation.UpdateHint, "hint by signal")
				// The updates are sent from the test's main loop (the SDK's
				// test environment keeps them in a map it does not lock),
				// before this write ends.
				posted := make(chan struct{})
				h.env.RegisterDelayedCallback(func() {
					defer close(posted)
					hints(0, maxUnwritten-2) // with the signal's, one place is left
					h.env.UpdateWorkflow(investigation.AlertsUpdate, "alerts", callback("alerts"), alerts)
					hints(maxUnwritten-2, maxUnwritten+1)
				}, 0)
				<-posted
			})
		}
		return nil
	}).Maybe()
	next := continuedOverThreshold(t, h)
	require.Len(t, acks, maxUnwritten-1, "the signal took one place: %v", refused)
	require.Len(t, refused, 3)
	for _, err := range refused {
		require.ErrorContains(t, err, "try again in a moment")
	}
	require.Len(t, next.Unwritten, maxUnwritten+2, "the alerts' three notes are carried")
	seqs := map[int]bool{}
	for name, ack := range acks {
		require.False(t, seqs[ack.Seq], "%s: number %d acknowledged twice", name, ack.Seq)
		seqs[ack.Seq] = true
		require.Greater(t, ack.Seq, next.LastSeq, name)
		if name != "alerts" {
			require.Equal(t, name, next.Unwritten[ack.Seq-next.LastSeq-1].Text, "the next run emits it under its number")
		}
	}
	require.Equal(t, next.LastSeq+maxUnwritten+2, acks["alerts"].Seq)
	require.Equal(t, "alert arrived: "+alerts.Arrivals[2].Text(), next.Unwritten[maxUnwritten+1].Text)
	require.Len(t, next.Steering.Hints, maxUnwritten-1, "a refused hint is not carried")
}
