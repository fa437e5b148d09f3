package workflows

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// A start that fails (workers out of reach for its 10 minutes) puts the
// entity back to waiting with the related alerts its input took; it is
// tried again after a back-off, shown in the status meanwhile, and its
// identity's next alert is news for it, not a repeat.
func TestFailedStartWaitsAndIsTriedAgain(t *testing.T) {
	var failures atomic.Int32
	var last activities.StartInput
	h := newAdmissionHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(ia.StartInvestigation, mock.Anything, mock.MatchedBy(func(in activities.StartInput) bool {
			return in.WorkflowID == intake.WorkflowID("id:1")
		})).Return(func(_ context.Context, in activities.StartInput) (activities.StartOutput, error) {
			last = in
			if failures.Add(1) <= 2 {
				return activities.StartOutput{}, temporal.NewNonRetryableApplicationError("temporal unreachable for 10 minutes", "x", nil)
			}
			return activities.StartOutput{Outcome: activities.StartStarted, RunID: "run"}, nil
		})
	})
	s := intake.Settings{MaxRunning: 1}
	h.admit(time.Second, s, alertOf("a0", "id:0", "high"))
	h.admit(2*time.Second, s, alertOf("a1", "id:1", "high", "ip:203.0.113.9"))
	h.admit(3*time.Second, s, alertOf("a2", "id:2", "high", "ip:203.0.113.9"))
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(investigation.ConcludedSignal, investigation.Concluded{WorkflowID: intake.WorkflowID("id:0")})
	}, time.Minute)
	var during intake.Status
	h.env.RegisterDelayedCallback(func() { during = h.status(t) }, 90*time.Second)
	h.admit(2*time.Minute, s, alertOf("a1b", "id:1", "high"))
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 20*time.Minute)
	h.env.ExecuteWorkflow(intake.AdmissionWorkflowName, AdmissionInput{})

	require.Equal(t, int32(3), failures.Load(), "tried again after each failure, until it started")
	require.Equal(t, "a1", last.Input.AlertID)
	require.Len(t, last.Input.Intake.Arrived.Arrivals, 2, "the related alert and the news reach the start that succeeds")
	require.Equal(t, "a2", last.Input.Intake.Arrived.Arrivals[0].AlertID)
	require.Equal(t, "seen_again", h.results[3].Outcomes[0].Kind, "a failed start makes no repeat: %+v", h.results[3].Outcomes[0])
	i := -1
	for j, e := range during.Open {
		if e.WorkflowID == intake.WorkflowID("id:1") {
			i = j
		}
	}
	require.GreaterOrEqual(t, i, 0, "the entity waits again: %+v", during.Open)
	require.Equal(t, intake.StateWaiting, during.Open[i].State)
	require.Equal(t, 1, during.Open[i].StartFailures)
	require.False(t, during.Open[i].RetryAt.IsZero())
}

// An investigation that failed (a Gemini 401) or was cancelled made no
// conclusion: its identity's next alert is investigated, and what it spent
// counts against the day's budget.
func TestFailedInvestigationIsNoRepeat(t *testing.T) {
	h := newAdmissionHarness(t)
	s := intake.Settings{MaxRunning: 2, DailyBudgetUSD: 100}
	h.admit(time.Second, s, alertOf("a1", "id:1", "high"))
	spend := investigation.Spend{}
	spend.ByPhase.Plan = investigation.Usage{Calls: 1, PromptTokens: 100000, Model: "gemini-2.5-flash"}
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(investigation.ClosedSignal, investigation.Closed{WorkflowID: intake.WorkflowID("id:1"),
			Reason: "failed: planning failed: Gemini answered 401", Spend: spend})
	}, time.Minute)
	h.admit(2*time.Minute, s, alertOf("a1b", "id:1", "high"))
	var st intake.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 150*time.Second)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 3*time.Minute)
	h.env.ExecuteWorkflow(intake.AdmissionWorkflowName, AdmissionInput{})
	require.Equal(t, intake.OutcomeStarted, h.results[1].Outcomes[0].Kind, "%+v", h.results[1].Outcomes[0])
	require.Len(t, h.starts, 2)
	require.Greater(t, st.SpentToday, 0.029, "a failed run's spend is charged")
}

// A start that finds its identity's run open already hands that run the
// entity's first alert and the related alerts its input held.
func TestStartOnAnOpenRunSignalsItsAlerts(t *testing.T) {
	h := newAdmissionHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(ia.StartInvestigation, mock.Anything, mock.MatchedBy(func(in activities.StartInput) bool {
			return in.WorkflowID == intake.WorkflowID("id:1")
		})).Return(activities.StartOutput{Outcome: activities.StartRunning, RunID: "older"}, nil)
	})
	s := intake.Settings{MaxRunning: 1}
	h.admit(time.Second, s, alertOf("a0", "id:0", "high"))
	h.admit(2*time.Second, s, alertOf("a1", "id:1", "high", "ip:203.0.113.9"), alertOf("a2", "id:2", "high", "ip:203.0.113.9"))
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(investigation.ConcludedSignal, investigation.Concluded{WorkflowID: intake.WorkflowID("id:0")})
	}, time.Minute)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 3*time.Minute)
	h.env.ExecuteWorkflow(intake.AdmissionWorkflowName, AdmissionInput{})
	var got []string
	h.sig.mu.Lock()
	for i, name := range h.sig.got {
		if name == intake.WorkflowID("id:1")+" "+investigation.AlertsUpdate {
			for _, a := range h.sig.arg[i].(investigation.ArrivalBatch).Arrivals {
				got = append(got, a.AlertID+" "+a.Kind)
			}
		}
	}
	h.sig.mu.Unlock()
	require.Equal(t, []string{"a1 seen_again", "a2 related"}, got)
}

// A check that found a run closed answers after a newer entity took the
// workflow ID (its close came, then a higher severity): the newer entity
// stays open.
func TestStaleCheckLeavesTheNewerEntity(t *testing.T) {
	var h *admissionHarness
	wf := intake.WorkflowID("id:1")
	checks := 0
	h = newAdmissionHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(ia.CheckInvestigations, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.CheckInput) (activities.CheckOutput, error) {
			checks++
			if checks == 1 {
				h.env.SignalWorkflow(investigation.ClosedSignal, investigation.Closed{WorkflowID: wf, Reason: investigation.ClosedCompleted})
				h.admit(0, intake.Settings{MaxRunning: 5}, alertOf("a1c", "id:1", "critical"))
				time.Sleep(300 * time.Millisecond)
				return activities.CheckOutput{Closed: []string{wf}}, nil
			}
			return activities.CheckOutput{}, nil
		})
	})
	s := intake.Settings{MaxRunning: 5}
	h.admit(time.Second, s, alertOf("a1", "id:1", "medium"))
	h.admit(10*time.Minute, s, alertOf("a1d", "id:1", "critical"))
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 12*time.Minute)
	h.env.ExecuteWorkflow(intake.AdmissionWorkflowName, AdmissionInput{})
	require.GreaterOrEqual(t, checks, 1)
	last := h.results[len(h.results)-1].Outcomes[0]
	require.Equal(t, "a1d", last.AlertID)
	require.Equal(t, intake.OutcomeSeenAgain, last.Kind, "the reinvestigation is still open: %+v", last)
}

// A related alert to admit again that finds the waiting room full is kept
// and admitted once an entity leaves; past the list's bound it is counted.
func TestShedReadmissionIsKept(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	for i := range maxOpen {
		r.admit(t0, s, alertOf(fmt.Sprint("a", i), fmt.Sprint("id:", i), "high"))
	}
	late := investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: "late", Identity: "id:late", Severity: "high"}
	r.readmit(t0, []investigation.Arrival{late})
	require.Equal(t, 1, r.status().Readmitting, "kept, not dropped")
	r.close(t0, intake.WorkflowID("id:0"))
	r.retryReadmits(t0)
	require.NotNil(t, r.byIdentity[hashOf("id:late")], "admitted once there is room")
	require.Zero(t, r.status().Readmitting)

	r.admit(t0, s, alertOf("fill", "id:fill", "high"))
	for i := range maxReadmits + 1 {
		r.readmit(t0, []investigation.Arrival{{Kind: investigation.ArrivalRelated, AlertID: fmt.Sprint("l", i), Identity: fmt.Sprint("id:l", i)}})
	}
	require.Equal(t, maxReadmits, r.status().Readmitting)
	require.Equal(t, int64(1), r.Counters.ReadmitsLost)
}

// A room under the gate charges a failed run's spend and remembers only a
// completed run's identities.
func TestRoomClosedChargesAndRemembersCompletedOnly(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(10)
	spend := investigation.Spend{}
	spend.ByPhase.Plan = investigation.Usage{Calls: 1, PromptTokens: 100000, Model: "gemini-2.5-flash"}
	a := r.admit(t0, s, alertOf("a1", "id:1", "high"))
	b := r.admit(t0, s, alertOf("b1", "id:2", "high"))
	r.closed(t0, investigation.Closed{WorkflowID: a.WorkflowID, Reason: "cancelled", Spend: spend})
	r.closed(t0, investigation.Closed{WorkflowID: b.WorkflowID, Reason: investigation.ClosedCompleted})
	require.Greater(t, r.Spent, 0.029)
	require.Equal(t, intake.OutcomeStarted, r.admit(t0, s, alertOf("a2", "id:1", "high")).Kind)
	require.Equal(t, intake.OutcomeRepeat, r.admit(t0, s, alertOf("b2", "id:2", "high")).Kind)
}
