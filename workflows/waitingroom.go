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
	Closed []ClosedIdentity `json:"closed,omitempty"`
	Day    string           `json:"day"`
	Spent  float64          `json:"spent"`
	// Unpriced names a model the price table has no price for that an
	// investigation used today (charge): its cost is unknown, so under the
	// room-fails-closed gate a daily budget counts as reached.
	Unpriced string `json:"unpriced,omitempty"`
	// Counters only show in the status (`starter intake status`): no
	// decision reads them, so how one is counted changes no command (no
	// gate). Started counts each run a start of the room made once, when
	// the room learns of it: the start's answer (started, or Found: the run
	// of a round whose answer was lost), or that run's close coming first
	// (Room.closed). A repeat, a start that found another run open
	// (attached) and a start given up start nothing.
	Counters intake.Counters `json:"counters"`
	Since    time.Time       `json:"since"`
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
	// lost: this run took the lost-no-repeat gate (admission.go): a
	// member whose related alert was dropped past a queue's bound (lose)
	// or that its run's close reported unseen (unseen) is marked Lost and
	// made no repeat, as are the related members of an entity forgotten
	// to make room (open). Recorded runs without it made them repeats,
	// and ignore a Lost a room carries.
	lost bool
	// failClosed: this run took the room-fails-closed gate (admission.go):
	// a rise that no queue can take is shed, not recorded (seenAgain), and
	// one cut from a queue later leaves its member at the severity the run
	// knew (lose). Recorded runs without it decide as they did.
	failClosed bool
	// pricesParts asks the usage-priced-by-model gate (admission.go),
	// only for a report that splits a phase by model (charge); nil (a
	// room outside a workflow: tests) takes the gate's new branch.
	pricesParts func() bool
	now         time.Time // of the last tick or admit

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
// hash of the alert that last carried it (a new alert ID is news). Lost:
// its related arrival was dropped past a queue's bound (lose), its run
// reported it unseen at its close (unseen), or its entity was forgotten
// before that close (open), so no model may have seen it and the close
// makes it no repeat (end); all under the lost-no-repeat gate. Never
// cleared: a later arrival of it may still reach no model (in flight as
// the run closes, or unseen by a run of an older version, which reports
// nothing).
type Member struct {
	Hash      string `json:"h"`
	Severity  string `json:"s"`
	Count     int64  `json:"n,omitempty"`
	AlertHash string `json:"a"`
	Lost      bool   `json:"l,omitempty"`
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
	r := &Room{Since: now, Day: day(now), fixed: true, rises: true, guards: true, lost: true, failClosed: true}
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
		r.Day, r.Spent, r.Unpriced = d, 0, ""
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
	return r.Settings.DailyBudgetUSD > 0 && (r.Spent >= r.Settings.DailyBudgetUSD || r.failClosed && r.Unpriced != "")
}

// budgetText says why the budget holds investigations back.
func (r *Room) budgetText() string {
	if r.failClosed && r.Unpriced != "" {
		return fmt.Sprintf("the daily budget of %.2f USD cannot be kept: model %s, used today, has no price (starter --prices)", r.Settings.DailyBudgetUSD, r.Unpriced)
	}
	return fmt.Sprintf("today's estimated spend %.4f USD reached the daily budget of %.2f USD", r.Spent, r.Settings.DailyBudgetUSD)
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
		out.Message = fmt.Sprintf("a new investigation, held: %s; it starts tomorrow (UTC) or when released (starter intake release %s)",
			r.budgetText(), e.WorkflowID)
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
	rises := intake.Rank(a.Severity) > intake.Rank(m.Severity)
	changed := m.AlertHash != hashOf(a.AlertID) || rises
	if r.failClosed && rises && !r.queues(e, arrival) {
		// Raised and then dropped, the member closed at a severity no
		// model saw, and the alert sent again was a repeat: shed, it is
		// not acknowledged and comes back once the queues drain.
		r.Counters.SeenAgain--
		r.Counters.Shed++
		return intake.Outcome{AlertID: a.AlertID, WorkflowID: e.WorkflowID, Kind: intake.OutcomeShed,
			Message: fmt.Sprintf("seen again at a higher severity (%s), but the arrivals queued for its investigation are at their bound: not delivered; send it again later", arrival.Text())}
	}
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

// queues says whether enqueue would keep an arrival for e (queue it or
// replace its identity's queued seen-again) rather than drop it.
func (r *Room) queues(e *Entity, a investigation.Arrival) bool {
	if a.Kind == investigation.ArrivalSeenAgain && slices.ContainsFunc(e.Queue, func(q investigation.Arrival) bool {
		return q.Kind == investigation.ArrivalSeenAgain && q.Identity == a.Identity
	}) {
		return true
	}
	return len(e.Queue) < maxEntityQueue && r.pending < maxPending
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
		r.lose(e, a)
		return
	}
	e.Queue = append(e.Queue, a)
	r.pending++
}

// lose marks the member whose related arrival was dropped (counted in
// Dropped, never delivered): its identity reached no model, so the
// entity's close must not make it a repeat (end). Without this, a decoy
// investigation whose queue an attacker filled absorbed a real alert and
// its close had the alert, sent again, dismissed as a repeat. Under the
// lost-no-repeat gate only: a running room drops arrivals, and a run
// before it recorded the identity closed, its later alert a repeat
// (no StartInvestigation).
//
// Under the room-fails-closed gate a rise cut from a queue (bound) puts
// its member back at the severity before it (the queued arrival keeps the
// first PrevSeverity), so the close does not record a severity no model
// saw and the alert sent again is a reinvestigation, not a repeat.
func (r *Room) lose(e *Entity, a investigation.Arrival) {
	h := hashOf(a.Identity)
	if r.failClosed && rose(a) {
		for i := range e.Members {
			if e.Members[i].Hash == h {
				e.Members[i].Severity = plainAlert(intake.Alert{Severity: a.PrevSeverity}).Severity
			}
		}
	}
	if !r.lost || a.Kind != investigation.ArrivalRelated {
		return
	}
	for i := range e.Members {
		if e.Members[i].Hash == h {
			e.Members[i].Lost = true
		}
	}
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
		if i < 0 && r.failClosed {
			if v := r.displaceable(a.Severity); v != nil {
				r.displace(now, v)
				return r.open(now, h, a)
			}
		}
		if i < 0 {
			return nil, true
		}
		if r.guards {
			r.forget(r.Entities[i])
		}
		// Its run has not closed, so it has not said which related alerts
		// no model saw (Closed.Unseen), and one delivered to it may still
		// be unread: under the lost-no-repeat gate they are all Lost, no
		// repeats. Its own identity stays one: its run began with it.
		if r.lost {
			ms := r.Entities[i].Members
			for j := 1; j < len(ms); j++ {
				ms[j].Lost = true
			}
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

// displaceable is the waiting entity (held or not) a new alert of
// severity sev takes the place of in a full room, or nil: the newest of
// the lowest severity, if that is below sev. Before the room-fails-closed
// gate, low-severity noise or held entities filling the room shed every
// later alert, critical ones too.
func (r *Room) displaceable(sev string) *Entity {
	var v *Entity
	for _, e := range r.Entities {
		if e.State == intake.StateWaiting && (v == nil || intake.Rank(e.Severity) <= intake.Rank(v.Severity)) {
			v = e
		}
	}
	if v == nil || intake.Rank(v.Severity) >= intake.Rank(sev) {
		return nil
	}
	return v
}

// displace gives up a waiting entity to make room: its alerts were
// acknowledged, so they are counted in the status (Counters.Displaced),
// and none is a repeat (end, not investigated). Its queued related
// alerts are not admitted again: the room is full.
func (r *Room) displace(now time.Time, e *Entity) {
	r.Counters.Displaced++
	r.Counters.DisplacedAlerts += int64(e.Alerts)
	r.take(e)
	r.end(now, e.WorkflowID, false)
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
	if r.failClosed && r.Unpriced != "" {
		st.Unpriced = r.Unpriced
	}
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
