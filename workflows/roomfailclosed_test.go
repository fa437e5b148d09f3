package workflows

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// fillPending fills maxPending with arrivals queued for waiting decoy
// entities (no slot is free for them), as an attacker would.
func fillPending(t *testing.T, r *Room, s intake.Settings) {
	t.Helper()
	for d := range maxPending / maxEntityQueue {
		key := fmt.Sprintf("ip:10.0.%d.1", d)
		r.admit(t0, s, alertOf(fmt.Sprintf("d%d", d), fmt.Sprintf("generic:id:d%d", d), "low", key))
		for i := range maxEntityQueue {
			r.admit(t0, s, alertOf(fmt.Sprintf("d%d-%d", d, i), fmt.Sprintf("generic:id:d%d-%d", d, i), "low", key))
		}
	}
	if r.pending != maxPending {
		t.Fatalf("pending %d, want %d", r.pending, maxPending)
	}
}

// roomAfterSpending is a room of slots slots and a daily budget of 0.01
// USD in which the investigation of a high alert (id, identity) admitted at
// t0 concluded, having spent u on its plan.
func roomAfterSpending(slots int, id, identity string, u investigation.Usage) (*Room, intake.Settings) {
	r := newRoom(t0)
	s := roomSettings(slots)
	s.DailyBudgetUSD = 0.01
	o := r.admit(t0, s, alertOf(id, identity, "high"))
	r.started(o.WorkflowID)
	sp := investigation.Spend{}
	sp.ByPhase.Plan = u
	r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Spend: sp})
	return r, s
}

// A rise of a running investigation that no queue can take (decoys fill
// maxPending) was raised on its member, dropped, reported "delivered to
// it", and its critical alert sent again after the close was a repeat.
// Under room-fails-closed it is shed (sent again later) and the close
// records the severity the run knew.
func TestDroppedRiseIsShedNotRepeat(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	v := r.admit(t0, s, alertOf("v1", "guardduty:1:victim", "low"))
	r.take(r.byWorkflow[v.WorkflowID])
	r.started(v.WorkflowID)
	fillPending(t, r, s)
	rise := r.admit(t0.Add(time.Minute), s, alertOf("v2", "guardduty:1:victim", "critical"))
	if rise.Kind != intake.OutcomeShed || strings.Contains(rise.Message, "delivered to it") {
		t.Errorf("a rise no queue takes: %s: %s (want shed, not delivered)", rise.Kind, rise.Message)
	}
	e := r.byWorkflow[v.WorkflowID]
	if e.Members[0].Severity != "low" || e.Severity != "low" {
		t.Errorf("the shed rise raised the entity to %s, its member to %s", e.Severity, e.Members[0].Severity)
	}
	r.take(e)
	r.closed(t0.Add(10*time.Minute), investigation.Closed{WorkflowID: v.WorkflowID, Reason: investigation.ClosedCompleted,
		Session: investigation.IntakeSession(e.WorkflowID, e.Admitted)})
	if again := r.admit(t0.Add(20*time.Minute), s, alertOf("v2", "guardduty:1:victim", "critical")); again.Kind == intake.OutcomeRepeat {
		t.Errorf("critical rise no model saw, sent again: %s (%s)", again.Kind, again.Message)
	}
}

// A rise queued and then cut by a queue's bound (bound) leaves its member
// at the severity before it.
func TestRiseCutByBoundKeepsSeverity(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	v := r.admit(t0, s, alertOf("v1", "guardduty:1:victim", "low"))
	e := r.byWorkflow[v.WorkflowID]
	r.take(e)
	r.started(v.WorkflowID)
	r.admit(t0, s, alertOf("v2", "guardduty:1:victim", "critical"))
	b := r.take(e)
	fillPending(t, r, s)
	r.putBack(e, b) // as a failed delivery would, with no room left
	if len(e.Queue) != 0 || e.Members[0].Severity != "low" {
		t.Errorf("a rise cut from the queue: queued %d, member at %s (want low)", len(e.Queue), e.Members[0].Severity)
	}
}

// Before the gate a rise no queue took was raised and dropped, as recorded
// runs decided.
func TestDroppedRiseBeforeGate(t *testing.T) {
	r := newRoom(t0)
	r.failClosed = false
	s := roomSettings(1)
	v := r.admit(t0, s, alertOf("v1", "guardduty:1:victim", "low"))
	r.take(r.byWorkflow[v.WorkflowID])
	r.started(v.WorkflowID)
	fillPending(t, r, s)
	if rise := r.admit(t0.Add(time.Minute), s, alertOf("v2", "guardduty:1:victim", "critical")); rise.Kind != intake.OutcomeSeenAgain {
		t.Errorf("before the gate: %s", rise.Kind)
	}
}

// Usage of a model the price table lacks cost 0, so a daily budget was
// never reached: under room-fails-closed it counts as reached, and the
// status says why.
func TestUnpricedModelReachesCeiling(t *testing.T) {
	r, s := roomAfterSpending(10, "a1", "generic:id:1",
		investigation.Usage{Calls: 50, PromptTokens: 50_000_000, OutputTokens: 5_000_000, Model: "gemini-3-flash-preview"})
	held := r.admit(t0.Add(time.Minute), s, alertOf("a2", "generic:id:2", "high"))
	if held.Kind != intake.OutcomeHeld || !strings.Contains(held.Message, "gemini-3-flash-preview") {
		t.Errorf("55M tokens of an unpriced model: spent %.4f USD, next alert %s: %s (want held, naming the model)", r.Spent, held.Kind, held.Message)
	}
	if crit := r.admit(t0.Add(time.Minute), s, alertOf("a3", "generic:id:3", "critical")); crit.Kind == intake.OutcomeHeld {
		t.Errorf("a critical alert held: %s", crit.Message)
	}
	if st := r.status(); st.Unpriced != "gemini-3-flash-preview" {
		t.Errorf("status names unpriced model %q", st.Unpriced)
	}
	r.tick(t0.Add(24 * time.Hour))
	if r.overBudget() {
		t.Error("a new day still over the budget")
	}
}

// Low-severity noise filling the room shed a critical finding: under
// room-fails-closed it takes the place of the newest low entity, which is
// no repeat.
func TestCriticalDisplacesLowNoise(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(10)
	for i := range maxOpen {
		r.admit(t0, s, alertOf(fmt.Sprintf("n%d", i), fmt.Sprintf("generic:id:noise%d", i), "low"))
	}
	o := r.admit(t0.Add(time.Second), s, alertOf("crit", "guardduty:1:real", "critical"))
	if o.Kind == intake.OutcomeShed {
		t.Fatalf("critical finding shed behind %d low-severity entities: %s", maxOpen, o.Message)
	}
	if len(r.Entities) != maxOpen || r.Counters.Displaced != 1 || r.byIdentity[hashOf(fmt.Sprintf("generic:id:noise%d", maxOpen-1))] != nil {
		t.Errorf("open %d, displaced %d; the newest low one still open", len(r.Entities), r.Counters.Displaced)
	}
	if again := r.admit(t0.Add(time.Minute), s, alertOf("crit2", fmt.Sprintf("generic:id:noise%d", maxOpen-1), "critical")); again.Kind == intake.OutcomeRepeat {
		t.Errorf("a displaced alert sent again is a repeat: %s", again.Message)
	}
	if low := r.admit(t0.Add(time.Minute), s, alertOf("low2", "generic:id:more", "low")); low.Kind != intake.OutcomeShed {
		t.Errorf("a low alert displaced a low one: %s", low.Kind)
	}
}

// Once the budget is spent, held entities filled the room until UTC
// midnight and a critical finding was shed.
func TestCriticalDisplacesHeld(t *testing.T) {
	r, s := roomAfterSpending(1, "a0", "generic:id:a0", investigation.Usage{Calls: 1, PromptTokens: 100000, Model: "gemini-2.5-flash"})
	for i := 1; len(r.Entities) < maxOpen; i++ {
		r.admit(t0.Add(time.Minute), s, alertOf(fmt.Sprintf("m%d", i), fmt.Sprintf("generic:id:m%d", i), "medium"))
	}
	r.admit(t0.Add(time.Minute), s, alertOf("last", "generic:id:last", "medium")) // takes the concluded one's place
	if o := r.admit(t0.Add(time.Hour), s, alertOf("crit", "guardduty:1:real", "critical")); o.Kind == intake.OutcomeShed {
		t.Errorf("over budget, %d held entities; critical finding: %s", maxOpen-1, o.Message)
	}
}
