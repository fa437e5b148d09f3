package workflows

import (
	"slices"
	"time"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// The waiting room's queues of arrivals for its entities, and the alerts
// that come back to it to be admitted again.

// admitAlone admits a related alert that never reached an investigation:
// it gets one of its own (its grouping keys are not kept, so it starts
// alone). It was acknowledged long ago, so one the full room sheds is kept
// in Readmits (admitted again once there is room), or counted past
// maxReadmits.
func (r *Room) admitAlone(now time.Time, a investigation.Arrival) {
	o := r.admit(now, r.Settings, intake.Alert{AlertID: a.AlertID, Identity: a.Identity, Count: a.Count, Severity: a.Severity, Source: a.Source, Title: a.Title})
	r.Counters.Alerts--
	if e := r.byWorkflow[o.WorkflowID]; r.guards && rose(a) && e != nil && e.AlertID == a.AlertID && (e.State == intake.StateWaiting || e.State == intake.StateStarting) {
		// A rise is a reinvestigation even when the room no longer
		// remembers its closed identity (a retry from Readmits after the
		// repeat window's bound dropped it): the last run knew less.
		if !e.Reinvestigate {
			r.Counters.Reinvested++
		}
		e.Reinvestigate = true
		if e.PrevSeverity == "" {
			e.PrevSeverity = plainAlert(intake.Alert{Severity: a.PrevSeverity}).Severity
		}
	}
	if o.Kind != intake.OutcomeShed || !r.fixed {
		return
	}
	r.Counters.Shed-- // no intake was told to send it again
	if len(r.Readmits) < maxReadmits {
		r.Readmits = append(r.Readmits, plainArrival(a))
	} else {
		r.Counters.ReadmitsLost++
	}
}

// retryReadmits admits the kept readmissions again, once an entity left.
func (r *Room) retryReadmits(now time.Time) {
	if len(r.Readmits) == 0 || len(r.Entities) >= maxOpen && !slices.ContainsFunc(r.Entities, func(e *Entity) bool {
		return e.State == intake.StateConcluded && len(e.Queue) == 0
	}) {
		return
	}
	kept := r.Readmits
	r.Readmits = nil
	for _, a := range kept {
		r.admitAlone(now, a)
	}
}

// readmit admits again the related alerts that reached an investigation
// too late (it was closing, or its entity closed while they were on their
// way). The closing entity remembered their identities as closed; they
// were never investigated, so they are not repeats. Under the late-rise
// gate, an alert seen again at a higher severity is investigated again
// (admitRise); one seen again at no higher severity stays dropped.
func (r *Room) readmit(now time.Time, arrivals []investigation.Arrival) {
	if r.guards && len(arrivals) > maxReturned {
		// A signal, not the admit update's validator: a forged one may
		// return any number; handBack sends at most maxReturned at once.
		// Lost are only those that would have been admitted.
		for _, a := range arrivals[maxReturned:] {
			if admissible(a) && (a.Kind == investigation.ArrivalRelated || r.rises && rose(a)) {
				r.Counters.ReadmitsLost++
			}
		}
		arrivals = arrivals[:maxReturned]
	}
	for _, a := range arrivals {
		if r.guards && !admissible(a) {
			continue
		}
		switch {
		case a.Kind == investigation.ArrivalRelated:
			r.forgetClosed(hashOf(a.Identity))
			r.admitAlone(now, a)
		case r.rises && rose(a):
			r.admitRise(now, a)
		}
	}
}

// rose says whether an arrival is its alert seen again at a higher
// severity than before (verdictQuestion's news).
func rose(a investigation.Arrival) bool {
	return a.Kind == investigation.ArrivalSeenAgain && a.PrevSeverity != "" && intake.Rank(a.Severity) > intake.Rank(a.PrevSeverity)
}

// admitRise admits a rise that its investigation never saw as the same
// alert arriving after the close would be: a higher severity than the
// closed run knew makes a new run of its identity (Reinvestigate, admit).
// The room remembered the identity closed at the severity it had queued,
// so that is lowered to what the run knew (PrevSeverity) first. It is
// admitted only if it is an alert an admit request could carry (Check):
// it comes in a signal, not through the update's validator.
func (r *Room) admitRise(now time.Time, a investigation.Arrival) {
	if !admissible(a) {
		return
	}
	h, prev := hashOf(a.Identity), plainAlert(intake.Alert{Severity: a.PrevSeverity}).Severity
	for i := range r.Closed {
		if r.Closed[i].Hash == h && intake.Rank(prev) < intake.Rank(r.Closed[i].Severity) {
			r.Closed[i].Severity = prev
		}
	}
	r.admitAlone(now, a)
}

// maxReturned bounds the alerts one signal returns (Closed.Returned), as
// checkArrivals bounds one alerts input.
const maxReturned = maxArrivalBatch

// admissible says whether an arrival that came back in a signal is an
// alert an admit request could carry (Alert.Check): the room keeps its ID,
// identity and source exactly, so one that is not plain or too long would
// break its size bound (admit makes the title plain).
func admissible(a investigation.Arrival) bool {
	return (intake.Alert{AlertID: a.AlertID, Identity: a.Identity, Source: a.Source, Title: a.Title}).Check() == nil
}

// plainArrival is a returned arrival as Readmits keeps it: every text it
// keeps whole is bounded and plain, as plainAlert makes an alert (its ID,
// identity and source passed admissible; its kind is related or seen
// again). The rank of each severity and the title admit reads are
// unchanged, so no decision changes: no gate.
func plainArrival(a investigation.Arrival) investigation.Arrival {
	sev := func(s string) string {
		if s == "" {
			return ""
		}
		return plainAlert(intake.Alert{Severity: s}).Severity
	}
	a.Severity, a.PrevSeverity = sev(a.Severity), sev(a.PrevSeverity)
	a.Title = plainText(a.Title, maxRoomTitle)
	a.Shared = plainText(a.Shared, maxRoomShared)
	return a
}

// take removes the arrivals queued for an entity, to be delivered (in its
// start input, or by a signal).
func (r *Room) take(e *Entity) investigation.ArrivalBatch {
	b := investigation.ArrivalBatch{Arrivals: e.Queue, Dropped: e.Dropped}
	r.pending -= len(e.Queue)
	e.Queue, e.Dropped = nil, 0
	return b
}

// requeue puts back arrivals whose delivery failed for now; false if the
// entity is closed already.
func (r *Room) requeue(e *Entity, b investigation.ArrivalBatch) bool {
	if r.byWorkflow[e.WorkflowID] != e {
		return false
	}
	e.Queue = append(b.Arrivals, e.Queue...)
	e.Dropped += b.Dropped
	r.pending += len(b.Arrivals)
	return true
}

// putBack requeues the arrivals a start input took for an entity that
// stays open; under the room-guards gate within the queue bounds (bound),
// so that failed starts cannot grow the room past them. The recorded
// histories under the gate replay unchanged (TestReplayRecordedHistories).
func (r *Room) putBack(e *Entity, b investigation.ArrivalBatch) {
	if r.requeue(e, b) && r.guards {
		r.bound(e)
	}
}

// bound keeps an entity's queue within maxEntityQueue and its share of
// maxPending, as enqueue does: the oldest stay, the rest are counted in
// Dropped (the run is told how many).
func (r *Room) bound(e *Entity) {
	keep := min(len(e.Queue), maxEntityQueue, max(maxPending-(r.pending-len(e.Queue)), 0))
	if over := len(e.Queue) - keep; over > 0 {
		for _, a := range e.Queue[keep:] {
			r.lose(e, a)
		}
		e.Queue = slices.Clip(e.Queue[:keep])
		e.Dropped += over
		r.pending -= over
	}
}

// boundAfterFirst bounds an attached entity's queue as bound does, but
// never cuts its first arrival, the alert the entity was admitted for
// (deliver sends nothing for an empty queue, and the run would never hear
// of it): when the other queues fill maxPending, the newest arrival of the
// longest one gives way (counted in its Dropped). No gate: a recorded
// history would need maxPending (400) arrivals pending at an attach, and
// the fixtures hold a few.
func (r *Room) boundAfterFirst(e *Entity) {
	for len(e.Queue) > 0 && r.pending-len(e.Queue) >= maxPending {
		var longest *Entity
		for _, x := range r.Entities {
			// Nor is another attached entity's own first alert cut.
			first := x.Attached && len(x.Queue) == 1 && x.Queue[0].AlertID == x.AlertID
			if x != e && len(x.Queue) > 0 && !first && (longest == nil || len(x.Queue) > len(longest.Queue)) {
				longest = x
			}
		}
		if longest == nil {
			break
		}
		r.lose(longest, longest.Queue[len(longest.Queue)-1])
		longest.Queue = slices.Clip(longest.Queue[:len(longest.Queue)-1])
		longest.Dropped++
		r.pending--
	}
	r.bound(e)
}
