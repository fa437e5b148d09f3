package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// A reinvestigation attached to its old open run while waiting entities'
// queues fill maxPending keeps its own alert (the rise, put first): bound
// may cut only what came after it, and the room makes space for it by
// dropping the newest arrival of the longest other queue (counted there),
// so the pending bound still holds.
func TestAttachedFirstAlertIsNeverCut(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	old := forgottenRun(r, s, investigation.Spend{})
	o2 := r.admit(t0.Add(time.Minute), s, alertOf("a2", "id:1", "critical"))
	e := r.byWorkflow[o2.WorkflowID]
	require.Equal(t, intake.StateStarting, e.State)
	b := r.take(e)
	for i := 0; r.pending < maxPending; i++ { // waiting entities fill the pending bound
		for j := range maxEntityQueue + 1 {
			r.admit(t0.Add(time.Minute), s, alertOf(fmt.Sprint("g", i, "-", j), fmt.Sprint("id:g", i, "-", j), "medium", fmt.Sprint("ip:", i)))
		}
	}
	dropped := 0
	for _, x := range r.Entities {
		dropped += x.Dropped
	}
	r.attached(e, b, old)
	require.Len(t, e.Queue, 1, "the critical alert that made the reinvestigation is kept (Dropped=%d)", e.Dropped)
	require.Equal(t, "a2", e.Queue[0].AlertID)
	require.Equal(t, investigation.ArrivalSeenAgain, e.Queue[0].Kind)
	require.LessOrEqual(t, r.pending, maxPending)
	after, pending := 0, 0
	for _, x := range r.Entities {
		after += x.Dropped
		pending += len(x.Queue)
	}
	require.Equal(t, r.pending, pending)
	require.Equal(t, dropped+1, after, "the arrival that made space is counted where it was dropped")
}

// The run a lost first round made concludes while the entity waits out its
// back-off; the next round finds it (Found) and resumed must leave the
// entity concluded, not running: nothing would conclude it again, and it
// would hold the only slot until the idle run closed.
func TestConcludedWhileWaitingThenResumedFreesTheSlot(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	o := r.admit(t0, s, alertOf("a1", "id:1", "high"))
	e := r.byWorkflow[o.WorkflowID]
	require.Equal(t, intake.StateStarting, e.State)
	r.startFailed(t0.Add(10*time.Minute), e, r.take(e)) // the run was made, the answer lost
	require.Equal(t, intake.StateWaiting, e.State)
	r.admit(t0.Add(11*time.Minute), s, alertOf("a1b", "id:1", "critical")) // news for the waiting entity
	session := investigation.IntakeSession(e.WorkflowID, e.Admitted)
	r.concluded(investigation.Concluded{WorkflowID: e.WorkflowID, Session: session})
	require.Equal(t, intake.StateWaiting, e.State)
	now := t0.Add(12 * time.Minute)
	r.tick(now)
	r.schedule()
	require.Equal(t, intake.StateStarting, e.State)
	r.resumed(e, r.take(e)) // StartOutput{Outcome: started, Found: true}
	require.Equal(t, intake.StateConcluded, e.State, "its run concluded already")
	require.NotEmpty(t, e.Queue, "the news is still signalled to the run")
	o2 := r.admit(now, s, alertOf("b1", "id:2", "high"))
	require.Equal(t, intake.OutcomeStarted, o2.Kind, "a new alert waits behind a concluded run: %s", o2.Message)
}

// A run a lost start made that closes while its entity waits ends the
// entity, so no later start answer marks it running.
func TestClosedWhileWaitingEndsTheEntity(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	o := r.admit(t0, s, alertOf("a1", "id:1", "high"))
	e := r.byWorkflow[o.WorkflowID]
	r.startFailed(t0.Add(10*time.Minute), e, r.take(e))
	session := investigation.IntakeSession(e.WorkflowID, e.Admitted)
	r.closed(t0.Add(11*time.Minute), investigation.Closed{WorkflowID: e.WorkflowID, Session: session, Reason: investigation.ClosedCompleted})
	require.Nil(t, r.byWorkflow[e.WorkflowID])
	r.resumed(e, investigation.ArrivalBatch{})
	require.Nil(t, r.byWorkflow[e.WorkflowID])
	require.Zero(t, r.running())
}

// A reinvestigation whose start finds the old run of its ID open, continued
// as new since its admission (an analyst's follow-up), is told running with
// that run's session (StartIntake matches the memo's session, not the start
// time): attached queues its rise first and takes that run's conclusion as
// its own, so it does not stay running.
func TestReinvestigationAttachesToAContinuedOldRun(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(2)
	old := forgottenRun(r, s, investigation.Spend{})
	o2 := r.admit(t0.Add(time.Minute), s, alertOf("a2", "id:1", "critical"))
	e := r.byWorkflow[o2.WorkflowID]
	require.True(t, e.Reinvestigate)
	r.attached(e, r.take(e), old)
	require.Equal(t, "a2", e.Queue[0].AlertID, "its critical alert goes to the run")
	r.concluded(investigation.Concluded{WorkflowID: e.WorkflowID, Session: old})
	require.Equal(t, intake.StateConcluded, e.State, "the run it took concluded")
}

// An entity attached to an older run and then forgotten in turn (idle, to
// make room) leaves that run's reported total in Forgotten, under the
// session attached was told: a later attach to the same run is charged only
// what it spends beyond it, not its whole total again.
func TestForgottenAttachedRunIsNotChargedTwice(t *testing.T) {
	spend := func(calls int) investigation.Spend {
		var sp investigation.Spend
		sp.ByPhase.Plan = investigation.Usage{Calls: calls, PromptTokens: calls * 100000, Model: "gemini-2.5-flash"}
		return sp
	}
	r := newRoom(t0)
	s := roomSettings(10)
	old := forgottenRun(r, s, spend(1))
	one := r.Spent
	require.Greater(t, one, 0.0)
	for i, sev := range []string{"medium", "high"} {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		e := r.byWorkflow[r.admit(at, s, alertOf(fmt.Sprint("a", i+2), "id:1", sev)).WorkflowID]
		require.True(t, e.Reinvestigate)
		spent := r.Spent
		r.attached(e, r.take(e), old)
		r.concluded(investigation.Concluded{WorkflowID: e.WorkflowID, Session: old, Spend: spend(i + 2)})
		require.InDelta(t, one, r.Spent-spent, 1e-9, "attach %d: the old run spent one more unit; the day counts %.1f more", i+1, (r.Spent-spent)/one)
		r.forget(e)
		r.close(at, e.WorkflowID)
	}
}

// An entity given up after its last failed start loses the arrivals it had
// counted as dropped (past the queue bounds) with it: the status counts
// them, as it counts what a hand-back could not return.
func TestGivenUpStartCountsItsDroppedArrivals(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	o := r.admit(t0, s, alertOf("a1", "id:1", "high", "ip:10.0.0.1"))
	e := r.byWorkflow[o.WorkflowID]
	for i := range maxEntityQueue + 3 {
		r.admit(t0, s, alertOf(fmt.Sprint("r", i), fmt.Sprint("id:r", i), "high", "ip:10.0.0.1"))
	}
	require.Equal(t, 3, e.Dropped)
	now := t0
	for range maxStartAttempts {
		require.Equal(t, intake.StateStarting, e.State)
		r.startFailed(now, e, r.take(e))
		now = now.Add(time.Hour)
		r.tick(now)
		r.schedule()
	}
	require.Nil(t, r.byWorkflow[o.WorkflowID])
	require.EqualValues(t, 1, r.Counters.StartsFailed)
	require.EqualValues(t, 3, r.Counters.GivenUpDropped)
}

// forgottenRun admits alert a1 (id:1, low) and starts it; its run concludes
// having spent spend, and the room forgets the entity while the run stays
// open (idle), then closes its identity. It returns the run's session.
func forgottenRun(r *Room, s intake.Settings, spend investigation.Spend) string {
	e0 := r.byWorkflow[r.admit(t0, s, alertOf("a1", "id:1", "low")).WorkflowID]
	r.started(e0.WorkflowID)
	old := investigation.IntakeSession(e0.WorkflowID, e0.Admitted)
	r.concluded(investigation.Concluded{WorkflowID: e0.WorkflowID, Session: old, Spend: spend})
	r.forget(e0)
	r.close(t0, e0.WorkflowID)
	return old
}
