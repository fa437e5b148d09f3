package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// Alerts a signal returns (Closed.Returned: a hand-back, or one forged)
// pass no update validator: each must be an alert an admit request could
// carry, and one signal returns at most maxReturned, or one
// investigation_closed signal could make the room too large to continue
// as new.
func TestReturnedAlertsAreCheckedAndBounded(t *testing.T) {
	r := newRoom(t0)
	r.Settings = roomSettings(1)
	var arr []investigation.Arrival
	for i := range 100 {
		arr = append(arr, investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: fmt.Sprint(i), Identity: fmt.Sprint(i) + strings.Repeat("<", 64<<10), Severity: "low"})
	}
	r.readmit(t0, arr)
	raw, err := json.Marshal(AdmissionInput{Room: r})
	require.NoError(t, err)
	require.LessOrEqual(t, len(raw), 64<<10, "the room took %d KiB of forged identities", len(raw)>>10)
	require.Empty(t, r.Entities)

	arr = nil
	for i := range maxReturned + 50 {
		arr = append(arr, investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: fmt.Sprint("p", i), Identity: fmt.Sprint("id:p", i), Severity: "low"})
	}
	r.readmit(t0, arr)
	require.Len(t, r.Entities, maxReturned)
	require.Equal(t, int64(50), r.Counters.ReadmitsLost)
}

// A reinvestigation whose start finds the old run still open (its entity
// was forgotten to make room) tells that run the severity it knew, so the
// run asks whether the higher severity changes its verdict.
func TestAttachedEscalationAsksAboutTheRise(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	s.NoGroup = true
	o := r.admit(t0, s, alertOf("a0", "id:0", "low"))
	r.take(r.byWorkflow[o.WorkflowID])
	r.started(o.WorkflowID)
	r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID})
	for i := 1; i < maxOpen; i++ {
		r.admit(t0, s, alertOf(fmt.Sprintf("a%d", i), fmt.Sprintf("id:%d", i), "low"))
	}
	r.admit(t0, s, alertOf("x", "id:x", "low")) // forgets id:0; its run stays open
	r.Entities[1].State = intake.StateRunning
	r.concluded(investigation.Concluded{WorkflowID: r.Entities[1].WorkflowID})
	e := r.byWorkflow[r.admit(t0.Add(time.Minute), s, alertOf("c0", "id:0", "critical")).WorkflowID]
	require.True(t, e.Reinvestigate)
	e.State = intake.StateStarting
	r.attached(e, r.take(e), "")
	require.NotEmpty(t, verdictQuestion(e.Queue), "%+v", e.Queue)
	require.Equal(t, "low", e.Queue[0].PrevSeverity)
}

// A rise shed because the waiting room is full waits in Readmits; once
// there is room it is still a reinvestigation, so the start does not take
// it for a repeat of the run that knew less.
func TestShedRiseIsStillAReinvestigation(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	o := r.admit(t0, s, alertOf("r1", "id:r", "low"))
	r.take(r.byWorkflow[o.WorkflowID])
	r.started(o.WorkflowID)
	r.closed(t0, investigation.Closed{WorkflowID: o.WorkflowID, Reason: investigation.ClosedCompleted})
	for i := range maxOpen { // critical: a critical rise displaces none of them (displace)
		r.admit(t0, s, alertOf(fmt.Sprint("a", i), fmt.Sprint("id:", i), "critical"))
	}
	r.readmit(t0, []investigation.Arrival{{Kind: investigation.ArrivalSeenAgain, AlertID: "r2", Identity: "id:r", Source: "generic", Severity: "critical", PrevSeverity: "low"}})
	require.Equal(t, 1, r.status().Readmitting)
	r.close(t0, intake.WorkflowID("id:0"))
	r.retryReadmits(t0)
	e := r.byIdentity[hashOf("id:r")]
	require.NotNil(t, e)
	require.True(t, e.Reinvestigate, "the retried rise is a reinvestigation")
	require.Equal(t, int64(1), r.Counters.Reinvested)
}

// A hand-back follows its run's own close: when it names a workflow ID (a
// run started before per-run sessions), the newer entity that holds the ID
// now is not ended, and only the returned alerts are admitted.
func TestHandBackLeavesTheNewerEntity(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(5)
	o := r.admit(t0, s, alertOf("a1", "id:1", "medium"))
	r.take(r.byWorkflow[o.WorkflowID])
	r.started(o.WorkflowID)
	r.closed(t0.Add(time.Minute), investigation.Closed{WorkflowID: o.WorkflowID, Reason: investigation.ClosedCompleted})
	require.Equal(t, intake.OutcomeStarted, r.admit(t0.Add(2*time.Minute), s, alertOf("a1c", "id:1", "critical")).Kind)
	back := investigation.Closed{WorkflowID: o.WorkflowID, Reason: investigation.ClosedCompleted,
		Returned: investigation.ArrivalBatch{Arrivals: []investigation.Arrival{{Kind: investigation.ArrivalRelated, AlertID: "rel", Identity: "id:rel", Severity: "low"}}}}
	r.closed(t0.Add(3*time.Minute), back)
	r.readmit(t0.Add(3*time.Minute), back.Returned.Arrivals)
	e := r.byWorkflow[o.WorkflowID]
	require.NotNil(t, e, "the reinvestigation is still open")
	require.Equal(t, "a1c", e.AlertID)
	require.NotNil(t, r.byIdentity[hashOf("id:rel")], "the returned alert is admitted")
}

// A forgotten entity's run reports under its own session: its spend is
// not charged again to the newer entity that took its workflow ID, and its
// close does not end that entity.
func TestOlderRunsSignalsAreNotTheNewerEntitys(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(5)
	spend := investigation.Spend{}
	spend.ByPhase.Plan = investigation.Usage{Calls: 1, PromptTokens: 100000, Model: "gemini-2.5-flash"}
	o := r.admit(t0, s, alertOf("a1", "id:1", "low"))
	old := investigation.IntakeSession(o.WorkflowID, t0)
	r.take(r.byWorkflow[o.WorkflowID])
	r.started(o.WorkflowID)
	r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Session: old, Spend: spend})
	spent := r.Spent
	require.Greater(t, spent, 0.0)
	r.close(t0.Add(time.Minute), o.WorkflowID) // forgotten; its run stays open, idle
	t1 := t0.Add(2 * time.Minute)
	require.Equal(t, intake.OutcomeStarted, r.admit(t1, s, alertOf("a1c", "id:1", "critical")).Kind)
	r.started(o.WorkflowID) // a new run: the old one closed meanwhile
	r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Session: old, Spend: spend})
	r.closed(t1, investigation.Closed{WorkflowID: o.WorkflowID, Session: old, Reason: investigation.ClosedCompleted, Spend: spend})
	require.Equal(t, spent, r.Spent, "the old run's spend is counted once")
	e := r.byWorkflow[o.WorkflowID]
	require.NotNil(t, e, "the old run's close leaves the new entity")
	require.Equal(t, intake.StateRunning, e.State)
	// The new run's own signals are its.
	r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Session: investigation.IntakeSession(o.WorkflowID, t1), Spend: spend})
	require.Equal(t, intake.StateConcluded, e.State)
	require.Greater(t, r.Spent, spent)
}

// A forged close with a negative count of alerts it could not hand back
// and none returned is a plain close: ended (which remembers the run as
// closing) and closed (which charges and ends the entity) both take it,
// as neither would if one took it for a hand-back and the other did not.
func TestNegativeHandBackCountIsAPlainClose(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(5)
	o := r.admit(t0, s, alertOf("a1", "id:1", "medium"))
	session := investigation.IntakeSession(o.WorkflowID, t0)
	r.take(r.byWorkflow[o.WorkflowID])
	r.started(o.WorkflowID)
	r.closed(t0.Add(time.Minute), investigation.Closed{WorkflowID: o.WorkflowID, Session: session, Reason: investigation.ClosedCompleted,
		Returned: investigation.ArrivalBatch{Dropped: -3}})
	require.Nil(t, r.byWorkflow[o.WorkflowID], "the entity ended")
	require.True(t, r.closingRun(session), "its run is remembered as closing, as for any close that ends its entity")
	require.Zero(t, r.Counters.HandBackDropped)
}

// An entity that waits and never had a start has no run: a Concluded or
// Closed naming its workflow ID (without a session, with the ID as one,
// or with the session its start would give) is another run's, or forged,
// and neither charges nor ends it.
func TestNeverStartedEntityTakesNoRunsSignals(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	s.DailyBudgetUSD = 100
	spend := investigation.Spend{}
	spend.ByPhase.Plan = investigation.Usage{Calls: 1, PromptTokens: 100000, Model: "gemini-2.5-flash"}
	require.Equal(t, intake.OutcomeStarted, r.admit(t0, s, alertOf("a1", "id:1", "high")).Kind)
	o := r.admit(t0, s, alertOf("a2", "id:2", "low"))
	require.Equal(t, intake.OutcomeQueued, o.Kind)
	for _, session := range []string{"", o.WorkflowID, investigation.IntakeSession(o.WorkflowID, t0)} {
		r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Session: session, Spend: spend})
		r.closed(t0.Add(time.Minute), investigation.Closed{WorkflowID: o.WorkflowID, Session: session, Reason: investigation.ClosedCompleted, Spend: spend})
		e := r.byWorkflow[o.WorkflowID]
		require.NotNil(t, e, "session %q: the waiting entity is not ended", session)
		require.Equal(t, intake.StateWaiting, e.State)
		require.Zero(t, r.Spent, "session %q: nothing is charged", session)
	}
}
