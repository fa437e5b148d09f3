package intake

import (
	"fmt"
	"math"
	"time"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
)

// Names of the admission workflow: one per task queue, shared by every
// intake process of that queue (design/intake.md, "The waiting room").
const (
	AdmissionWorkflowName = "IntakeAdmission"
	AdmitUpdate           = "admit"   // arg: AdmitRequest; result: AdmitResult
	ReleaseUpdate         = "release" // arg: Release; result: Released
	StatusQuery           = "status"  // result: Status
)

// The Pub/Sub names of the local stack (starter intake setup creates them
// in a project): alerts are published to TopicAlerts, the intake takes
// them from SubscriptionIntake, malformed ones go to TopicDeadLetter and
// verdicts to TopicVerdicts; the Watch subscriptions keep what those two
// topics receive for people (and tests) to read.
const (
	TopicAlerts             = "alerts"
	TopicDeadLetter         = "alerts-dead-letter"
	TopicVerdicts           = "verdicts"
	SubscriptionIntake      = "alerts-intake"
	SubscriptionDeadLetters = "alerts-dead-letter-watch"
	SubscriptionVerdicts    = "verdicts-watch"
)

// Topic and Subscription are full Pub/Sub names in a project.
func Topic(project, id string) string        { return "projects/" + project + "/topics/" + id }
func Subscription(project, id string) string { return "projects/" + project + "/subscriptions/" + id }

// AdmissionID is the admission workflow's ID for a task queue.
func AdmissionID(taskQueue string) string { return "intake-admission-" + taskQueue }

// AdmissionQueue is the task queue the admission workflow and its starts
// run on, beside the investigations' own: a burst's admissions never wait
// behind the workflow tasks of the investigations it started.
func AdmissionQueue(taskQueue string) string { return taskQueue + "-intake" }

// Defaults of the intake's settings.
const (
	DefaultRepeatWindow = 24 * time.Hour
	DefaultGroupWindow  = time.Hour
	DefaultMaxRunning   = 10
)

// Bounds of one admit request.
const (
	MaxBatch       = 100
	MaxTitleBytes  = 200
	MaxKeyBytes    = 300
	maxAlertIDSize = 100
	// A W3C traceparent is 55 bytes; later versions may add fields.
	maxTraceparentBytes = 128
	// A source is a product word ("guardduty", "generic").
	maxSourceBytes = 16
)

// Settings are an intake's policy. Every admit request carries its
// intake's settings and the admission workflow applies the latest, so
// intakes of one queue should run with the same ones.
type Settings struct {
	// MaxRunning bounds the investigations running at once across all
	// intakes (a concluded one waiting for follow-ups does not count).
	MaxRunning int `json:"max_running"`
	// DailyBudgetUSD, when above 0, is the estimated cost of a UTC day's
	// investigations after which only critical alerts start.
	DailyBudgetUSD float64                `json:"daily_budget_usd,omitempty"`
	RepeatWindow   investigation.Duration `json:"repeat_window"`
	GroupWindow    investigation.Duration `json:"group_window"`
	NoGroup        bool                   `json:"no_group,omitempty"`
	// IdleTimeout is how long a concluded investigation stays open for
	// follow-ups (and related alerts).
	IdleTimeout investigation.Duration `json:"idle_timeout"`
	// ApprovalTimeout is how long an action the investigations ask for
	// waits for approve-call or deny-call before it expires, not run (0:
	// investigation.DefaultApprovalTimeout, as before the field). A
	// waiting action holds its running slot.
	ApprovalTimeout investigation.Duration `json:"approval_timeout,omitempty"`
	Delivery        investigation.Delivery `json:"delivery,omitzero"`
	// Prices estimate what investigations cost (the starter's --prices).
	Prices pricing.Table `json:"prices"`
}

// WithDefaults fills zero fields.
func (s Settings) WithDefaults() Settings {
	if s.MaxRunning <= 0 {
		s.MaxRunning = DefaultMaxRunning
	}
	if s.RepeatWindow <= 0 {
		s.RepeatWindow = investigation.Duration(DefaultRepeatWindow)
	}
	if s.GroupWindow <= 0 {
		s.GroupWindow = investigation.Duration(DefaultGroupWindow)
	}
	if s.IdleTimeout <= 0 {
		s.IdleTimeout = investigation.Duration(investigation.DefaultIdleTimeout)
	}
	if len(s.Prices.Models) == 0 {
		s.Prices = pricing.Default()
	}
	return s
}

// Check refuses settings that cannot work, in one sentence naming the flag.
func (s Settings) Check() error {
	switch {
	case s.MaxRunning < 1:
		return fmt.Errorf("--max-running must be at least 1, not %d", s.MaxRunning)
	// NaN passes every comparison and, with Inf, fails the JSON encoding of
	// every admit request: no recorded history holds one, so the update
	// validator that also calls Check refuses nothing it accepted before.
	case math.IsNaN(s.DailyBudgetUSD) || math.IsInf(s.DailyBudgetUSD, 0):
		return fmt.Errorf("--daily-budget-usd must be a number of dollars, not %g", s.DailyBudgetUSD)
	case s.DailyBudgetUSD < 0:
		return fmt.Errorf("--daily-budget-usd must not be negative, not %g", s.DailyBudgetUSD)
	case s.DailyBudgetUSD > 0 && s.Prices.Currency != "" && s.Prices.Currency != "USD":
		return fmt.Errorf("--daily-budget-usd needs a price table in USD, and this one is in %s", s.Prices.Currency)
	case s.RepeatWindow < 0:
		return fmt.Errorf("--repeat-window must not be negative, not %s", s.RepeatWindow)
	case s.GroupWindow < 0:
		return fmt.Errorf("--group-window must not be negative, not %s", s.GroupWindow)
	case s.IdleTimeout < 0:
		return fmt.Errorf("--idle-timeout must be positive, not %s", s.IdleTimeout)
	// No recorded admit request carries the field: the validator refuses
	// nothing it accepted before.
	case s.ApprovalTimeout < 0:
		return fmt.Errorf("--approval-timeout must be positive, not %s", s.ApprovalTimeout)
	case len(s.Delivery.ResultsTopic) > maxTopicBytes || !Plain(s.Delivery.ResultsTopic):
		return fmt.Errorf("--results-topic must be at most %d bytes without characters JSON escapes", maxTopicBytes)
	}
	return checkPrices(s.Prices)
}

// Bounds of the settings the admission workflow keeps in its state (whole,
// across continue-as-new): a price table may be 1 MiB of YAML (pricing.Load),
// and text JSON escapes takes 6 bytes a character. The default table has 7
// models of at most 21 bytes; TestRoomStateIsBounded counts these bounds.
const (
	MaxPriceModels   = 50
	maxPriceName     = 64
	maxCurrencyBytes = 8
	maxPriceSource   = 200
	maxTopicBytes    = 300 // projects/<30>/topics/<255>
	maxPrice         = 1e6 // a million tokens' price
)

// checkPrices refuses a price table the admission workflow cannot keep, or
// a price that is negative, NaN or absurd (an admit request may come from
// elsewhere than pricing.Load).
func checkPrices(t pricing.Table) error {
	switch {
	case len(t.Models) > MaxPriceModels:
		return fmt.Errorf("--prices: the price table lists %d models, over %d", len(t.Models), MaxPriceModels)
	case len(t.Currency) > maxCurrencyBytes || !Plain(t.Currency):
		return fmt.Errorf("--prices: the currency must be at most %d bytes without characters JSON escapes", maxCurrencyBytes)
	case len(t.Source) > maxPriceSource || !Plain(t.Source):
		return fmt.Errorf("--prices: the source must be at most %d bytes without characters JSON escapes", maxPriceSource)
	}
	for name, p := range t.Models {
		if len(name) > maxPriceName || !Plain(name) {
			return fmt.Errorf("--prices: a model name must be at most %d bytes without characters JSON escapes", maxPriceName)
		}
		for _, f := range []float64{p.Input, p.Output} {
			// A price near the float's limit makes a forged report's cost
			// infinite, which the room's state cannot encode as JSON.
			if !(f >= 0 && f <= maxPrice) {
				return fmt.Errorf("--prices: model %s: prices must be 0 to %g a million tokens", name, float64(maxPrice))
			}
		}
	}
	return nil
}

// Alert is what the admission workflow learns of one stored alert: never
// its body (the investigation loads it by ID).
type Alert struct {
	AlertID  string   `json:"alert_id"`
	Identity string   `json:"identity"`
	Count    int64    `json:"count,omitempty"`
	Severity string   `json:"severity"`
	Source   string   `json:"source"`
	Title    string   `json:"title,omitempty"`
	Keys     []string `json:"keys,omitempty"`
	// Traceparent is the W3C traceparent of the intake's span for the
	// alert, "" without tracing; the investigation started for it joins
	// that trace.
	Traceparent string `json:"traceparent,omitempty"`
}

// Check refuses an alert the admission workflow cannot hold: a missing or
// over-long ID or identity, too many or too long keys, a long title. The
// ID, identity, traceparent and source, which the workflow keeps exactly,
// must be Plain (alerts.Parse, Identify and tracing make them so): its
// state's encoded size is then its byte bounds.
func (a Alert) Check() error {
	switch {
	case a.AlertID == "" || len(a.AlertID) > maxAlertIDSize || !Plain(a.AlertID):
		return fmt.Errorf("an alert needs an ID of at most %d bytes without characters JSON escapes", maxAlertIDSize)
	case a.Identity == "" || len(a.Identity) > MaxIdentityBytes || !Plain(a.Identity):
		return fmt.Errorf("alert %s: its identity must be 1 to %d bytes without characters JSON escapes", a.AlertID, MaxIdentityBytes)
	case len(a.Keys) > MaxAlertKeys:
		return fmt.Errorf("alert %s: at most %d grouping keys", a.AlertID, MaxAlertKeys)
	case len(a.Title) > MaxTitleBytes:
		return fmt.Errorf("alert %s: its title is over %d bytes", a.AlertID, MaxTitleBytes)
	case len(a.Traceparent) > maxTraceparentBytes || !Plain(a.Traceparent):
		return fmt.Errorf("alert %s: its traceparent is over %d bytes or holds characters JSON escapes", a.AlertID, maxTraceparentBytes)
	case len(a.Source) > maxSourceBytes || !Plain(a.Source):
		return fmt.Errorf("alert %s: its source must be at most %d bytes without characters JSON escapes", a.AlertID, maxSourceBytes)
	}
	for _, k := range a.Keys {
		if len(k) > MaxKeyBytes {
			return fmt.Errorf("alert %s: a grouping key is over %d bytes", a.AlertID, MaxKeyBytes)
		}
	}
	return nil
}

// AdmitRequest is one batch of alerts from one intake process, with its
// settings.
type AdmitRequest struct {
	Settings Settings `json:"settings"`
	Alerts   []Alert  `json:"alerts"`
}

// Check refuses a request the admission workflow cannot take.
func (r AdmitRequest) Check() error {
	if len(r.Alerts) == 0 || len(r.Alerts) > MaxBatch {
		return fmt.Errorf("an admit request holds 1 to %d alerts, not %d", MaxBatch, len(r.Alerts))
	}
	if err := r.Settings.Check(); err != nil {
		return err
	}
	for _, a := range r.Alerts {
		if err := a.Check(); err != nil {
			return err
		}
	}
	return nil
}

// Outcome kinds: what became of an admitted alert.
const (
	OutcomeStarted   = "started"    // a new investigation, starting now
	OutcomeQueued    = "queued"     // a new investigation, waiting for a free slot
	OutcomeHeld      = "held"       // a new investigation, waiting for the next day's budget or a release
	OutcomeSeenAgain = "seen_again" // its identity's investigation is open: delivered to it
	OutcomeGrouped   = "grouped"    // joined the open investigation of an entity it shares an indicator with
	OutcomeFollowUp  = "follow_up"  // joined a concluded investigation, as a follow-up
	OutcomeRepeat    = "repeat"     // its identity's investigation closed within the repeat window: recorded only
	OutcomeShed      = "shed"       // not taken: the waiting room is full; send it again later
)

// Outcome is what the admission workflow did with one alert. Every kind but
// OutcomeShed is durable: the decision is in the admission workflow's
// history, so the message may be acknowledged.
type Outcome struct {
	AlertID    string `json:"alert_id"`
	WorkflowID string `json:"workflow_id,omitempty"`
	Kind       string `json:"kind"`
	// Position is the place of a queued or held investigation in the
	// waiting room (1 starts next).
	Position int    `json:"position,omitempty"`
	Message  string `json:"message"`
}

// AdmitResult answers an AdmitRequest, one outcome per alert, in order.
type AdmitResult struct {
	Outcomes []Outcome `json:"outcomes"`
	// RetryAfter is how long a shed alert should wait before it is sent again.
	RetryAfter investigation.Duration `json:"retry_after,omitempty"`
}

// Release lets waiting investigations start despite the day's budget:
// those named (workflow or alert IDs), or all.
type Release struct {
	IDs []string `json:"ids,omitempty"`
	All bool     `json:"all,omitempty"`
}

// Released answers a Release.
type Released struct {
	WorkflowIDs []string `json:"workflow_ids"`
	Unknown     []string `json:"unknown,omitempty"`
}

// Counters count what the admission workflow did, since it first started.
type Counters struct {
	Alerts     int64 `json:"alerts"`
	Started    int64 `json:"started"`
	Repeats    int64 `json:"repeats"`
	SeenAgain  int64 `json:"seen_again"`
	Grouped    int64 `json:"grouped"`
	FollowUps  int64 `json:"follow_ups"`
	Shed       int64 `json:"shed"`
	Released   int64 `json:"released"`
	Reinvested int64 `json:"reinvestigated,omitempty"` // repeats whose severity rose
	// StartsFailed counts investigations given up after maxStartAttempts
	// failed starts; ReadmitsLost related alerts to admit again that found
	// the waiting room full and its retry list full too.
	StartsFailed int64 `json:"starts_failed,omitempty"`
	ReadmitsLost int64 `json:"readmits_lost,omitempty"`
	// HandBackDropped counts alerts closing investigations could not hand
	// back (Closed.Returned.Dropped: past what one signal returns).
	HandBackDropped int64 `json:"hand_back_dropped,omitempty"`
	// GivenUpDropped counts arrivals an investigation given up after
	// failed starts had counted as dropped (past the queue bounds).
	GivenUpDropped int64 `json:"given_up_dropped,omitempty"`
	// Displaced counts waiting investigations the full waiting room gave
	// up for an alert of a higher severity, and DisplacedAlerts the alerts
	// they held (acknowledged, never investigated: no repeats).
	Displaced       int64 `json:"displaced,omitempty"`
	DisplacedAlerts int64 `json:"displaced_alerts,omitempty"`
}

// Status is a snapshot of the admission workflow: `starter intake status`.
type Status struct {
	Settings Settings `json:"settings"`
	Running  int      `json:"running"`
	// Waiting counts the investigations not started yet, Held those of them
	// kept back by the daily budget; Concluded the open concluded ones.
	Waiting   int `json:"waiting"`
	Held      int `json:"held"`
	Concluded int `json:"concluded"`
	// Readmitting counts related alerts to admit again that wait for room
	// (the waiting room was full when their investigation closed).
	Readmitting int `json:"readmitting,omitempty"`
	Counters
	Day        string  `json:"day"`
	SpentToday float64 `json:"spent_today"`
	// Unpriced names a model used today that the price table has no price
	// for: today's spend is unknown, so a daily budget holds every
	// non-critical start.
	Unpriced string    `json:"unpriced,omitempty"`
	Currency string    `json:"currency"`
	Open     []Entity  `json:"open"`
	Dropped  int       `json:"dropped,omitempty"` // open entities not listed in Open
	Since    time.Time `json:"since"`
}

// Entity is one open investigation, or one waiting to start, in Status.
type Entity struct {
	WorkflowID string    `json:"workflow_id"`
	AlertID    string    `json:"alert_id"`
	State      string    `json:"state"`
	Severity   string    `json:"severity"`
	Title      string    `json:"title,omitempty"`
	Alerts     int       `json:"alerts"`
	Since      time.Time `json:"since"`
	Held       bool      `json:"held,omitempty"`
	Released   bool      `json:"released,omitempty"`
	Position   int       `json:"position,omitempty"`
	// StartFailures counts failed starts; the next is tried at RetryAt.
	StartFailures int       `json:"start_failures,omitempty"`
	RetryAt       time.Time `json:"retry_at,omitzero"`
}

// Entity states.
const (
	StateWaiting   = "waiting"
	StateStarting  = "starting"
	StateRunning   = "running"
	StateConcluded = "concluded"
)
