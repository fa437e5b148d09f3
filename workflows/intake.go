package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/intake"
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
	deliveryBudget    = 10 * time.Minute
)

// IntakeState is the intake's part of State.
type IntakeState struct {
	// Arrivals are the latest alerts that arrived for the investigation;
	// Arrived counts every one (those the intake left out too).
	Arrivals []investigation.Arrival `json:"arrivals,omitempty"`
	Arrived  int                     `json:"arrived,omitempty"`
	// Deliveries are the latest conclusions' deliveries; Delivered is the
	// verdict last delivered, so the next one can say it changed.
	Deliveries []investigation.DeliveryStatus `json:"deliveries,omitempty"`
	Delivered  string                         `json:"delivered,omitempty"`
	// inFlight counts the deliveries and signals to the admission workflow
	// not finished: the run completes or continues as new after them.
	inFlight int
}

// arrivedWhileWaiting records, at the start of a fresh investigation, the
// alerts that arrived while it waited to start (its input holds them).
func (r *run) arrivedWhileWaiting(fresh bool) {
	if in := r.Input.Intake; fresh && in != nil && (len(in.Arrived.Arrivals) > 0 || in.Arrived.Dropped > 0) {
		r.arrive(in.Arrived)
	}
}

// add keeps a batch of arrivals (the latest maxArrivalsKept).
func (s *IntakeState) add(b investigation.ArrivalBatch) {
	s.Arrived += len(b.Arrivals) + b.Dropped
	s.Arrivals = append(slices.Clone(s.Arrivals), b.Arrivals...)
	s.Arrivals = s.Arrivals[max(0, len(s.Arrivals)-maxArrivalsKept):]
}

// arrivals is what the model is shown of the alerts that arrived: the
// latest, and how many earlier ones are left out.
func (r *run) arrivals() investigation.ArrivalBatch {
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
// severity, changes the verdict.
func (r *run) arrive(b investigation.ArrivalBatch) investigation.Ack {
	r.Intake.add(b)
	seq := 0
	var related []string
	rose := ""
	for _, a := range b.Arrivals {
		seq = r.emit(investigation.Event{Kind: investigation.EventNote, Text: "alert arrived: " + a.Text()})
		switch {
		case a.Kind == investigation.ArrivalRelated:
			related = append(related, a.AlertID)
		case a.PrevSeverity != "" && intake.Rank(a.Severity) > intake.Rank(a.PrevSeverity):
			rose = a.PrevSeverity + " → " + a.Severity
		}
	}
	if b.Dropped > 0 {
		seq = r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("%d more alerts arrived (not listed: the intake's bound)", b.Dropped)})
	}
	msg := "recorded: the investigation sees them from its next model call"
	if r.Phase == investigation.PhaseIdle && r.Verdict != nil && r.Steering.StopReason == "" && len(r.Steering.FollowUps) < maxFollowUps {
		question := ""
		switch {
		case len(related) == 1:
			question = fmt.Sprintf("A related alert arrived (%s): does it change the verdict?", related[0])
		case len(related) > 1:
			question = fmt.Sprintf("%d related alerts arrived (%s): do they change the verdict?", len(related), strings.Join(related[:min(5, len(related))], ", "))
		case rose != "":
			question = fmt.Sprintf("The alert was seen again with a higher severity (%s): does it change the verdict?", rose)
		}
		if question != "" {
			r.Steering.FollowUps = append(r.Steering.FollowUps, question)
			r.Steering.generated(question)
			seq = r.emit(investigation.Event{Kind: investigation.EventNote, Text: "follow-up question queued: " + question})
			msg = "recorded: a follow-up asks whether it changes the verdict"
		}
	}
	return investigation.Ack{Seq: seq, Message: msg}
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
	return r.arrive(b), nil
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
	r.sendVerdict(ctx)
}

// deliverAnswer runs after a direct answer to a follow-up: the admission
// workflow learns what it cost, and a verdict the answer changed is
// delivered as a conclusion's is (an unchanged one is not sent again).
func (r *run) deliverAnswer(ctx workflow.Context, changed *investigation.Verdict) {
	if r.Input.Intake == nil {
		return
	}
	r.tellAdmission(ctx)
	if changed != nil {
		r.sendVerdict(ctx)
	}
}

// tellAdmission signals investigation_concluded with the spend so far.
func (r *run) tellAdmission(ctx workflow.Context) {
	in := r.Input.Intake
	concluded := investigation.Concluded{WorkflowID: r.id, Spend: r.Spend, Turn: r.Turn}
	r.background(ctx, func(ctx workflow.Context) {
		if err := workflow.SignalExternalWorkflow(ctx, in.Admission, "", investigation.ConcludedSignal, concluded).Get(ctx, nil); err != nil {
			r.log.Warn("could not tell the admission workflow of the conclusion", "admission", in.Admission, "error", err)
		}
	})
}

// sendVerdict delivers the standing verdict to each target, under the
// exchange's idempotency key.
func (r *run) sendVerdict(ctx workflow.Context) {
	in := r.Input.Intake
	if !in.Delivery.On() || r.Verdict == nil {
		return
	}
	d := activities.DeliveryInput{
		Key: fmt.Sprintf("%s/t%d", r.session, r.Turn), WorkflowID: r.id, AlertID: r.Input.AlertID, Identity: in.Identity,
		Exchange: r.Turn, Verdict: *r.Verdict, Summary: investigation.SummaryOf(r.Conclusion), Alerts: 1 + r.Intake.Arrived,
		At: workflow.Now(ctx), Delivery: in.Delivery,
	}
	if r.Intake.Delivered != "" && r.Intake.Delivered != r.Verdict.Verdict {
		d.Previous = r.Intake.Delivered
	}
	r.Intake.Delivered = r.Verdict.Verdict
	st := investigation.DeliveryStatus{Key: d.Key, Verdict: d.Verdict.Verdict, Pending: true}
	r.Intake.Deliveries = append(slices.Clone(r.Intake.Deliveries), st)
	r.Intake.Deliveries = r.Intake.Deliveries[max(0, len(r.Intake.Deliveries)-maxDeliveriesKept):]
	targets := 0
	record := func(key string, set func(*investigation.DeliveryStatus)) {
		for i := range r.Intake.Deliveries {
			if r.Intake.Deliveries[i].Key == key {
				set(&r.Intake.Deliveries[i])
			}
		}
	}
	send := func(name string, fn any, set func(*investigation.DeliveryStatus, string, activities.DeliveryOutput)) {
		targets++
		r.background(ctx, func(ctx workflow.Context) {
			var out activities.DeliveryOutput
			err := workflow.ExecuteActivity(deliveryOptions(ctx, "deliver the verdict to "+name), fn, d).Get(ctx, &out)
			state := "delivered"
			switch {
			case err != nil:
				state = "failed: " + message(err)
				r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("the verdict could not be delivered to %s: %s", name, message(err))})
			case out.Skipped != "":
				state = "skipped: " + out.Skipped
			}
			record(d.Key, func(s *investigation.DeliveryStatus) {
				set(s, state, out)
				if targets--; targets == 0 {
					s.Pending = false
				}
			})
		})
	}
	if in.Delivery.Slack {
		send("Slack", ia.DeliverSlack, func(s *investigation.DeliveryStatus, state string, _ activities.DeliveryOutput) { s.Slack = state })
	}
	if in.Delivery.ResultsTopic != "" {
		send(in.Delivery.ResultsTopic, ia.PublishResult, func(s *investigation.DeliveryStatus, state string, out activities.DeliveryOutput) {
			s.Topic, s.MessageID = state, out.MessageID
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
	reason := "completed"
	switch {
	case ctx.Err() != nil:
		reason = "cancelled"
	case err != nil:
		reason = "failed: " + message(err)
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if serr := workflow.SignalExternalWorkflow(dctx, in.Admission, "", investigation.ClosedSignal,
		investigation.Closed{WorkflowID: r.id, Reason: reason}).Get(dctx, nil); serr != nil {
		r.log.Warn("could not tell the admission workflow that the investigation closed", "admission", in.Admission, "error", serr)
	}
	return err
}

// deliveryOptions retry a delivery for deliveryBudget: at least once, as
// long as the target is only unreachable.
func deliveryOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: deliveryBudget,
		StartToCloseTimeout:    time.Minute,
		Summary:                summary,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: 2 * time.Minute},
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
