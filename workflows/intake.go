package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
)

// The investigation's side of the intake (design/intake.md): the alerts
// that arrive for it while it is open (the alerts update and signal), the
// admission workflow told when it concludes and closes, and each
// conclusion delivered (Slack, the results topic). Every path here runs
// only for an investigation the intake started (Input.Intake) or one that
// receives the alerts input, so recorded histories of other
// investigations replay unchanged.

// Bounds of the intake's part of the state.
const (
	maxArrivalsKept   = 20  // latest arrivals kept and shown to the model
	maxArrivalBatch   = 100 // arrivals in one alerts input
	maxArrivalField   = 300 // bytes of an arrival's text fields
	maxDeliveriesKept = 10  // latest deliveries the status lists
	maxMissedKept     = 100 // identities of arrivals no model call saw, reported at the close
	deliveryBudget    = 10 * time.Minute
)

// IntakeState is the intake's part of State.
type IntakeState struct {
	// Arrivals are the latest alerts that arrived for the investigation;
	// Arrived counts every one (those the intake left out too).
	Arrivals []investigation.Arrival `json:"arrivals,omitempty"`
	Arrived  int                     `json:"arrived,omitempty"`
	// Unseen counts the latest Arrivals no model call's input has carried
	// yet: once the exchange is over they are asked about (askAboutUnseen).
	Unseen int `json:"unseen,omitempty"`
	// Unshown counts the latest Arrivals no model call's input carried
	// yet, reset only by arrivals: unlike Unseen, not by a follow-up
	// queued about them, which a burst may push them out before.
	Unshown int `json:"unshown,omitempty"`
	// Missed are the identities (hashOf) of related arrivals and rises
	// pushed out of Arrivals while unseen, at most maxMissedKept
	// (MissedOver: more were). The close reports them (unseenReport), so
	// the admission makes them no repeats: a burst of related alerts
	// within one model call pushed a finding out before any model saw it.
	Missed     []string `json:"missed,omitempty"`
	MissedOver bool     `json:"missed_over,omitempty"`
	// Deliveries are the latest conclusions' deliveries. Sent is, by
	// target (sentSlack, sentTopic), the verdict last delivered there with
	// success: the next one says it changed, and an unchanged one is not
	// sent again. Delivered is what a run before Sent recorded (the verdict
	// last sent, delivered or not): read only for a target Sent lacks.
	Deliveries []investigation.DeliveryStatus `json:"deliveries,omitempty"`
	Sent       map[string]sentVerdict         `json:"sent,omitempty"`
	Delivered  string                         `json:"delivered,omitempty"`
	// inFlight counts the deliveries and signals to the admission workflow
	// not finished: the run completes or continues as new after them.
	inFlight int
	// sentTurn is the exchange of each target's Sent, so a delivery that
	// succeeds after a later one does not take its place. Deliveries end
	// before a continue-as-new (drainInputs): it need not be carried.
	sentTurn map[string]int
}

func (s *IntakeState) setSentTurn(target string, turn int) {
	if s.sentTurn == nil {
		s.sentTurn = map[string]int{}
	}
	s.sentTurn[target] = turn
}

// arrivedWhileWaiting records, at the start of a fresh investigation, the
// alerts that arrived while it waited to start (its input holds them).
func (r *run) arrivedWhileWaiting(fresh bool) {
	if in := r.Input.Intake; fresh && in != nil && (len(in.Arrived.Arrivals) > 0 || in.Arrived.Dropped > 0) {
		r.arrive(in.Arrived)
	}
}

// add keeps a batch of arrivals (the latest maxArrivalsKept); those it
// pushes out unseen are remembered as missed.
func (s *IntakeState) add(b investigation.ArrivalBatch) {
	s.Arrived += len(b.Arrivals) + b.Dropped
	all := append(slices.Clone(s.Arrivals), b.Arrivals...)
	unshown := s.Unshown + len(b.Arrivals) // the latest ones of all
	cut := max(0, len(all)-maxArrivalsKept)
	for _, a := range all[min(len(all)-unshown, cut):cut] {
		s.miss(a)
	}
	s.Arrivals = all[cut:]
	if !b.OverBudget || s.Unseen > 0 {
		// Arrivals held by the budget are no follow-up's to ask about
		// (askAboutUnseen), unless one is due anyway for those before
		// them: Unseen counts the latest, so it takes them along.
		s.Unseen = min(s.Unseen+len(b.Arrivals), len(s.Arrivals))
	}
	s.Unshown = min(unshown, len(s.Arrivals))
}

// miss remembers the identity of an arrival no model call saw, if it
// matters to the repeat rule: a related alert, or a rise (the closed
// identity would keep a severity no model knew).
func (s *IntakeState) miss(a investigation.Arrival) {
	if a.Kind != investigation.ArrivalRelated && !rose(a) {
		return
	}
	switch h := hashOf(a.Identity); {
	case slices.Contains(s.Missed, h):
	case len(s.Missed) >= maxMissedKept:
		s.MissedOver = true
	default:
		s.Missed = append(slices.Clone(s.Missed), h)
	}
}

// unseenReport is what the close tells the admission of the arrivals no
// model call saw: those missed and the latest still unseen (within
// maxMissedKept), and whether there were more than it can name.
func (s IntakeState) unseenReport() ([]string, bool) {
	for _, a := range s.Arrivals[len(s.Arrivals)-s.Unshown:] {
		s.miss(a) // on a copy: miss clones Missed
	}
	return s.Missed, s.MissedOver
}

// arrivals is what the model is shown of the alerts that arrived: the
// latest, and how many earlier ones are left out. Only a model call's
// input asks for it, so from here they are seen.
func (r *run) arrivals() investigation.ArrivalBatch {
	r.Intake.Unseen, r.Intake.Unshown = 0, 0
	return investigation.ArrivalBatch{Arrivals: r.Intake.Arrivals, Dropped: r.Intake.Arrived - len(r.Intake.Arrivals)}
}

// checkArrivals refuses an alerts input the state cannot hold.
func checkArrivals(b investigation.ArrivalBatch) error {
	switch {
	case len(b.Arrivals) == 0 && b.Dropped == 0:
		return errors.New("no alerts arrived")
	case len(b.Arrivals) > maxArrivalBatch || b.Dropped < 0:
		return fmt.Errorf("at most %d alerts arrive at once", maxArrivalBatch)
	}
	for _, a := range b.Arrivals {
		if a.Kind != investigation.ArrivalSeenAgain && a.Kind != investigation.ArrivalRelated {
			return fmt.Errorf("an arrival is %s or %s, not %q", investigation.ArrivalSeenAgain, investigation.ArrivalRelated, a.Kind)
		}
		for _, f := range []string{a.AlertID, a.Identity, a.Source, a.Severity, a.Title, a.Shared, a.PrevSeverity} {
			if len(f) > maxArrivalField {
				return fmt.Errorf("an arrival's field is longer than %d bytes", maxArrivalField)
			}
		}
		if a.AlertID == "" {
			return errors.New("an arrival needs its alert ID")
		}
	}
	return nil
}

// arrive records alerts that arrived: a progress note each, and the model
// sees them from its next turn. A concluded, idle investigation asks
// itself whether a related alert, or its alert seen again at a higher
// severity, changes the verdict; a busy one asks once the exchange is
// over, unless a later model call saw them (askAboutUnseen).
func (r *run) arrive(b investigation.ArrivalBatch) investigation.Ack {
	r.Intake.add(b)
	seq := 0
	for _, a := range b.Arrivals {
		seq = r.emit(investigation.Event{Kind: investigation.EventNote, Text: "alert arrived: " + a.Text()})
	}
	if b.Dropped > 0 {
		seq = r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("%d more alerts arrived (not listed: the intake's bound)", b.Dropped)})
	}
	msg := "recorded: the investigation sees them from its next model call"
	switch {
	case b.OverBudget:
		// Held by the intake's daily budget: seen and shown, never asked
		// about (the admission does not send them again when the budget
		// resets). Still unshown, so any later model call sees them and the
		// close reports them unseen: their next alert is investigated anew,
		// not taken for a repeat. No gate: only a batch carrying
		// OverBudget reaches this, and no recorded history holds one (the
		// field is new; absent, it decodes as false and every path below
		// runs as before). The admission sets it on the signal's payload
		// only, which replay does not compare.
		if verdictQuestion(b.Arrivals) != "" && (r.Phase != investigation.PhaseIdle || r.takesFollowUp()) {
			seq = r.emit(investigation.Event{Kind: investigation.EventNote, Text: budgetHeldNote})
			msg = "recorded: " + budgetHeldNote
		}
	case r.Phase == investigation.PhaseIdle:
		if s := r.askAbout(b.Arrivals); s != 0 {
			seq, msg = s, "recorded: a follow-up asks whether it changes the verdict"
		}
	}
	return investigation.Ack{Seq: seq, Message: msg}
}

// budgetHeldNote says why arrivals held by the budget queue no follow-up.
const budgetHeldNote = "the intake's daily budget is reached: not asked whether these change the verdict"

// askAbout queues the follow-up "does it change the verdict?" for arrivals
// that hold a related alert or a higher severity, when a concluded
// investigation can take one, and returns its note's number (else 0).
func (r *run) askAbout(arrivals []investigation.Arrival) int {
	question := verdictQuestion(arrivals)
	if question == "" || !r.takesFollowUp() {
		return 0
	}
	r.Intake.Unseen = 0 // the follow-up's model calls see them
	r.Steering.generated(question)
	return r.queueFollowUp(question)
}

func (r *run) takesFollowUp() bool {
	return r.Verdict != nil && r.Steering.StopReason == "" && len(r.Steering.FollowUps) < maxFollowUps
}

// verdictQuestion is the follow-up that arrivals call for, or "".
// The question is the exchange's request, which every prompt shows in its
// open text (a quoted line), so the arrival's words in it are structural
// only: a plain alert ID (questionAlertID) and severities from intake.Rank's
// vocabulary; the whole arrival is data, in the arrivals block. This
// changes only the question's text, never whether there is one, and text
// reaches only activity inputs and state, which replay does not compare.
func verdictQuestion(arrivals []investigation.Arrival) string {
	var related []string
	rose := ""
	for _, a := range arrivals {
		switch {
		case a.Kind == investigation.ArrivalRelated:
			related = append(related, questionAlertID(a.AlertID))
		case a.PrevSeverity != "" && intake.Rank(a.Severity) > intake.Rank(a.PrevSeverity):
			rose = rankedSeverity(a.PrevSeverity) + " → " + rankedSeverity(a.Severity)
		}
	}
	switch {
	case len(related) == 1:
		return fmt.Sprintf("A related alert arrived (%s): does it change the verdict?", related[0])
	case len(related) > 1:
		return fmt.Sprintf("%d related alerts arrived (%s): do they change the verdict?", len(related), strings.Join(related[:min(5, len(related))], ", "))
	case rose != "":
		return fmt.Sprintf("The alert was seen again with a higher severity (%s): does it change the verdict?", rose)
	}
	return ""
}

// maxQuestionAlertID bounds an alert ID the queued question names; the
// intake's IDs are "<source>-<12 hex>".
const maxQuestionAlertID = 64

// questionAlertID is an alert ID as the queued question names it: one
// that is not plain (letters, digits, ".", "_", ":", "-"; at most
// maxQuestionAlertID bytes) is named by its place instead.
func questionAlertID(id string) string {
	plain := id != "" && len(id) <= maxQuestionAlertID && strings.IndexFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:-", r))
	}) < 0
	if !plain {
		return "an ID that is not plain: see the arrivals"
	}
	return id
}

// rankedSeverity is a severity in intake.Rank's vocabulary: any other
// word is "unknown", as Rank ranks it.
func rankedSeverity(s string) string {
	switch s {
	case alerts.SeverityCritical, alerts.SeverityHigh, alerts.SeverityMedium, alerts.SeverityLow:
		return s
	}
	return alerts.SeverityUnknown
}

// askAboutUnseen runs as the investigation goes idle: arrivals that came
// after the exchange's last model call (during its reflection, conclusion
// or verdict review) were never shown to a model, so they get the
// follow-up arrive gives an idle investigation. Histories recorded before
// its gate (late-arrivals, shared with handBack: one scenario reaches both)
// went idle without it.
func (r *run) askAboutUnseen(ctx workflow.Context) {
	n := r.Intake.Unseen
	if n == 0 {
		return
	}
	unseen := r.Intake.Arrivals[len(r.Intake.Arrivals)-n:]
	if verdictQuestion(unseen) == "" || !r.takesFollowUp() {
		return
	}
	if workflow.GetVersion(ctx, "late-arrivals", workflow.DefaultVersion, 1) == 1 {
		r.askAbout(unseen)
	}
	r.Intake.Unseen = 0
}

// alertsSignal applies the alerts signal (the admission workflow sends
// it): its payload read as an ArrivalBatch.
func (r *run) alertsSignal(v any) (investigation.Ack, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return investigation.Ack{}, err
	}
	var b investigation.ArrivalBatch
	if err := json.Unmarshal(raw, &b); err != nil {
		return investigation.Ack{}, errors.New(`its payload must be {"arrivals": [...]}`)
	}
	if err := checkArrivals(b); err != nil {
		return investigation.Ack{}, err
	}
	if r.closingDown {
		// Too late for this run: the intake admits them again (handBack).
		r.late.Arrivals = append(r.late.Arrivals, b.Arrivals...)
		r.late.Dropped += b.Dropped
		note := investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("%d alerts arrived as the investigation closed: handed back to the intake", len(b.Arrivals)+b.Dropped)}
		if r.closed {
			// Its progress is flushed: handBack writes the note once it
			// handed these back (noteHandedBack).
			r.lateNotes = append(r.lateNotes, note)
			return investigation.Ack{Seq: r.lastSeq(), Message: "handed back: the investigation is closing"}, nil
		}
		return investigation.Ack{Seq: r.emit(note), Message: "handed back: the investigation is closing"}, nil
	}
	return r.arrive(b), nil
}

// checkAlerts refuses an alerts update the state cannot hold, or that
// comes once the run is closing (its sender admits the alerts again).
func (r *run) checkAlerts(b investigation.ArrivalBatch) error {
	if r.closingDown {
		return errors.New("the investigation is closing: admit these alerts again")
	}
	return checkArrivals(b)
}

// deliver runs after each conclusion of an investigation the intake
// started: the admission workflow learns it concluded (and what it cost so
// far), and the verdict goes to Slack and the results topic, each as an
// activity with retries. Neither waits here, and neither can fail the
// investigation: a delivery that fails for good shows in the status.
func (r *run) deliver(ctx workflow.Context) {
	if r.Input.Intake == nil {
		return
	}
	r.tellAdmission(ctx)
	r.sendVerdict(ctx, true)
}

// deliverAnswer runs after a direct answer to a follow-up: the admission
// workflow learns what it cost, and the verdict is delivered as a
// conclusion's is (sendVerdict: an unchanged one is not sent again).
func (r *run) deliverAnswer(ctx workflow.Context, changed *investigation.Verdict) {
	if r.Input.Intake == nil {
		return
	}
	r.tellAdmission(ctx)
	r.sendVerdict(ctx, changed != nil)
}

// tellAdmission signals investigation_concluded with the spend so far.
func (r *run) tellAdmission(ctx workflow.Context) {
	in := r.Input.Intake
	concluded := investigation.Concluded{WorkflowID: r.id, Session: r.session, Spend: r.Spend, Turn: r.Turn}
	r.background(ctx, func(ctx workflow.Context) {
		if err := workflow.SignalExternalWorkflow(ctx, in.Admission, "", investigation.ConcludedSignal, concluded).Get(ctx, nil); err != nil {
			r.log.Warn("could not tell the admission workflow of the conclusion", "admission", in.Admission, "error", err)
		}
	})
}

// Delivery targets, as IntakeState.Sent names them.
const (
	sentSlack = "slack"
	sentTopic = "topic"
)

// sentVerdict is a verdict as delivered: what makes it changed.
type sentVerdict struct {
	Verdict    string `json:"verdict"`
	Confidence string `json:"confidence,omitempty"`
}

// sendVerdict delivers the standing verdict, under the exchange's
// idempotency key, to each target it changed for: one where no verdict was
// delivered with success yet, or the last one delivered differs in verdict
// or confidence. A failed delivery records nothing, so the next conclusion
// is sent and says what changed since the last one received. wouldSend is
// what the rule before this one did (every conclusion sent, a direct
// answer only if it changed the standing verdict); where the two differ
// the gate deliver-when-changed decides, so recorded histories replay the
// activities they scheduled.
func (r *run) sendVerdict(ctx workflow.Context, wouldSend bool) {
	in := r.Input.Intake
	if !in.Delivery.On() || r.Verdict == nil {
		return
	}
	now := sentVerdict{Verdict: r.Verdict.Verdict, Confidence: r.Verdict.Confidence}
	base := activities.DeliveryInput{
		Key: fmt.Sprintf("%s/t%d", r.session, r.Turn), WorkflowID: r.id, AlertID: r.Input.AlertID, Identity: in.Identity,
		Exchange: r.Turn, Verdict: *r.Verdict, Summary: investigation.SummaryOf(r.Conclusion), Alerts: 1 + r.Intake.Arrived,
		At: workflow.Now(ctx), Delivery: in.Delivery,
	}
	// forTarget is the delivery for a target, or false when it is not sent.
	forTarget := func(target string) (activities.DeliveryInput, bool) {
		last, ok := r.Intake.Sent[target]
		if !ok && r.Intake.Delivered != "" {
			last, ok = sentVerdict{Verdict: r.Intake.Delivered}, true
		}
		send := !ok || last != now
		if send != wouldSend {
			// Asked only where the rules part: no recorded history has
			// the marker, so each replays what it scheduled.
			if workflow.GetVersion(ctx, "deliver-when-changed", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
				send = wouldSend
			}
		}
		d := base
		if ok && last.Verdict != now.Verdict {
			d.Previous = last.Verdict
		}
		return d, send
	}
	type target struct {
		name, sent string
		fn         any
		d          activities.DeliveryInput
		set        func(*investigation.DeliveryStatus, string, activities.DeliveryOutput)
	}
	var targets []target
	if in.Delivery.Slack {
		if d, ok := forTarget(sentSlack); ok {
			targets = append(targets, target{"Slack", sentSlack, ia.DeliverSlack, d,
				func(s *investigation.DeliveryStatus, state string, _ activities.DeliveryOutput) { s.Slack = state }})
		}
	}
	if in.Delivery.ResultsTopic != "" {
		if d, ok := forTarget(sentTopic); ok {
			targets = append(targets, target{in.Delivery.ResultsTopic, sentTopic, ia.PublishResult, d,
				func(s *investigation.DeliveryStatus, state string, out activities.DeliveryOutput) {
					s.Topic, s.MessageID = state, out.MessageID
				}})
		}
	}
	if len(targets) == 0 {
		return
	}
	st := investigation.DeliveryStatus{Key: base.Key, Verdict: now.Verdict, Pending: true}
	r.Intake.Deliveries = append(slices.Clone(r.Intake.Deliveries), st)
	r.Intake.Deliveries = r.Intake.Deliveries[max(0, len(r.Intake.Deliveries)-maxDeliveriesKept):]
	pending := len(targets)
	record := func(key string, set func(*investigation.DeliveryStatus)) {
		for i := range r.Intake.Deliveries {
			if r.Intake.Deliveries[i].Key == key {
				set(&r.Intake.Deliveries[i])
			}
		}
	}
	for _, t := range targets {
		r.background(ctx, func(ctx workflow.Context) {
			var out activities.DeliveryOutput
			err := workflow.ExecuteActivity(deliveryOptions(ctx, "deliver the verdict to "+t.name), t.fn, t.d).Get(ctx, &out)
			state := "delivered"
			switch {
			case err != nil:
				state = "failed: " + message(err)
				r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("the verdict could not be delivered to %s: %s", t.name, message(err))})
			case out.Skipped != "":
				state = "skipped: " + out.Skipped
			default:
				// Only now did the target receive it (a later conclusion
				// delivered first keeps its own).
				if r.Intake.sentTurn[t.sent] <= t.d.Exchange {
					r.Intake.Sent = maps.Clone(r.Intake.Sent)
					if r.Intake.Sent == nil {
						r.Intake.Sent = map[string]sentVerdict{}
					}
					r.Intake.Sent[t.sent] = now
					r.Intake.setSentTurn(t.sent, t.d.Exchange)
				}
			}
			record(base.Key, func(s *investigation.DeliveryStatus) {
				t.set(s, state, out)
				if pending--; pending == 0 {
					s.Pending = false
				}
			})
		})
	}
}

// background runs f in a coroutine that the run waits for before it
// completes or continues as new (drainInputs).
func (r *run) background(ctx workflow.Context, f func(workflow.Context)) {
	r.Intake.inFlight++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { r.Intake.inFlight-- }()
		f(ctx)
	})
}

// closing tells the admission workflow that an investigation the intake
// started has closed (unless it continues as new), whatever the way out:
// completed, failed or cancelled. It returns err unchanged.
func (r *run) closing(ctx workflow.Context, err error) error {
	in := r.Input.Intake
	if in == nil || isContinueAsNew(err) {
		return err
	}
	reason := investigation.ClosedCompleted
	switch {
	case ctx.Err() != nil:
		reason = "cancelled"
	case err != nil:
		reason = "failed: " + message(err)
	}
	r.closedReason = reason
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	// The spend, session and unseen identities ride in the signal's
	// payload, which replay does not compare: this run's histories replay
	// unchanged without a gate. The admission acts on Unseen only under
	// its lost-no-repeat gate, since this signal reaches older ones.
	unseen, all := r.Intake.unseenReport()
	if serr := workflow.SignalExternalWorkflow(dctx, in.Admission, "", investigation.ClosedSignal,
		investigation.Closed{WorkflowID: r.id, Session: r.session, Reason: reason, Spend: r.Spend, Unseen: unseen, UnseenAll: all}).Get(dctx, nil); serr != nil {
		r.log.Warn("could not tell the admission workflow that the investigation closed", "admission", in.Admission, "error", serr)
	}
	return err
}

// handBack runs last, once nothing but the run's end is left: the alerts
// signalled after the run began closing (closingDown) go back to the
// admission workflow in further Closed signals, which admit their related
// alerts again; the admission's own signal succeeded, so it would not. It
// loops until no more came while it signalled (or while it wrote their
// notes); only those arriving in the run's very last workflow task are
// beyond its reach. Histories recorded before its gate (late-arrivals, as
// in askAboutUnseen) dropped them.
func (r *run) handBack(ctx workflow.Context) {
	in := r.Input.Intake
	if in == nil || r.closedReason == "" {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	for {
		r.applyBuffered(dctx)
		b := r.late
		if len(b.Arrivals) == 0 && b.Dropped == 0 {
			return
		}
		if workflow.GetVersion(dctx, "late-arrivals", workflow.DefaultVersion, 1) != 1 {
			return
		}
		notes := r.lateNotes
		r.late, r.lateNotes = investigation.ArrivalBatch{}, nil
		// At most maxReturned arrivals a signal: the admission keeps no
		// more of one (Room.readmit). No gate: only a hand-back of more
		// than that sends another signal, and every recorded one returns
		// one alert (intake-late-arrivals, intake-hand-back-notes and its
		// twin). The notes follow the whole batch, one write as before.
		for first := true; first || len(b.Arrivals) > 0; first = false {
			part := investigation.ArrivalBatch{Arrivals: b.Arrivals[:min(len(b.Arrivals), maxReturned)]}
			b.Arrivals = b.Arrivals[len(part.Arrivals):]
			if first {
				part.Dropped = b.Dropped
			}
			if err := workflow.SignalExternalWorkflow(dctx, in.Admission, "", investigation.ClosedSignal,
				// Session only in the payload (no gate); the admission under
				// room-guards ends no entity on a Closed that returns alerts.
				investigation.Closed{WorkflowID: r.session, Session: r.session, Reason: r.closedReason, Returned: part}).Get(dctx, nil); err != nil {
				r.log.Warn("could not hand alerts that arrived late back to the admission workflow", "admission", in.Admission, "error", err)
				return
			}
		}
		r.noteHandedBack(dctx, notes)
	}
}

// noteHandedBack emits the "handed back" notes of alerts signalled after
// the run's progress was flushed, once they were handed back, and writes
// them: one more progress write per hand-back that has such notes, none
// otherwise. Histories recorded before its gate (hand-back-noted) dropped
// them (emit after flushProgress).
func (r *run) noteHandedBack(ctx workflow.Context, notes []investigation.Event) {
	if len(notes) == 0 || workflow.GetVersion(ctx, "hand-back-noted", workflow.DefaultVersion, 1) != 1 {
		return
	}
	r.closed = false
	for _, e := range notes {
		r.emit(e)
	}
	r.flushProgress(ctx) // closed again
}

// deliveryOptions retry a delivery for deliveryBudget: at least once, as
// long as the target is only unreachable.
func deliveryOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: deliveryBudget,
		StartToCloseTimeout:    time.Minute,
		// Deliveries heartbeat like every activity (activities.Heartbeats):
		// one on a killed worker is tried again within heartbeatTimeout.
		// No gate: replay matches a scheduled activity by ID and type only.
		HeartbeatTimeout: heartbeatTimeout,
		Summary:          termtext.NoLinksClipped(summary, 200),
		RetryPolicy:      &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: 2 * time.Minute},
	})
}

// intakeStatus is the intake's part of the investigation's status.
func (s IntakeState) status(in *investigation.IntakeInput) *investigation.IntakeStatus {
	if in == nil && s.Arrived == 0 {
		return nil
	}
	st := &investigation.IntakeStatus{Arrived: s.Arrived, Arrivals: s.Arrivals, Deliveries: s.Deliveries}
	if in != nil {
		st.Identity = in.Identity
	}
	return st
}
