package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// lateRiseWhileClosing runs the admission through a late rise whose run is
// still closing: a1 starts a run, its alert seen higher (a1b) reaches it,
// the run says it closed, then hands a1b back. The starts after the first
// find the closing run open (its session, from the memo) while openFor
// starts; later ones start a new run. It returns the starts, the alerts
// signals sent and the status.
func lateRiseWhileClosing(t *testing.T, openFor int) ([]activities.StartInput, int, intake.Status) {
	var mu sync.Mutex
	var starts []activities.StartInput
	alerts := 0
	h := newAdmissionHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(ia.StartInvestigation, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.StartInput) (activities.StartOutput, error) {
			mu.Lock()
			defer mu.Unlock()
			starts = append(starts, in)
			if n := len(starts); n > 1 && n <= 1+openFor {
				// The run that handed the rise back has not completed yet.
				return activities.StartOutput{Outcome: activities.StartRunning, Session: investigation.IntakeSession(in.WorkflowID, starts[0].Admitted)}, nil
			}
			return activities.StartOutput{Outcome: activities.StartStarted}, nil
		})
		env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, investigation.AlertsUpdate, mock.Anything).Return(
			func(_, wf, _, name string, arg any) error {
				mu.Lock()
				defer mu.Unlock()
				alerts++
				if alerts == 1 {
					return nil
				}
				return errors.New("workflow execution already completed")
			})
	})
	s := intake.Settings{MaxRunning: 10}
	wf := intake.WorkflowID("id:1")
	h.admit(time.Second, s, alertOf("a1", "id:1", "low"))
	h.admit(time.Minute, s, alertOf("a1b", "id:1", "high"))
	session := func() string {
		mu.Lock()
		defer mu.Unlock()
		return investigation.IntakeSession(wf, starts[0].Admitted)
	}
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(investigation.ClosedSignal, investigation.Closed{WorkflowID: wf, Session: session(), Reason: investigation.ClosedCompleted})
	}, time.Minute+30*time.Second)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(investigation.ClosedSignal, investigation.Closed{WorkflowID: session(), Session: session(), Reason: investigation.ClosedCompleted,
			Returned: investigation.ArrivalBatch{Arrivals: []investigation.Arrival{{Kind: investigation.ArrivalSeenAgain,
				AlertID: "a1b", Identity: "id:1", Source: "generic", Severity: "high", PrevSeverity: "low", Times: 1}}}})
	}, 2*time.Minute)
	var st intake.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 40*time.Minute)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 41*time.Minute)
	h.env.ExecuteWorkflow(intake.AdmissionWorkflowName, AdmissionInput{})
	mu.Lock()
	defer mu.Unlock()
	return starts, alerts, st
}

// A late rise's reinvestigation whose start finds the run that handed it
// back still open (closing) waits and starts again, instead of taking the
// closing run as its investigation (which loses the rise).
func TestLateRiseWaitsForTheClosingRun(t *testing.T) {
	starts, alerts, st := lateRiseWhileClosing(t, 1)
	require.Len(t, starts, 3, "the rise a1b is investigated by a run that starts after the closing one ended")
	require.Equal(t, "a1b", starts[2].Input.AlertID)
	require.True(t, starts[2].Reinvestigate)
	require.Equal(t, 1, alerts, "nothing is signalled to the closing run")
	require.Zero(t, st.StartsFailed)
	require.Equal(t, int64(1), st.Reinvested)
	require.Len(t, st.Open, 1)
	require.Equal(t, intake.StateRunning, st.Open[0].State)
}

// A run that said it closed but stays open is waited for only
// maxStartAttempts times: then the reinvestigation is given up, counted.
func TestLateRiseGivesUpOnARunThatStaysOpen(t *testing.T) {
	starts, alerts, st := lateRiseWhileClosing(t, 100)
	require.Len(t, starts, 1+maxStartAttempts)
	require.Equal(t, 1, alerts)
	require.Equal(t, int64(1), st.StartsFailed)
	require.Empty(t, st.Open)
}

// A returned arrival kept whole in Readmits (the room is full) keeps its
// text plain and bounded: a forged investigation_closed signal cannot push
// the room past its bound.
func TestReadmitsKeepBoundedPlainText(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(maxOpen)
	for i := range maxOpen {
		o := r.admit(t0, s, alertOf(fmt.Sprint("a", i), fmt.Sprint("id:", i), "high"))
		r.take(r.byWorkflow[o.WorkflowID])
		r.started(o.WorkflowID)
	}
	require.Len(t, r.Entities, maxOpen)
	big := strings.Repeat("<", 20<<10)
	for i := range maxReadmits {
		r.readmit(t0, []investigation.Arrival{{Kind: investigation.ArrivalRelated, AlertID: fmt.Sprint("r", i), Identity: fmt.Sprint("id:r", i), Source: "generic",
			Severity: big, PrevSeverity: big, Shared: big, Title: strings.Repeat("<", intake.MaxTitleBytes)}})
	}
	require.Len(t, r.Readmits, maxReadmits)
	raw, err := json.Marshal(r.Readmits)
	require.NoError(t, err)
	require.LessOrEqual(t, len(raw), maxReadmits*1024, "the kept readmissions took %d KiB", len(raw)>>10)
	require.NotContains(t, string(raw), `\u003c`)
}

// An entity attached to an older run by a run without the room-guards gate
// is carried into a run with it: the attached run's conclusion and close
// still end it.
func TestAttachedBeforeGuardsTakesItsRunsSignals(t *testing.T) {
	r := newRoom(t0)
	r.guards = false
	s := roomSettings(10)
	o := r.admit(t0.Add(time.Hour), s, alertOf("a2", "id:1", "high"))
	e := r.byWorkflow[o.WorkflowID]
	r.attached(e, r.take(e), "")
	r.take(e) // delivered
	raw, err := json.Marshal(AdmissionInput{Room: r})
	require.NoError(t, err)
	var in AdmissionInput
	require.NoError(t, json.Unmarshal(raw, &in))
	r = in.Room
	r.index()
	r.fixed, r.rises, r.guards = true, true, true // the continued run took the gates
	older := investigation.IntakeSession(o.WorkflowID, t0)
	r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Session: older})
	r.closed(t0.Add(2*time.Hour), investigation.Closed{WorkflowID: o.WorkflowID, Session: older, Reason: investigation.ClosedCompleted})
	require.Empty(t, r.Entities, "the attached run closed: its entity should leave the room")
}

// A room carried from a run before the room-guards gate holds entities
// attached before Entity.Attached existed: the first run under the gate
// takes each open entity's run as its own, so the run's close ends it.
func TestRoomFromBeforeGuardsTrustsItsRuns(t *testing.T) {
	var h admissionHarness
	h.env = h.NewTestWorkflowEnvironment()
	h.env.RegisterWorkflow(IntakeAdmission)
	h.sig.on(h.env)
	h.env.OnActivity(ia.CheckInvestigations, mock.Anything, mock.Anything).Return(activities.CheckOutput{}, nil).Maybe()
	r := newRoom(t0)
	s := roomSettings(10)
	o := r.admit(t0, s, alertOf("a2", "id:1", "high"))
	e := r.byWorkflow[o.WorkflowID]
	r.take(e)
	// An older admission's run it took as its own, before Attached was kept.
	e.State, e.Admitted = intake.StateRunning, t0.Add(time.Hour)
	raw, err := json.Marshal(AdmissionInput{Room: r})
	require.NoError(t, err)
	require.NotContains(t, string(raw), `"ad":`)
	var in AdmissionInput
	require.NoError(t, json.Unmarshal(raw, &in))
	in.Room.Guarded = false
	older := investigation.IntakeSession(o.WorkflowID, t0)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(investigation.ClosedSignal, investigation.Closed{WorkflowID: o.WorkflowID, Session: older, Reason: investigation.ClosedCompleted})
	}, time.Second)
	var st intake.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 2*time.Second)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 3*time.Second)
	h.env.ExecuteWorkflow(IntakeAdmission, in)
	require.Empty(t, st.Open, "the run it took as its own closed")
}

// The smaller counts: a rise admitted alone counts as a reinvestigation;
// a signal's returned alerts past its bound are lost only if they would
// have been admitted; what a hand-back could not return is counted.
func TestReturnedCounts(t *testing.T) {
	r := newRoom(t0)
	r.Settings = roomSettings(1)
	r.admitAlone(t0, investigation.Arrival{Kind: investigation.ArrivalSeenAgain, AlertID: "x", Identity: "id:x", Source: "generic", Severity: "high", PrevSeverity: "low"})
	require.True(t, r.Entities[0].Reinvestigate)
	require.Equal(t, int64(1), r.Counters.Reinvested, "a rise admitted alone is a reinvestigation")

	var arr []investigation.Arrival
	for i := range maxReturned + 30 {
		arr = append(arr, investigation.Arrival{Kind: investigation.ArrivalSeenAgain, AlertID: fmt.Sprint("s", i), Identity: fmt.Sprint("id:s", i), Severity: "low", PrevSeverity: "low"})
	}
	arr = append(arr, investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: "rel", Identity: "id:rel", Severity: "low"},
		investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: "bad", Identity: "id:<", Severity: "low"})
	r.readmit(t0, arr)
	require.Equal(t, int64(1), r.Counters.ReadmitsLost, "only the related alert past the bound would have been admitted")

	r.handedBack(investigation.Closed{WorkflowID: "w~1", Session: "w~1", Returned: investigation.ArrivalBatch{Dropped: 7}})
	r.handedBack(investigation.Closed{WorkflowID: "w~1", Session: "w~1", Returned: investigation.ArrivalBatch{Dropped: -5}})
	require.Equal(t, int64(7), r.status().HandBackDropped)
}
