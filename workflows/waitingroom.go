package workflows

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
)

// The waiting room: the admission workflow's decisions, as pure functions
// of its state and the time, so that they replay exactly and are tested
// without Temporal. admission.go runs them and does what they decide
// (starts, signals, timers, continue-as-new). design/intake.md explains
// the rules.

// Bounds of the room, so that its state (carried whole across
// continue-as-new) stays far below Temporal's 2 MB payload limit whatever
// arrives: TestRoomStateIsBounded fills every bound.
const (
	maxOpen         = 600  // entities waiting, starting, running or concluded
	maxMembers      = 3000 // identities joined to open entities (each one's first aside)
	maxEntityMember = 200  // identities tracked in one entity
	maxPending      = 400  // arrivals not yet delivered, all entities together
	maxEntityQueue  = 20   // arrivals queued for one entity
	maxClosed       = 2000 // closed identities remembered for the repeat window
	maxRoomTitle    = 120  // bytes of a title kept
	maxRoomShared   = 100  // bytes of a shared indicator kept (it is shown, not matched)
	// maxRoomBytes bounds the room's JSON, the continue-as-new input: every
	// text it keeps is plain (plainAlert), so the byte bounds above are its
	// encoded size. TestRoomStateIsBounded measures the whole AdmissionInput
	// with every field at its widest, settings included (about 1.51 MiB);
	// the server refuses a payload over 2 MiB (limit.blobSize.error), so
	// this leaves it over 400 KiB.
	maxRoomBytes = 1600 << 10
)

// plainAlert is an alert as the room keeps it. JSON writes '<', '&' or a
// control character in 6 bytes, so text full of them would make the room
// six times its byte bounds and the server would end the workflow at
// continue-as-new: the title gets look-alikes (plainText), a severity that
// is none of the five levels (all of which rank alike) is "unknown", and
// Check refuses an ID, identity, source or traceparent that is not plain.
// No GetVersion gate: this changes text the room keeps and passes on,
// never a decision, a workflow ID or a command. The identity names
// workflows, so it is refused by Check (a validator, not run on replay),
// not rewritten here.
func plainAlert(a intake.Alert) intake.Alert {
	a.Title = plainText(a.Title, maxRoomTitle)
	if intake.Rank(a.Severity) == intake.Rank(alerts.SeverityUnknown) {
		a.Severity = alerts.SeverityUnknown
	}
	if !intake.Plain(a.Traceparent) {
		a.Traceparent = ""
	}
	if len(a.Traceparent) > traceparentBytes {
		// A later version's fields follow these; the span context read
		// from it (telemetry.WithTraceparent) is the same.
		a.Traceparent = a.Traceparent[:traceparentBytes]
	}
	return a
}

// traceparentBytes is what a W3C traceparent's span context takes: version,
// trace ID, parent ID and flags (all a parser of version 00 reads of any).
const traceparentBytes = 55

// plainText is s with each character JSON escapes replaced by one it
// writes as itself (invalid UTF-8 by U+FFFD), clipped to n bytes.
func plainText(s string, n int) string {
	return clip.String(strings.Map(func(r rune) rune {
		switch {
		case r == '<':
			return '‹'
		case r == '>':
			return '›'
		case r == '&':
			return '＆'
		case r == '"':
			return '\''
		case r == '\\':
			return '/'
		case r < 0x20 || r == '\u2028' || r == '\u2029':
			return ' '
		}
		return r
	}, s), n)
}

// shedRetry is how long a shed alert should wait before it is sent again.
const shedRetry = 30 * time.Second

// A failed start (Temporal or the workers out of reach for the start's 10
// minutes) puts its entity back to waiting, tried again after startBackoff,
// at most maxStartAttempts times; maxReadmits related alerts to admit again
// wait for room when the waiting room is full (past that they are counted).
const (
	maxStartAttempts = 5
	maxReadmits      = 16 // arrivals kept plain (plainArrival): TestRoomStateIsBounded counts them in the room's size
)

// A run's Closed comes before its last progress write, its hand-back and
// its completion: its session is kept (Room.Ended) for endedKeep, longer
// than all of a start's back-offs, at most maxEnded of them.
const (
	maxEnded  = 200
	endedKeep = 30 * time.Minute
	// maxForgotten bounds Room.Forgotten: runs forgotten while open, kept
	// until they close (ended) or newer ones push them out.
	maxForgotten = 100
)

// startBackoff is the wait before the start after the n-th failed one:
// 1, 2, 4, 8 minutes.
func startBackoff(n int) time.Duration {
	return time.Minute << min(max(n-1, 0), 5)
}

// Room is the admission workflow's state.
type Room struct {
	Settings intake.Settings `json:"settings"`
	// Entities are the open investigations and those waiting to start, in
	// the order they were admitted.
	Entities []*Entity `json:"entities,omitempty"`
	// Closed are the identities of closed investigations, oldest first,
	// kept for the repeat window.
	Closed   []ClosedIdentity `json:"closed,omitempty"`
	Day      string           `json:"day"`
	Spent    float64          `json:"spent"`
	Counters intake.Counters  `json:"counters"`
	Since    time.Time        `json:"since"`
	// Seq numbers admissions, the tie-break of the waiting order.
	Seq int64 `json:"seq"`
	// NextCheck is when the open investigations are checked next.
	NextCheck time.Time `json:"next_check,omitzero"`
	// CheckedTo is the admission number (Seq) of the last entity the last
	// check took: under the guards the next one starts after it, so that
	// more than maxChecked open entities are all checked in turn.
	CheckedTo int64 `json:"checked_to,omitempty"`
	// Readmits are related alerts to admit again that found the waiting
	// room full: acknowledged, so kept (at most maxReadmits) and admitted
	// once there is room.
	Readmits []investigation.Arrival `json:"readmits,omitempty"`
	// Guarded: a run under the room-guards gate held the room, so every
	// entity it attached says so (trustCarried).
	Guarded bool `json:"guarded,omitempty"`
	// Ended are the runs that said they closed, newest last, kept for
	// endedKeep: a start that finds one of them open waits (closingRun).
	Ended []EndedRun `json:"ended,omitempty"`
	// Forgotten are the runs of entities forgotten while open (idle, to
	// make room) with the cost each had reported, newest last, at most
	// maxForgotten: an entity attached to one later is charged only beyond
	// it.
	Forgotten []ForgottenRun `json:"forgotten,omitempty"`

	// fixed: this run took the admission-outcomes gate (admission.go), so
	// failed runs and starts make no repeats, check results are matched to
	// the entity they described and shed readmissions are kept. Recorded
	// runs without it decide as they did.
	fixed bool
	// rises: this run took the late-rise-reinvestigated gate
	// (admission.go), so an alert seen again at a higher severity that
	// never reached its closed investigation is investigated again
	// (admitRise). Recorded runs without it dropped it.
	rises bool
	// guards: this run took the room-guards gate (admission.go): alerts
	// returned by a signal are checked as an admit request's and bounded,
	// a hand-back or a signal of another run than the entity's ends or
	// charges nothing, and a shed reinvestigation keeps its closed
	// identity. Recorded runs without it decide as they did.
	guards bool
	now    time.Time // of the last tick or admit

	// Indexes, rebuilt from the above after continue-as-new (index).
	byIdentity map[string]*Entity
	byKey      map[string]*Entity
	byWorkflow map[string]*Entity
	members    int
	pending    int
}

// Entity is one investigation the room knows: waiting, starting, running
// or concluded (and still open for follow-ups).
type Entity struct {
	WorkflowID string `json:"w"`
	AlertID    string `json:"a"`
	// Identity is the first alert's identity; the workflow ID derives from it.
	Identity string    `json:"i"`
	Title    string    `json:"t,omitempty"`
	Severity string    `json:"s"`
	State    string    `json:"st"`
	Admitted time.Time `json:"at"`
	Seq      int64     `json:"q"`
	// Keys are the first alert's grouping keys, hashed (keyHash); the
	// entity takes related alerts until GroupUntil.
	Keys       []string  `json:"k,omitempty"`
	GroupUntil time.Time `json:"gu,omitzero"`
	Released   bool      `json:"r,omitempty"`
	// Reinvestigate starts a new run even if its identity's last run
	// closed within the repeat window (its severity rose); PrevSeverity is
	// the severity that run knew.
	Reinvestigate bool   `json:"ri,omitempty"`
	PrevSeverity  string `json:"ps,omitempty"`
	// Attached: its start found an older run of its workflow ID open and
	// took it as its investigation (attached), so that run's signals are
	// its own although their session is not the one its start would give.
	Attached bool `json:"ad,omitempty"`
	// RunHash is the attached run's session, hashed ("" when the start did
	// not know it), so forget can remember that run too.
	RunHash string `json:"rh,omitempty"`
	// Traceparent is the first alert's (intake.Alert.Traceparent).
	Traceparent string `json:"tp,omitempty"`
	// Members are the identities in the entity, the first alert's first.
	Members []Member `json:"m"`
	// Queue holds arrivals not yet delivered: given in the start input
	// while waiting, signalled once it runs. Dropped counts those left out.
	Queue   []investigation.Arrival `json:"p,omitempty"`
	Dropped int                     `json:"d,omitempty"`
	Alerts  int                     `json:"n"`
	// Cost is the estimated cost the investigation last reported.
	Cost float64 `json:"c,omitempty"`
	// Attempts counts failed starts; the next waits until RetryAt.
	Attempts int       `json:"sa,omitempty"`
	RetryAt  time.Time `json:"ra,omitzero"`
	// RunConcluded: the run a lost start made concluded while the entity
	// waited to start again; the start that finds it (resumed) leaves the
	// entity concluded, as nothing will conclude it again. (Its close ends
	// the entity: closed.)
	RunConcluded bool `json:"rc,omitempty"`
}

// Member is one identity of an entity: its hash, severity, count and the
// hash of the alert that last carried it (a new alert ID is news).
type Member struct {
	Hash      string `json:"h"`
	Severity  string `json:"s"`
	Count     int64  `json:"n,omitempty"`
	AlertHash string `json:"a"`
}

// EndedRun is a run that sent its investigation_closed signal: its
// session, hashed (the signal's text is not kept), and when.
type EndedRun struct {
	Hash string    `json:"h"`
	At   time.Time `json:"at"`
}

// ForgottenRun is the run of an entity forgotten while it was open: its
// session, hashed, and the cost it had reported (a running total).
type ForgottenRun struct {
	Hash string  `json:"h"`
	Cost float64 `json:"c"`
}

// ClosedIdentity is an identity whose investigation closed.
type ClosedIdentity struct {
	Hash       string    `json:"h"`
	Severity   string    `json:"s"`
	At         time.Time `json:"at"`
	WorkflowID string    `json:"w"`
}

// newRoom is an empty room.
func newRoom(now time.Time) *Room {
	r := &Room{Since: now, Day: day(now), fixed: true, rises: true, guards: true}
	r.index()
	return r
}

func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// index rebuilds the maps from the entities (after continue-as-new). A key
// points at the latest entity that has it.
func (r *Room) index() {
	r.byIdentity, r.byKey, r.byWorkflow = map[string]*Entity{}, map[string]*Entity{}, map[string]*Entity{}
	r.members, r.pending = 0, 0
	for _, e := range r.Entities {
		r.byWorkflow[e.WorkflowID] = e
		for _, m := range e.Members {
			r.byIdentity[m.Hash] = e
		}
		for _, k := range e.Keys {
			r.byKey[k] = e
		}
		r.members += len(e.Members)
		r.pending += len(e.Queue)
	}
}

// tick moves the room to now: a new UTC day resets the spend, and closed
// identities past the repeat window are forgotten.
func (r *Room) tick(now time.Time) {
	r.now = now
	if d := day(now); d != r.Day {
		r.Day, r.Spent = d, 0
	}
	window := r.Settings.RepeatWindow.Duration()
	i := 0
	for i < len(r.Closed) && now.Sub(r.Closed[i].At) >= window {
		i++
	}
	r.Closed = r.Closed[i:]
	i = 0
	for i < len(r.Ended) && now.Sub(r.Ended[i].At) >= endedKeep {
		i++
	}
	r.Ended = r.Ended[i:]
}

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

// running counts the investigations that hold a slot.
func (r *Room) running() int {
	n := 0
	for _, e := range r.Entities {
		if e.State == intake.StateStarting || e.State == intake.StateRunning {
			n++
		}
	}
	return n
}

// overBudget says whether the day's spend reached the budget.
func (r *Room) overBudget() bool {
	return r.Settings.DailyBudgetUSD > 0 && r.Spent >= r.Settings.DailyBudgetUSD
}

// held says whether a waiting entity is kept back by the budget.
func (r *Room) held(e *Entity) bool {
	return e.State == intake.StateWaiting && r.overBudget() && e.Severity != alerts.SeverityCritical && !e.Released
}

// waiting lists the waiting entities in the order they start: highest
// severity first, then oldest.
func (r *Room) waiting() []*Entity {
	var w []*Entity
	for _, e := range r.Entities {
		if e.State == intake.StateWaiting {
			w = append(w, e)
		}
	}
	slices.SortStableFunc(w, func(a, b *Entity) int {
		if c := cmp.Compare(intake.Rank(b.Severity), intake.Rank(a.Severity)); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return w
}

// schedule moves waiting entities to starting while slots are free, in
// waiting order, skipping those the budget holds. It returns them.
func (r *Room) schedule() []*Entity {
	free := r.Settings.MaxRunning - r.running()
	var started []*Entity
	for _, e := range r.waiting() {
		if free <= 0 {
			break
		}
		if r.held(e) || e.RetryAt.After(r.now) {
			continue
		}
		e.State = intake.StateStarting
		if e.Attempts == 0 {
			r.Counters.Started++
		}
		started = append(started, e)
		free--
	}
	return started
}

// position is a waiting entity's place in the waiting order (1 next).
func (r *Room) position(e *Entity) int {
	return slices.Index(r.waiting(), e) + 1
}

// admit decides what becomes of one alert, with the settings s. Every
// outcome but shed is recorded in the room before it is returned.
func (r *Room) admit(now time.Time, s intake.Settings, a intake.Alert) intake.Outcome {
	r.Settings, r.now = s, now
	r.Counters.Alerts++
	a = plainAlert(a)
	h := hashOf(a.Identity)
	out := intake.Outcome{AlertID: a.AlertID}
	if e := r.byIdentity[h]; e != nil {
		return r.seenAgain(now, e, h, a)
	}
	reinvestigate, prev := false, ""
	if c, ok := r.closedIdentity(h); ok {
		if intake.Rank(a.Severity) <= intake.Rank(c.Severity) {
			r.Counters.Repeats++
			out.Kind, out.WorkflowID = intake.OutcomeRepeat, c.WorkflowID
			out.Message = fmt.Sprintf("a repeat of the alert investigated by %s, closed at %s (within the repeat window of %s): recorded, not investigated again",
				c.WorkflowID, c.At.UTC().Format(time.RFC3339), s.RepeatWindow)
			return out
		}
		reinvestigate, prev = true, c.Severity
		if !r.guards {
			r.Counters.Reinvested++
			r.forgetClosed(h)
		}
	}
	// Under the guards the closed identity is forgotten only once the
	// alert is taken: a shed one, sent again (or kept in Readmits), is
	// still a reinvestigation then.
	taken := func() {
		if reinvestigate && r.guards {
			r.Counters.Reinvested++
			r.forgetClosed(h)
		}
	}
	if !s.NoGroup {
		if e, shared := r.groupOf(now, a); e != nil {
			taken()
			return r.join(now, e, h, a, shared)
		}
	}
	e, shed := r.open(now, h, a)
	if shed {
		r.Counters.Shed++
		return intake.Outcome{AlertID: a.AlertID, Kind: intake.OutcomeShed,
			Message: fmt.Sprintf("the waiting room is full (%d investigations open or waiting): send it again later", maxOpen)}
	}
	taken()
	e.Reinvestigate, e.PrevSeverity = reinvestigate, prev
	out.WorkflowID = e.WorkflowID
	r.schedule()
	switch {
	case e.State == intake.StateStarting:
		out.Kind, out.Message = intake.OutcomeStarted, "a new investigation starts now"
	case r.held(e):
		out.Kind, out.Position = intake.OutcomeHeld, r.position(e)
		out.Message = fmt.Sprintf("a new investigation, held: today's estimated spend %.4f USD reached the daily budget of %.2f USD; it starts tomorrow (UTC) or when released (starter intake release %s)",
			r.Spent, s.DailyBudgetUSD, e.WorkflowID)
	default:
		out.Kind, out.Position = intake.OutcomeQueued, r.position(e)
		out.Message = fmt.Sprintf("a new investigation, waiting for a free slot (%d running, at most %d): number %d in line", r.running(), s.MaxRunning, out.Position)
	}
	return out
}

// seenAgain handles an alert whose identity's investigation is open: the
// investigation learns of it (unless it is the very same alert again).
func (r *Room) seenAgain(now time.Time, e *Entity, h string, a intake.Alert) intake.Outcome {
	r.Counters.SeenAgain++
	m := &e.Members[slices.IndexFunc(e.Members, func(m Member) bool { return m.Hash == h })]
	arrival := investigation.Arrival{Kind: investigation.ArrivalSeenAgain, AlertID: a.AlertID, Identity: a.Identity,
		Source: a.Source, Severity: a.Severity, Title: clip.String(a.Title, maxRoomTitle), PrevCount: m.Count, Count: a.Count, PrevSeverity: m.Severity, Times: 1, At: now}
	changed := m.AlertHash != hashOf(a.AlertID) || intake.Rank(a.Severity) > intake.Rank(m.Severity)
	m.AlertHash, m.Count = hashOf(a.AlertID), max(m.Count, a.Count)
	m.Severity = intake.Higher(m.Severity, a.Severity)
	e.Severity = intake.Higher(e.Severity, a.Severity)
	e.Alerts++
	if changed {
		r.enqueue(e, arrival)
	} else if i := slices.IndexFunc(e.Queue, func(q investigation.Arrival) bool {
		return q.Kind == investigation.ArrivalSeenAgain && q.Identity == a.Identity
	}); i >= 0 {
		e.Queue[i].Times++
	}
	out := intake.Outcome{AlertID: a.AlertID, WorkflowID: e.WorkflowID, Kind: intake.OutcomeSeenAgain}
	switch {
	case e.State == intake.StateWaiting:
		out.Message = fmt.Sprintf("seen again while its investigation waits to start (number %d in line): it starts with this news", r.position(e))
	case !changed:
		out.Message = "the same alert again, while its investigation is open: counted"
	default:
		out.Message = "seen again while its investigation is open: " + arrival.Text() + ", delivered to it"
	}
	return out
}

// groupOf finds the open entity that a new alert joins: the latest one,
// within its group window, that shares a grouping key with it.
func (r *Room) groupOf(now time.Time, a intake.Alert) (*Entity, string) {
	for _, k := range a.Keys {
		if e := r.byKey[hashOf(k)]; e != nil && now.Before(e.GroupUntil) {
			return e, k
		}
	}
	return nil, ""
}

// join adds an alert to an open entity as a related alert.
func (r *Room) join(now time.Time, e *Entity, h string, a intake.Alert, shared string) intake.Outcome {
	e.Alerts++
	if len(e.Members) < maxEntityMember && r.members < maxMembers+len(r.Entities) {
		e.Members = append(e.Members, Member{Hash: h, Severity: a.Severity, Count: a.Count, AlertHash: hashOf(a.AlertID)})
		r.byIdentity[h] = e
		r.members++
	}
	e.Severity = intake.Higher(e.Severity, a.Severity)
	r.enqueue(e, investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: a.AlertID, Identity: a.Identity,
		Source: a.Source, Severity: a.Severity, Title: clip.String(a.Title, maxRoomTitle), Count: a.Count, Times: 1, Shared: plainText(shared, maxRoomShared), At: now})
	out := intake.Outcome{AlertID: a.AlertID, WorkflowID: e.WorkflowID}
	if e.State == intake.StateConcluded {
		r.Counters.FollowUps++
		out.Kind, out.Message = intake.OutcomeFollowUp, "related to a concluded investigation (shares "+shared+"): it asks itself whether this changes the verdict"
		return out
	}
	r.Counters.Grouped++
	out.Kind, out.Message = intake.OutcomeGrouped, "joined the open investigation of "+shared+" as a related alert"
	return out
}

// enqueue queues an arrival for an entity, within the bounds; a seen-again
// of an identity already queued replaces it, keeping the first count.
func (r *Room) enqueue(e *Entity, a investigation.Arrival) {
	if a.Kind == investigation.ArrivalSeenAgain {
		if i := slices.IndexFunc(e.Queue, func(q investigation.Arrival) bool {
			return q.Kind == investigation.ArrivalSeenAgain && q.Identity == a.Identity
		}); i >= 0 {
			a.PrevCount, a.PrevSeverity, a.Times = e.Queue[i].PrevCount, e.Queue[i].PrevSeverity, e.Queue[i].Times+1
			e.Queue[i] = a
			return
		}
	}
	if len(e.Queue) >= maxEntityQueue || r.pending >= maxPending {
		e.Dropped++
		return
	}
	e.Queue = append(e.Queue, a)
	r.pending++
}

// open admits a new entity for an alert, making room by forgetting the
// oldest concluded one if needed; shed when every open one still runs or
// waits.
func (r *Room) open(now time.Time, h string, a intake.Alert) (*Entity, bool) {
	wf := intake.WorkflowID(a.Identity)
	if old := r.byWorkflow[wf]; old != nil {
		return old, false // two identities with one hash: the same investigation
	}
	if len(r.Entities) >= maxOpen {
		// A concluded investigation with nothing left to deliver is
		// forgotten: it runs on, idle, but takes no more alerts.
		i := slices.IndexFunc(r.Entities, func(e *Entity) bool { return e.State == intake.StateConcluded && len(e.Queue) == 0 })
		if i < 0 {
			return nil, true
		}
		if r.guards {
			r.forget(r.Entities[i])
		}
		r.close(now, r.Entities[i].WorkflowID)
	}
	r.Seq++
	e := &Entity{
		WorkflowID: wf, AlertID: a.AlertID, Identity: a.Identity,
		Title: clip.String(a.Title, maxRoomTitle), Severity: a.Severity, State: intake.StateWaiting, Traceparent: a.Traceparent,
		Admitted: now, Seq: r.Seq, Alerts: 1, Members: []Member{{Hash: h, Severity: a.Severity, Count: a.Count, AlertHash: hashOf(a.AlertID)}},
	}
	if !r.Settings.NoGroup {
		e.GroupUntil = now.Add(r.Settings.GroupWindow.Duration())
		for _, k := range a.Keys {
			e.Keys = append(e.Keys, hashOf(k))
			r.byKey[hashOf(k)] = e
		}
	}
	r.Entities = append(r.Entities, e)
	r.byIdentity[h], r.byWorkflow[e.WorkflowID] = e, e
	r.members++
	return e, false
}

// closedIdentity finds an identity whose investigation closed within the
// repeat window (tick forgets older ones).
func (r *Room) closedIdentity(h string) (ClosedIdentity, bool) {
	for i := len(r.Closed) - 1; i >= 0; i-- {
		if r.Closed[i].Hash == h {
			return r.Closed[i], true
		}
	}
	return ClosedIdentity{}, false
}

func (r *Room) forgetClosed(h string) {
	r.Closed = slices.DeleteFunc(r.Closed, func(c ClosedIdentity) bool { return c.Hash == h })
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
// its last report.
func (r *Room) charge(e *Entity, s investigation.Spend) {
	cost, _ := r.Settings.Prices.Estimates(s.ByPhase.Phases())
	r.Spent += max(cost-e.Cost, 0)
	e.Cost = max(e.Cost, cost)
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
	r.end(now, e.WorkflowID, !r.fixed || c.Reason == investigation.ClosedCompleted)
	for _, a := range rises {
		r.admitRise(now, a)
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
// window, arrivals it could not take are admitted again.
func (r *Room) close(now time.Time, wf string) { r.end(now, wf, true) }

// end forgets an entity; investigated says its investigation completed, so
// its identities are repeats for the repeat window. One that failed, was
// cancelled or never started leaves them unknown: their next alert is
// investigated.
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
		if investigated && !slices.ContainsFunc(undelivered, func(a investigation.Arrival) bool {
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
		longest.Queue = slices.Clip(longest.Queue[:len(longest.Queue)-1])
		longest.Dropped++
		r.pending--
	}
	r.bound(e)
}

// release lets the named waiting entities (workflow or alert IDs), or all,
// start despite the budget.
func (r *Room) release(rel intake.Release) intake.Released {
	out := intake.Released{WorkflowIDs: []string{}}
	match := func(e *Entity) bool {
		return rel.All || slices.Contains(rel.IDs, e.WorkflowID) || slices.Contains(rel.IDs, e.AlertID)
	}
	found := map[string]bool{}
	for _, e := range r.Entities {
		if e.State == intake.StateWaiting && match(e) {
			if !e.Released {
				e.Released = true
				r.Counters.Released++
			}
			out.WorkflowIDs = append(out.WorkflowIDs, e.WorkflowID)
			found[e.WorkflowID], found[e.AlertID] = true, true
		}
	}
	for _, id := range rel.IDs {
		if !found[id] {
			out.Unknown = append(out.Unknown, id)
		}
	}
	return out
}

// status is the room as `starter intake status` shows it: counts, and the
// open entities (at most maxStatusEntities, waiting ones in their order
// first).
func (r *Room) status() intake.Status {
	st := intake.Status{Settings: r.Settings, Counters: r.Counters, Day: r.Day, SpentToday: r.Spent, Currency: r.Settings.Prices.Currency, Since: r.Since, Open: []intake.Entity{}, Readmitting: len(r.Readmits)}
	view := func(e *Entity) intake.Entity {
		return intake.Entity{WorkflowID: e.WorkflowID, AlertID: e.AlertID, State: e.State, Severity: e.Severity, Title: e.Title,
			Alerts: e.Alerts, Since: e.Admitted, Held: r.held(e), Released: e.Released, StartFailures: e.Attempts, RetryAt: e.RetryAt}
	}
	for i, e := range r.waiting() {
		st.Waiting++
		if r.held(e) {
			st.Held++
		}
		if len(st.Open) < maxStatusEntities {
			v := view(e)
			v.Position = i + 1
			st.Open = append(st.Open, v)
		}
	}
	for _, e := range r.Entities {
		switch e.State {
		case intake.StateWaiting:
			continue
		case intake.StateConcluded:
			st.Concluded++
		default:
			st.Running++
		}
		if len(st.Open) < maxStatusEntities {
			st.Open = append(st.Open, view(e))
		}
	}
	st.Dropped = len(r.Entities) - len(st.Open)
	return st
}

// maxStatusEntities bounds the entities a status lists.
const maxStatusEntities = 100

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
