package workflows

import (
	"slices"
	"time"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// What the waiting room learns from the investigations it started: a
// start's outcome, a conclusion, a close, the periodic check.

// trustCarried: the first run under the room-guards gate takes a room from
// a run without it, whose entities attached to an older run do not say so
// (Attached was not kept): each open entity takes any run of its workflow
// ID as its own, as before the gate, so that run's conclusion and close
// still reach it. Only what the room carries changes, and only in a run
// under the gate that was continued from one without it, which no recorded
// history holds (each starts empty): no gate of its own.
func (r *Room) trustCarried() {
	if r.Guarded {
		return
	}
	r.Guarded = true
	for _, e := range r.Entities {
		if e.State == intake.StateRunning || e.State == intake.StateConcluded {
			e.Attached = true
		}
	}
}

// closingRun says whether session is a run's that said it closed (within
// endedKeep): found open, it is closing, not an investigation to attach to.
func (r *Room) closingRun(session string) bool {
	if session == "" {
		return false
	}
	h := hashOf(session)
	return slices.ContainsFunc(r.Ended, func(x EndedRun) bool { return x.Hash == h })
}

// ended remembers the run of a Closed signal that is not a hand-back (a
// hand-back names the run's session as its workflow ID).
func (r *Room) ended(now time.Time, c investigation.Closed) {
	if c.Session == "" || c.Session == c.WorkflowID || handBack(c) {
		return
	}
	h := hashOf(c.Session)
	r.Ended = append(r.Ended, EndedRun{Hash: h, At: now})
	r.Forgotten = slices.DeleteFunc(r.Forgotten, func(f ForgottenRun) bool { return f.Hash == h })
	if over := len(r.Ended) - maxEnded; over > 0 {
		r.Ended = r.Ended[over:]
	}
}

// handBack says whether a Closed signal is a hand-back: it returns alerts,
// or counts some it could not (a negative count, only forged, counts none,
// so ended and closed agree on a plain close). A forged negative count
// reached only ended's old "!= 0" test: no recorded history holds one.
func handBack(c investigation.Closed) bool {
	return len(c.Returned.Arrivals) > 0 || c.Returned.Dropped > 0
}

// handedBack counts what a hand-back could not return (a signal's number,
// so bounded).
func (r *Room) handedBack(c investigation.Closed) {
	if r.guards && handBack(c) {
		r.Counters.HandBackDropped += int64(min(max(c.Returned.Dropped, 0), 1<<20))
	}
}

// started records the start of an entity's investigation.
func (r *Room) started(wf string) {
	if e := r.byWorkflow[wf]; e != nil && e.State == intake.StateStarting {
		e.State, e.RetryAt = intake.StateRunning, time.Time{}
	}
}

// concluded records a conclusion: the entity no longer holds a slot, and
// what it cost since its last report counts against today's budget.
func (r *Room) concluded(c investigation.Concluded) {
	e := r.byWorkflow[c.WorkflowID]
	if e == nil || !r.runOf(e, c.Session) {
		return
	}
	r.charge(e, c.Spend)
	switch e.State {
	case intake.StateRunning, intake.StateStarting:
		e.State = intake.StateConcluded
	case intake.StateWaiting:
		e.RunConcluded = r.guards
	}
}

// charge adds to today's spend what the entity's investigation cost since
// its last report, each model's part of a phase at its own price.
//
// Pricing the parts (Usage.ByModel) is behind the usage-priced-by-model
// gate, asked only when a report carries a split: an investigation on newer
// code sends its split to an admission run still on older code (for up to
// the hour before it continues as new, or in a rolling restart), which
// read such a phase as investigation.MixedModels, unpriced (a fail-closed
// room then held its starts); replayed here, it must decide so again. A
// report without a split records no marker and is priced as before. The
// table is the one the admit requests carried (an empty one becomes
// pricing.Default(), which now prices gemini-embedding-001, a model no
// recorded phase used alone).
func (r *Room) charge(e *Entity, s investigation.Spend) {
	phases := s.ByPhase.Phases()
	if splits(phases) && r.pricesParts != nil && !r.pricesParts() {
		for i := range phases {
			// Each phase as its Model label alone, as before the split.
			phases[i].Usage.ByModel = investigation.ModelSplit{}
		}
	}
	cost, unpriced := r.Settings.Prices.Estimates(phases)
	if r.failClosed && len(unpriced) > 0 {
		// Its cost is unknown, not 0: a ceiling that counted it as 0
		// would never be reached (overBudget).
		r.Unpriced = plainText(unpriced[0], maxRoomShared)
	}
	r.Spent += max(cost-e.Cost, 0)
	e.Cost = max(e.Cost, cost)
}

// splits says whether a phase of a report is split by model.
func splits(phases []investigation.PhaseUsage) bool {
	return slices.ContainsFunc(phases, func(p investigation.PhaseUsage) bool {
		return p.Usage.ByModel != (investigation.ModelSplit{})
	})
}

// closed applies an investigation's investigation_closed signal: what it
// spent since its last conclusion is charged (a failed or cancelled run
// never concluded), and only a completed run makes its identities repeats.
func (r *Room) closed(now time.Time, c investigation.Closed) {
	r.ended(now, c)
	e := r.byWorkflow[c.WorkflowID]
	if e == nil || !r.runOf(e, c.Session) {
		return
	}
	if r.guards && handBack(c) {
		// A hand-back follows its run's own Closed, which ended the entity:
		// one found here is newer (a run without a session names its
		// workflow ID in it). Only its alerts count (readmit).
		return
	}
	if r.guards && (e.State == intake.StateWaiting || e.State == intake.StateStarting) {
		// Its run, made by a start whose answer was lost, closed before a
		// start said it began: counted here, since that start's answer (if
		// one comes) is ignored (startWaiting).
		r.Counters.Started++
	}
	if r.fixed { // runs before the gate ignored it (a newer investigation may send it)
		r.charge(e, c.Spend)
	}
	// Rises still queued never reached the run that just told us it
	// closed (end drops seen-agains). Only here, not where a check or a
	// failed signal ends an entity: a run's own close may still be on its
	// way there, and would be taken for the new run's under the same ID.
	var rises []investigation.Arrival
	if r.rises && (e.State == intake.StateRunning || e.State == intake.StateConcluded) {
		rises = slices.DeleteFunc(slices.Clone(e.Queue), func(a investigation.Arrival) bool { return !rose(a) })
	}
	if r.lost {
		unseen(e, c)
	}
	r.end(now, e.WorkflowID, !r.fixed || c.Reason == investigation.ClosedCompleted)
	for _, a := range rises {
		r.admitRise(now, a)
	}
}

// unseen marks Lost the members whose arrivals the closing run reports
// no model call saw (Closed.Unseen: pushed out of its latest arrivals, or
// still unseen), every member when it could not name them all
// (UnseenAll, or a list over the run's bound, only forged), so end makes
// them no repeats. Under the lost-no-repeat gate only: the Closed of a
// newer run reaches an admission run still on older code (across worker
// versions, or in a rolling restart), which makes them repeats.
func unseen(e *Entity, c investigation.Closed) {
	all := c.UnseenAll || len(c.Unseen) > maxMissedKept
	if !all && len(c.Unseen) == 0 {
		return
	}
	for i := range e.Members {
		if all || slices.Contains(c.Unseen, e.Members[i].Hash) {
			e.Members[i].Lost = true
		}
	}
}

// runOf says whether a signal of the run with session is about entity e.
// Under the guards, a run started for e has the session its start gives
// (investigation.IntakeSession of its workflow ID and admission time); any
// other is an older run of the workflow ID, whose entity the room forgot
// (it concluded, idle, and was forgotten to make room), and its spend and
// close are not e's. A run without a session (started before sessions)
// sends its workflow ID and cannot be told apart; an attached entity took
// an older run as its own. A waiting entity that never had a start has no
// run: no signal is its own (one whose start failed may have one, made by
// the lost attempt).
func (r *Room) runOf(e *Entity, session string) bool {
	if !r.guards {
		return true
	}
	if e.State == intake.StateWaiting && e.Attempts == 0 && !e.Attached {
		return false
	}
	return session == "" || session == e.WorkflowID || e.Attached ||
		session == investigation.IntakeSession(e.WorkflowID, e.Admitted)
}

// close forgets an entity whose investigation concluded (or that is
// forgotten to make room): its identities are remembered for the repeat
// window (but for those Lost), arrivals it could not take are admitted
// again.
func (r *Room) close(now time.Time, wf string) { r.end(now, wf, true) }

// end forgets an entity; investigated says its investigation completed, so
// its identities are repeats for the repeat window, but for those no
// model saw: related arrivals still queued (admitted again, alone), and
// under the lost-no-repeat gate those Lost: dropped, delivered and never
// shown, or related alerts of an entity forgotten open. One that failed,
// was cancelled or never started leaves them all unknown: their next
// alert is investigated.
func (r *Room) end(now time.Time, wf string, investigated bool) {
	e := r.byWorkflow[wf]
	if e == nil {
		return
	}
	r.Entities = slices.DeleteFunc(r.Entities, func(x *Entity) bool { return x == e })
	delete(r.byWorkflow, wf)
	undelivered := r.take(e).Arrivals
	for _, m := range e.Members {
		if r.byIdentity[m.Hash] == e {
			delete(r.byIdentity, m.Hash)
		}
		if investigated && !(r.lost && m.Lost) && !slices.ContainsFunc(undelivered, func(a investigation.Arrival) bool {
			return a.Kind == investigation.ArrivalRelated && hashOf(a.Identity) == m.Hash
		}) {
			r.Closed = append(r.Closed, ClosedIdentity{Hash: m.Hash, Severity: m.Severity, At: now, WorkflowID: wf})
		}
	}
	r.members -= len(e.Members)
	if over := len(r.Closed) - maxClosed; over > 0 {
		r.Closed = r.Closed[over:]
	}
	for _, k := range e.Keys {
		if r.byKey[k] == e {
			delete(r.byKey, k)
		}
	}
	for _, a := range undelivered {
		if a.Kind == investigation.ArrivalRelated {
			r.admitAlone(now, a)
		}
	}
}

// startFailed puts an entity whose start failed back to waiting, with the
// arrivals its start input took, to be tried again after a back-off; after
// maxStartAttempts it is given up (counted in the status), and its related
// alerts are admitted again, each on its own. None of its identities is a
// repeat: nothing investigated them.
func (r *Room) startFailed(now time.Time, e *Entity, b investigation.ArrivalBatch) {
	if r.byWorkflow[e.WorkflowID] != e || e.State != intake.StateStarting {
		return
	}
	e.Attempts++
	if e.Attempts >= maxStartAttempts {
		r.requeue(e, b) // all of them: end admits the related ones again
		r.Counters.StartsFailed++
		// Those it counted as dropped no one else will count.
		r.Counters.GivenUpDropped += int64(e.Dropped)
		r.end(now, e.WorkflowID, false)
		return
	}
	r.putBack(e, b)
	e.State, e.RetryAt = intake.StateWaiting, now.Add(startBackoff(e.Attempts))
}

// forget remembers the run of an open entity the room forgets, and what it
// had reported spending, for an entity that attaches to the run later. An
// attached entity's run is the older one its start named (RunHash); one
// whose session the start did not know is not remembered (attached
// charges such a run whole). No gate: a recorded history would need an
// attached entity forgotten and a later attach to its run; none has one.
func (r *Room) forget(e *Entity) {
	h := hashOf(investigation.IntakeSession(e.WorkflowID, e.Admitted))
	if e.Attached {
		if e.RunHash == "" {
			return
		}
		h = e.RunHash
	}
	r.Forgotten = append(slices.DeleteFunc(r.Forgotten, func(f ForgottenRun) bool { return f.Hash == h }), ForgottenRun{Hash: h, Cost: e.Cost})
	if over := len(r.Forgotten) - maxForgotten; over > 0 {
		r.Forgotten = r.Forgotten[over:]
	}
}

// attached records a start that found its identity's investigation open
// already (an earlier admission started it): the entity's first alert and
// the arrivals its start input took go to that run by the alerts signal,
// as news does. session is that run's (the start's answer; "" unknown).
func (r *Room) attached(e *Entity, b investigation.ArrivalBatch, session string) {
	if r.byWorkflow[e.WorkflowID] != e {
		return
	}
	if session != "" {
		e.RunHash = hashOf(session)
	}
	if r.guards && session != "" {
		// The run reports its spend as a running total, of which the
		// forgotten entity was charged its last report: only what it
		// spends beyond that is this entity's. A run the room does not
		// remember (past maxForgotten, forgotten before the gate or while
		// attached to a run of unknown session) is charged whole, as before: the budget errs on
		// the side of holding back.
		h := hashOf(session)
		if i := slices.IndexFunc(r.Forgotten, func(f ForgottenRun) bool { return f.Hash == h }); i >= 0 {
			e.Cost = max(e.Cost, r.Forgotten[i].Cost)
			r.Forgotten = slices.Delete(r.Forgotten, i, i+1)
		}
	}
	r.putBack(e, b)
	m := e.Members[0]
	// A reinvestigation attached to the run it was to replace (forgotten,
	// idle, still open) tells that run the severity it knew, so its alert
	// seen higher asks whether the verdict changes (verdictQuestion). Only
	// the signal's payload changes, which replay does not compare: no gate.
	first := investigation.Arrival{Kind: investigation.ArrivalSeenAgain, AlertID: e.AlertID, Identity: e.Identity,
		Severity: m.Severity, Title: e.Title, Count: m.Count, Times: 1, At: e.Admitted, PrevSeverity: e.PrevSeverity}
	// Set in every run: one without the room-guards gate never reads it
	// (runOf), and the run it continues as may take the gate.
	e.Attached = true
	e.Queue = append([]investigation.Arrival{first}, e.Queue...)
	r.pending++
	if r.guards {
		r.boundAfterFirst(e)
	}
	r.started(e.WorkflowID)
}

// resumed records a start that found the run an earlier round of it made
// (that round's answer was lost): the run holds that round's input, not
// this one's, so the arrivals this round took are signalled to it. Which
// of them the earlier round's input held already the room cannot tell (a
// failed round puts its batch back in front of newer ones), so all go: a
// repeated arrival is one more note in the run, a missing one an alert
// acknowledged and never investigated.
//
// A run that concluded while the entity waited (RunConcluded) leaves it
// concluded: no gate, as only results carrying Found reach resumed and no
// recorded history holds one.
func (r *Room) resumed(e *Entity, b investigation.ArrivalBatch) {
	r.putBack(e, b)
	r.started(e.WorkflowID)
	if e.RunConcluded && e.State == intake.StateRunning && r.byWorkflow[e.WorkflowID] == e {
		e.State = intake.StateConcluded
	}
}

// toCheck returns the workflow IDs of the open entities the next check
// asks about (not waiting or starting, no start in flight), at most
// maxChecked, with each one's Seq (a newer entity may take the ID while the
// check runs). Under the guards it takes them in turn, from after the last
// check's last (CheckedTo), round the room; before, always the first
// maxChecked, which left a run admitted after them unchecked until they
// closed.
func (r *Room) toCheck(inflight map[string]bool) (ids []string, seqs map[string]int64) {
	seqs = map[string]int64{}
	open := func(e *Entity) bool {
		return e.State != intake.StateWaiting && e.State != intake.StateStarting && !inflight[e.WorkflowID]
	}
	take := func(after bool) {
		for _, e := range r.Entities {
			if len(ids) < maxChecked && open(e) && (e.Seq > r.CheckedTo) == after {
				ids = append(ids, e.WorkflowID)
				seqs[e.WorkflowID] = e.Seq
			}
		}
	}
	if !r.guards {
		r.CheckedTo = 0
		take(true)
		return ids, seqs
	}
	take(true)
	take(false)
	if len(ids) > 0 {
		r.CheckedTo = seqs[ids[len(ids)-1]]
		if len(ids) < maxChecked { // every open entity taken: start from the first next time
			r.CheckedTo = 0
		}
	}
	return ids, seqs
}
