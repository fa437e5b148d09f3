package workflows

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
)

// A stop that comes once the run has concluded and is closing (telling the
// admission it closed; handing a late alert back after its last progress
// write) is refused with the reason. Accepted, it stopped nothing, and
// after the last write its event was lost and its ack named the number of
// an event that is not its own.
func TestStopWhileClosingIsRefused(t *testing.T) {
	// The idle timeout ends the run at 10m; the Closed signal takes until
	// 11m, then the last write; the late alert's hand-back until 12m.
	for name, at := range map[string]time.Duration{
		"while telling the admission": 10*time.Minute + 20*time.Second,
		"while handing back":          11*time.Minute + 30*time.Second,
	} {
		t.Run(name, func(t *testing.T) {
			closing := closingHarness(t, false)
			h := closing.h
			related := investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: "guardduty-3", Identity: "guardduty:1:g", Severity: "high", Shared: "ip:198.51.100.23", Times: 1}
			h.env.RegisterDelayedCallback(func() {
				h.env.SignalWorkflow(investigation.AlertsUpdate, investigation.ArrivalBatch{Arrivals: []investigation.Arrival{related}})
			}, 10*time.Minute+30*time.Second)
			stop := h.update(at, investigation.UpdateStop, "enough")
			_, err := h.run(t, investigation.Input{AlertID: "a1", IdleTimeout: investigation.Duration(10 * time.Minute),
				Intake: &investigation.IntakeInput{Identity: "guardduty:1:f", Admission: "intake-admission-q"}})
			require.NoError(t, err)
			require.Len(t, closing.closed, 2, "closed, then the late alert handed back")
			require.True(t, stop.done)
			require.EqualError(t, stop.rejected, "the investigation has already concluded and is closing: there is nothing left to stop", "ack: %+v", stop.ack)
			require.NotContains(t, kinds(h.events(t)), "stop")
			require.Empty(t, h.status(t).StopReason)
		})
	}
}

// A client's retry of an input the previous run recorded is acknowledged as
// recorded, even once this run took so many inputs that it refuses new
// hints: the input was taken, and a refusal would say it was not.
func TestRetryOfAnEarlierInputPastTheBusyBoundIsAcknowledged(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onSlowTurn(10*time.Minute, conclusionOnly)
	limits := investigation.Limits{MaxHistoryEvents: investigation.MinMaxHistoryEvents}
	_, busy := updateBounds(limits.WithDefaults())
	loop := h.updateLoop(10*time.Second, time.Second, busy+1, func(i int) (string, any) {
		return investigation.UpdateHint, fmt.Sprintf("hint %d", i)
	})
	retried := &updateResult{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(investigation.UpdateHint, "hint-earlier", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { retried.rejected, retried.done = err, true },
			OnComplete: func(v any, err error) {
				retried.done, retried.err = true, err
				retried.ack, _ = v.(investigation.Ack)
			},
		}, "Mind the VPN range.")
	}, 10*time.Second+time.Duration(busy+5)*time.Second)
	active := twoStepPlan().Plan
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1", Limits: limits},
		&State{Turn: 2, ActivePlan: &active, Steering: Steering{FollowUps: []string{"Q2"}, Hints: []string{"Mind the VPN range."}, HintCount: 1,
			UpdateIDs: []string{"hint-earlier"}, Carried: 1}, LastSeq: 5})
	require.True(t, h.env.IsWorkflowCompleted())
	require.True(t, isContinueAsNew(h.env.GetWorkflowError()), "idle, the run hands its updates over: %v", h.env.GetWorkflowError())
	require.ErrorIs(t, loop[busy].rejected, errTooManyUpdates, "the run is past its busy bound")
	require.True(t, retried.done)
	require.NoError(t, retried.rejected)
	require.Equal(t, earlierAck, retried.ack)
}

// The same question asked twice is answered by two turns, each naming the
// note that queued its question (the ask's ack), so each ask follows its
// own turn. Questions carried from a run that kept no numbers name none.
func TestTurnNamesTheNoteThatQueuedIt(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onSlowTurn(time.Minute, conclusionOnly)
	first := h.update(10*time.Second, investigation.UpdateAsk, "Did they get in?")
	second := h.update(20*time.Second, investigation.UpdateAsk, "Did they get in?")
	active := twoStepPlan().Plan
	// Q2 was queued by a run that kept no numbers.
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1"},
		&State{Turn: 2, ActivePlan: &active, Steering: Steering{FollowUps: []string{"Q2"}}, LastSeq: 5})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	require.NoError(t, first.rejected)
	require.NoError(t, second.rejected)
	require.NotEqual(t, first.ack.Seq, second.ack.Seq)
	var turns []investigation.Event
	for _, e := range h.events(t) {
		if e.Kind == investigation.EventTurn {
			turns = append(turns, e)
		}
	}
	require.Len(t, turns, 3)
	require.Equal(t, "Q2", turns[0].Text)
	require.Zero(t, turns[0].Queued, "queued by a run that kept no numbers")
	require.Equal(t, first.ack.Seq, turns[1].Queued)
	require.Equal(t, second.ack.Seq, turns[2].Queued)
}

// A flood of signals the run cannot take (undecodable payloads, inputs
// refused) is noted up to maxSignalNotes, then once that later ones are
// not: the notes cannot push the run's progress out of its window
// (maxRunEvents). A valid signal after the flood is still applied.
func TestSignalFloodIsNotedOnce(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	const flood = 40
	for i := range flood {
		name, arg := investigation.UpdateHint, any(i) // a number: not a hint
		if i%2 == 1 {
			name, arg = investigation.UpdateApprove, "" // no plan waits for approval
		}
		h.signal(time.Minute+time.Duration(i)*time.Second, name, arg)
	}
	h.signal(2*time.Minute, investigation.UpdateHint, "Check bastion-01.")
	h.signal(3*time.Minute, investigation.UpdateStop, "enough")
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	evs := h.events(t)
	var ignored []string
	for _, n := range notes(evs) {
		if strings.Contains(n, "signal ignored") || strings.Contains(n, "signal refused") {
			ignored = append(ignored, n)
		}
	}
	require.Len(t, ignored, maxSignalNotes)
	require.Contains(t, notes(evs), fmt.Sprintf("further signals that are refused or ignored are not noted (%d were)", maxSignalNotes))
	require.Equal(t, []string{"Check bastion-01."}, h.status(t).Hints, "a valid signal is still taken")
}

// A stop signalled once the run has concluded and is closing is ignored,
// as the update is refused: it stops nothing, so the status names no stop
// reason and no stop event is written; a note says why while the run still
// writes its progress.
func TestStopSignalWhileClosingIsIgnored(t *testing.T) {
	const ignored = "stop signal ignored: the investigation has already concluded and is closing: there is nothing left to stop"
	for name, c := range map[string]struct {
		at    time.Duration
		noted bool // the run's last progress write has not begun
	}{
		"while telling the admission": {10*time.Minute + 20*time.Second, true},
		"while handing back":          {11*time.Minute + 30*time.Second, false},
	} {
		t.Run(name, func(t *testing.T) {
			closing := closingHarness(t, false)
			h := closing.h
			related := investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: "guardduty-3", Identity: "guardduty:1:g", Severity: "high", Shared: "ip:198.51.100.23", Times: 1}
			h.signal(10*time.Minute+30*time.Second, investigation.AlertsUpdate, investigation.ArrivalBatch{Arrivals: []investigation.Arrival{related}})
			h.signal(c.at, investigation.UpdateStop, "enough")
			res, err := h.run(t, investigation.Input{AlertID: "a1", IdleTimeout: investigation.Duration(10 * time.Minute),
				Intake: &investigation.IntakeInput{Identity: "guardduty:1:f", Admission: "intake-admission-q"}})
			require.NoError(t, err)
			require.NotEmpty(t, res.Conclusion)
			require.Len(t, closing.closed, 2, "closed, then the late alert handed back")
			evs := h.events(t)
			require.NotContains(t, kinds(evs), "stop")
			require.Empty(t, h.status(t).StopReason, "a stop after the conclusion stopped nothing")
			require.Equal(t, c.noted, slices.Contains(notes(evs), ignored), "notes: %q", notes(evs))
		})
	}
}
