package investigation

import (
	"fmt"
	"time"
)

// The investigation's side of the intake (design/intake.md): what an
// investigation that the intake started knows about it, the alerts that
// arrive for it while it is open, and the deliveries of its verdicts.
const (
	// AlertsUpdate is an update (with a validator) and a signal of the same
	// name: alerts that arrived for this investigation (arg: ArrivalBatch;
	// result: Ack).
	AlertsUpdate = "alerts"
	// ConcludedSignal and ClosedSignal go from an intake investigation to
	// the admission workflow: it concluded (arg: Concluded), it closed
	// (arg: Closed).
	ConcludedSignal = "investigation_concluded"
	ClosedSignal    = "investigation_closed"
)

// Kinds of Arrival.
const (
	ArrivalSeenAgain = "seen_again" // the same alert identity again
	ArrivalRelated   = "related"    // another alert sharing a principal indicator
)

// IntakeInput is set when the intake started the investigation.
type IntakeInput struct {
	// Identity is the alert identity the investigation is for (intake.Identify).
	Identity string `json:"identity"`
	// Admission is the workflow ID of the admission workflow to tell when
	// the investigation concludes and closes.
	Admission string   `json:"admission"`
	Delivery  Delivery `json:"delivery,omitzero"`
	// Arrived are the alerts that arrived while it waited to start.
	Arrived ArrivalBatch `json:"arrived,omitzero"`
}

// ArrivalBatch is alerts that arrived for an investigation; Dropped counts
// those left out by the intake's bounds.
type ArrivalBatch struct {
	Arrivals []Arrival `json:"arrivals,omitempty"`
	Dropped  int       `json:"dropped,omitempty"`
	// OverBudget: the admission delivered these while the intake's daily
	// budget was reached (or cannot be kept) and none is critical. The
	// investigation records them and shows them to later model calls, but
	// queues no follow-up about them: it would spend past the ceiling.
	OverBudget bool `json:"over_budget,omitempty"`
}

// Delivery says where each conclusion goes: Slack, through the worker's
// SLACK_WEBHOOK_URL (the URL, a secret, never enters history), and the
// Pub/Sub topic ResultsTopic ("projects/P/topics/T").
type Delivery struct {
	Slack        bool   `json:"slack,omitempty"`
	ResultsTopic string `json:"results_topic,omitempty"`
}

// On says whether anything is to be delivered.
func (d Delivery) On() bool { return d.Slack || d.ResultsTopic != "" }

// Arrival is an alert that arrived for an open investigation: its identity
// seen again, or a related alert. Title is the alert's, untrusted text:
// prompts show arrivals inside a data block only.
type Arrival struct {
	Kind     string `json:"kind"`
	AlertID  string `json:"alert_id"`
	Identity string `json:"identity,omitempty"`
	Source   string `json:"source,omitempty"`
	Severity string `json:"severity,omitempty"`
	Title    string `json:"title,omitempty"`
	// PrevCount and Count are the source's counts before and now (seen
	// again; 0 when the source gives none); PrevSeverity the severity before.
	PrevCount    int64  `json:"prev_count,omitempty"`
	Count        int64  `json:"count,omitempty"`
	PrevSeverity string `json:"prev_severity,omitempty"`
	// Times counts the arrivals merged into this one (at least 1).
	Times int `json:"times,omitempty"`
	// Shared is the principal indicator a related alert shares with the
	// investigation, such as "ip:198.51.100.23".
	Shared string    `json:"shared,omitempty"`
	At     time.Time `json:"at"`
}

// Text says what arrived in one line: "seen again: count 214 → 310",
// "related alert guardduty-1a2b3c4d5e6f (high, shares ip:198.51.100.23)".
func (a Arrival) Text() string {
	if a.Kind == ArrivalSeenAgain {
		s := "seen again"
		if a.Count > 0 && a.PrevCount > 0 && a.Count != a.PrevCount {
			s += fmt.Sprintf(": count %d → %d", a.PrevCount, a.Count)
		} else if a.Times > 1 {
			s += fmt.Sprintf(" (%d times)", a.Times)
		}
		if a.PrevSeverity != "" && a.PrevSeverity != a.Severity {
			s += fmt.Sprintf(", severity %s → %s", a.PrevSeverity, a.Severity)
		}
		return s + " (alert " + a.AlertID + ")"
	}
	s := fmt.Sprintf("related alert %s (%s", a.AlertID, a.Severity)
	if a.Shared != "" {
		s += ", shares " + a.Shared
	}
	return s + ")"
}

// Concluded tells the admission workflow that an investigation concluded:
// it no longer counts as running, and its spend so far counts against the
// day's budget.
type Concluded struct {
	WorkflowID string `json:"workflow_id"`
	// Session is the run's (Input.Session, else the workflow ID): the
	// admission workflow ignores a signal of a run that is not its
	// entity's (a forgotten entity's, under a newer one's workflow ID).
	Session string `json:"session,omitempty"`
	Spend   Spend  `json:"spend"`
	Turn    int    `json:"turn"`
}

// ClosedCompleted is Closed.Reason for a run that completed; any other
// reason (failed: ..., cancelled) ended it without a standing conclusion.
const ClosedCompleted = "completed"

// Closed tells the admission workflow that an investigation closed.
type Closed struct {
	WorkflowID string `json:"workflow_id"`
	Session    string `json:"session,omitempty"` // as Concluded.Session
	Reason     string `json:"reason,omitempty"`
	// Spend is the run's usage when it closed: what it spent after its
	// last conclusion (or failing before any) counts against the budget.
	Spend Spend `json:"spend,omitzero"`
	// Returned are alerts signalled to the investigation once it was
	// closing: the admission workflow admits their related alerts again.
	// A Closed that returns alerts is a hand-back (handBack), sent after
	// the run's own Closed: it ends no entity.
	Returned ArrivalBatch `json:"returned,omitzero"`
	// Unseen are the identities, hashed as the admission keeps them, of
	// related alerts (and rises) delivered to the run that no model call
	// saw: its close makes them no repeats (in an admission run under
	// the lost-no-repeat gate; an older one ignores them). UnseenAll:
	// there were more than the run kept, so none of its identities is a
	// repeat. A run without them (an older version) reports nothing.
	Unseen    []string `json:"unseen,omitempty"`
	UnseenAll bool     `json:"unseen_all,omitempty"`
}

// DeliveryStatus is how the delivery of one conclusion went; an
// investigation's status lists the latest ones.
type DeliveryStatus struct {
	// Key is the idempotency key, "<session>/t<exchange>" (Input.Session):
	// the same for every attempt, so receivers can drop duplicates.
	Key     string `json:"key"`
	Verdict string `json:"verdict,omitempty"`
	// Slack and Topic are "delivered", "failed: <why>", or "" when not asked.
	Slack string `json:"slack,omitempty"`
	Topic string `json:"topic,omitempty"`
	// MessageID is the results topic's message ID.
	MessageID string `json:"message_id,omitempty"`
	Pending   bool   `json:"pending,omitempty"`
}

// IntakeStatus is the intake's part of an investigation's Status: its
// identity, the alerts that arrived, the deliveries of its verdicts.
type IntakeStatus struct {
	Identity   string           `json:"identity,omitempty"`
	Arrived    int              `json:"arrived,omitempty"`
	Arrivals   []Arrival        `json:"arrivals,omitempty"`
	Deliveries []DeliveryStatus `json:"deliveries,omitempty"`
}
