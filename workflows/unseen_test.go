package workflows

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// closeReport is the Closed signal a completed run sends (closing).
func closeReport(e *Entity, s IntakeState) investigation.Closed {
	unseen, all := s.unseenReport()
	return investigation.Closed{WorkflowID: e.WorkflowID, Session: investigation.IntakeSession(e.WorkflowID, e.Admitted),
		Reason: investigation.ClosedCompleted, Unseen: unseen, UnseenAll: all}
}

// TestFindingPushedOutUnseenIsNoRepeat: while a decoy investigation is in
// one model call, an attacker sends a critical finding sharing its key and
// then 20 related alerts; the admission delivers them in signals of up to
// 20, so the finding is pushed out of the run's latest arrivals before any
// model call's input carried it. When the decoy completes, the finding,
// sent again, must be investigated, not dismissed as a repeat; the
// alerts a model saw are repeats as before.
func TestFindingPushedOutUnseenIsNoRepeat(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(10)
	decoy := r.admit(t0, s, alertOf("d0", "generic:id:decoy", "low", "ip:1.0.0.1"))
	e := r.byWorkflow[decoy.WorkflowID]
	run := &run{State: newState(investigation.Input{AlertID: "d0"})}
	run.Intake.add(r.take(e)) // the start input
	r.started(decoy.WorkflowID)
	run.arrivals() // the first model call

	// During the next model call.
	if o := r.admit(t0.Add(time.Second), s, alertOf("gd1", "guardduty:1:real", "critical", "ip:1.0.0.1", "ip:198.51.100.23")); o.WorkflowID != decoy.WorkflowID {
		t.Fatalf("the finding did not join the decoy: %+v", o)
	}
	run.Intake.add(r.take(e)) // its signal
	for i := range maxEntityQueue {
		r.admit(t0.Add(2*time.Second), s, alertOf(fmt.Sprintf("f%d", i), fmt.Sprintf("generic:id:fill%d", i), "low", "ip:1.0.0.1"))
	}
	run.Intake.add(r.take(e)) // the next signal, milliseconds later
	if e.Dropped != 0 || len(run.Intake.Arrivals) != maxArrivalsKept || run.Intake.Arrivals[0].AlertID != "f0" {
		t.Fatalf("the finding was not pushed out by the fillers: dropped %d, %d kept", e.Dropped, len(run.Intake.Arrivals))
	}
	run.arrivals() // the next model call: the fillers only

	r.closed(t0.Add(time.Hour), closeReport(e, run.Intake))
	if _, open := r.byWorkflow[decoy.WorkflowID]; open {
		t.Fatal("the decoy's close did not end its entity")
	}
	if o := r.admit(t0.Add(2*time.Hour), s, alertOf("gd1", "guardduty:1:real", "critical", "ip:198.51.100.23")); o.Kind != intake.OutcomeStarted {
		t.Errorf("the finding no model saw, sent again: %s (%s), want started", o.Kind, o.Message)
	}
	for _, id := range []string{"generic:id:decoy", "generic:id:fill0", "generic:id:fill19"} {
		if o := r.admit(t0.Add(2*time.Hour), s, alertOf("x", id, "low")); o.Kind != intake.OutcomeRepeat {
			t.Errorf("%s, seen, sent again: %s, want repeat", id, o.Kind)
		}
	}
}

// TestUnseenReport: seen arrivals are not reported; unseen related ones
// and rises are, pushed out or still the latest; past maxMissedKept the
// run says it cannot name them all, and the room then makes none of the
// entity's identities a repeat. A close without the report (an older
// run) decides as before.
func TestUnseenReport(t *testing.T) {
	related := func(id string) investigation.Arrival {
		return investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: id, Identity: id}
	}
	var st IntakeState
	st.add(investigation.ArrivalBatch{Arrivals: []investigation.Arrival{related("seen")}})
	st.Unseen, st.Unshown = 0, 0 // a model call took it (arrivals)
	st.add(investigation.ArrivalBatch{Arrivals: []investigation.Arrival{
		related("pushed"),
		{Kind: investigation.ArrivalSeenAgain, AlertID: "again", Identity: "again", Severity: "low", PrevSeverity: "low"},
		{Kind: investigation.ArrivalSeenAgain, AlertID: "rise", Identity: "rise", Severity: "high", PrevSeverity: "low"},
	}})
	var fill []investigation.Arrival
	for i := range maxArrivalsKept {
		fill = append(fill, related(fmt.Sprintf("fill%d", i)))
	}
	st.add(investigation.ArrivalBatch{Arrivals: fill}) // pushes out seen, pushed, again and rise
	unseen, all := st.unseenReport()
	want := map[string]bool{hashOf("pushed"): true, hashOf("rise"): true}
	for i := range maxArrivalsKept {
		want[hashOf(fmt.Sprintf("fill%d", i))] = true
	}
	if all || len(unseen) != len(want) {
		t.Fatalf("reported %d (all %v), want %d", len(unseen), all, len(want))
	}
	for _, h := range unseen {
		if !want[h] {
			t.Errorf("reported %s, not an unseen related alert or rise", h)
		}
	}
	if len(st.Missed) != 2 {
		t.Errorf("missed %d, want pushed and rise", len(st.Missed))
	}

	for i := range maxMissedKept {
		st.add(investigation.ArrivalBatch{Arrivals: []investigation.Arrival{related(fmt.Sprintf("burst%d", i))}})
	}
	if _, all := st.unseenReport(); !all || len(st.Missed) != maxMissedKept {
		t.Fatalf("past the bound: all %v, %d kept", all, len(st.Missed))
	}

	r := newRoom(t0)
	s := roomSettings(10)
	first := r.admit(t0, s, alertOf("a0", "generic:id:a0", "low", "ip:203.0.113.1"))
	r.admit(t0, s, alertOf("a1", "generic:id:a1", "low", "ip:203.0.113.1"))
	e := r.byWorkflow[first.WorkflowID]
	r.take(e)
	r.started(first.WorkflowID)
	r.closed(t0.Add(time.Hour), investigation.Closed{WorkflowID: e.WorkflowID, Reason: investigation.ClosedCompleted, UnseenAll: true})
	for _, id := range []string{"generic:id:a0", "generic:id:a1"} {
		if o := r.admit(t0.Add(2*time.Hour), s, alertOf("x", id, "low")); o.Kind != intake.OutcomeStarted {
			t.Errorf("%s after a close that could not name its unseen: %s, want started", id, o.Kind)
		}
	}

	old := newRoom(t0)
	first = old.admit(t0, s, alertOf("a0", "generic:id:a0", "low", "ip:203.0.113.1"))
	old.admit(t0, s, alertOf("a1", "generic:id:a1", "low", "ip:203.0.113.1"))
	e = old.byWorkflow[first.WorkflowID]
	old.take(e)
	old.started(first.WorkflowID)
	old.closed(t0.Add(time.Hour), investigation.Closed{WorkflowID: e.WorkflowID, Reason: investigation.ClosedCompleted})
	for _, id := range []string{"generic:id:a0", "generic:id:a1"} {
		if o := old.admit(t0.Add(2*time.Hour), s, alertOf("x", id, "low")); o.Kind != intake.OutcomeRepeat {
			t.Errorf("%s after an older run's close: %s, want repeat", id, o.Kind)
		}
	}
}

// TestQueuedFollowUpIsNotSeen: a concluded, idle investigation queues a
// follow-up about a related alert (askAbout), but 20 more arrive before
// that follow-up's first model call: the alert is pushed out unseen, and
// the close reports it.
func TestQueuedFollowUpIsNotSeen(t *testing.T) {
	var st IntakeState
	st.add(investigation.ArrivalBatch{Arrivals: []investigation.Arrival{{Kind: investigation.ArrivalRelated, AlertID: "gd1", Identity: "guardduty:1:real"}}})
	st.Unseen = 0 // askAbout: the follow-up's model calls are to see it
	var fill []investigation.Arrival
	for i := range maxArrivalsKept {
		fill = append(fill, investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: fmt.Sprintf("f%d", i), Identity: fmt.Sprintf("generic:id:fill%d", i)})
	}
	st.add(investigation.ArrivalBatch{Arrivals: fill})
	if unseen, _ := st.unseenReport(); !slices.Contains(unseen, hashOf("guardduty:1:real")) {
		t.Errorf("the finding pushed out before the follow-up's model call is not reported: %d reported", len(unseen))
	}
}

// missedByDecoy admits a decoy whose run concludes with a critical finding
// pushed out of its latest arrivals unseen (IntakeState.Missed), as in
// TestFindingPushedOutUnseenIsNoRepeat, and returns its entity and run.
func missedByDecoy(t *testing.T, r *Room, s intake.Settings) (*Entity, *run) {
	t.Helper()
	decoy := r.admit(t0, s, alertOf("d0", "generic:id:decoy", "low", "ip:1.0.0.1"))
	e := r.byWorkflow[decoy.WorkflowID]
	run := &run{State: newState(investigation.Input{AlertID: "d0"})}
	run.Intake.add(r.take(e))
	r.started(decoy.WorkflowID)
	run.arrivals()
	r.admit(t0.Add(time.Second), s, alertOf("gd1", "guardduty:1:real", "critical", "ip:1.0.0.1", "ip:198.51.100.23"))
	run.Intake.add(r.take(e))
	for i := range maxEntityQueue {
		r.admit(t0.Add(2*time.Second), s, alertOf(fmt.Sprintf("f%d", i), fmt.Sprintf("generic:id:fill%d", i), "low", "ip:1.0.0.1"))
	}
	run.Intake.add(r.take(e))
	run.arrivals()
	if !slices.Contains(run.Intake.Missed, hashOf("guardduty:1:real")) {
		t.Fatal("setup: the finding was not missed")
	}
	r.concluded(investigation.Concluded{WorkflowID: e.WorkflowID, Session: investigation.IntakeSession(e.WorkflowID, e.Admitted)})
	return e, run
}

// TestForgottenDecoyMakesNoUnseenRepeat: the decoy concludes with the
// finding unseen, and before its run closes the room fills (maxOpen) and
// forgets it, idle. Only its run's Closed names what no model saw, and it
// comes after: the forgotten entity makes none of its related alerts
// repeats, so the finding, sent again, is investigated. The decoy's own
// identity, its run's first alert, is still a repeat.
func TestForgottenDecoyMakesNoUnseenRepeat(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(10)
	e, run := missedByDecoy(t, r, s)
	for i := 0; len(r.Entities) < maxOpen || r.byWorkflow[e.WorkflowID] != nil; i++ {
		if i > 2*maxOpen {
			t.Fatal("setup: the decoy was never forgotten")
		}
		r.admit(t0.Add(3*time.Second), s, alertOf(fmt.Sprintf("o%d", i), fmt.Sprintf("generic:id:other%d", i), "low", fmt.Sprintf("ip:10.%d.%d.1", i/250, i%250)))
	}
	r.closed(t0.Add(time.Hour), closeReport(e, run.Intake)) // too late: no entity
	// Room for the alerts sent again.
	for _, x := range slices.Clone(r.Entities) {
		r.end(t0.Add(time.Hour), x.WorkflowID, false)
	}
	if o := r.admit(t0.Add(2*time.Hour), s, alertOf("gd1", "guardduty:1:real", "critical", "ip:198.51.100.23")); o.Kind == intake.OutcomeRepeat {
		t.Errorf("the finding no model saw, sent again after its decoy was forgotten: %s (%s)", o.Kind, o.Message)
	}
	if o := r.admit(t0.Add(2*time.Hour), s, alertOf("d0", "generic:id:decoy", "low")); o.Kind != intake.OutcomeRepeat {
		t.Errorf("the forgotten decoy's own alert, sent again: %s (%s), want repeat", o.Kind, o.Message)
	}
}

// TestLostNeedsTheGate: an admission run recorded before the
// lost-no-repeat gate replays as it ran: a dropped related alert, one its
// run's Closed reports unseen, and the related alerts of a forgotten
// entity are all repeats after the close (a Lost the room carries
// included), so the replay schedules no StartInvestigation for them.
func TestLostNeedsTheGate(t *testing.T) {
	for _, gated := range []bool{false, true} {
		t.Run(fmt.Sprint("gated=", gated), func(t *testing.T) {
			want := intake.OutcomeRepeat
			if gated {
				want = intake.OutcomeStarted
			}
			s := roomSettings(10)
			// Dropped past the bound, then the close.
			r := newRoom(t0)
			r.lost = gated
			first := r.admit(t0, s, alertOf("a0", "id:a0", "low", "ip:203.0.113.1"))
			for i := range maxEntityQueue + 1 {
				r.admit(t0, s, alertOf(fmt.Sprint("a", i+1), fmt.Sprint("id:a", i+1), "low", "ip:203.0.113.1"))
			}
			e := r.byWorkflow[first.WorkflowID]
			must := func(ok bool, format string, args ...any) {
				t.Helper()
				if !ok {
					t.Fatalf(format, args...)
				}
			}
			must(e.Dropped == 1, "setup: dropped %d", e.Dropped)
			r.take(e)
			r.started(e.WorkflowID)
			e.Members[1].Lost = true // carried from a run under the gate
			r.closed(t0.Add(time.Minute), investigation.Closed{WorkflowID: e.WorkflowID, Reason: investigation.ClosedCompleted,
				Unseen: []string{hashOf("id:a2")}})
			for _, id := range []string{"id:a21", "id:a2", "id:a1"} {
				if o := r.admit(t0.Add(2*time.Minute), s, alertOf("x"+id, id, "low")); o.Kind != want {
					t.Errorf("%s sent again after the close: %s, want %s", id, o.Kind, want)
				}
			}
			// Forgotten to make room.
			r = newRoom(t0)
			r.lost = gated
			e, decoyRun := missedByDecoy(t, r, s)
			for i := 0; r.byWorkflow[e.WorkflowID] != nil; i++ {
				must(i <= 2*maxOpen, "setup: the decoy was never forgotten")
				r.admit(t0.Add(3*time.Second), s, alertOf(fmt.Sprint("o", i), fmt.Sprint("id:other", i), "low"))
			}
			r.closed(t0.Add(time.Hour), closeReport(e, decoyRun.Intake))
			for _, x := range slices.Clone(r.Entities) {
				r.end(t0.Add(time.Hour), x.WorkflowID, false)
			}
			if o := r.admit(t0.Add(2*time.Hour), s, alertOf("gd1", "guardduty:1:real", "critical")); o.Kind != want {
				t.Errorf("the forgotten decoy's unseen finding sent again: %s, want %s", o.Kind, want)
			}
		})
	}
}
