// Package delivery takes a verdict where the team works: a Slack message
// through an incoming webhook (Block Kit) and the structured result on a
// Pub/Sub topic for a SOAR or a ticketing system. It does I/O and returns
// typed errors (*upstream.Error); activities/delivery.go runs it as
// activities, with retries and an idempotency key. Text that came from an
// alert or a model is untrusted: in a Slack message it is plain text with
// links defanged, never mrkdwn, so it cannot mention anyone, link
// anywhere or pass for the message's own fields.
package delivery

import (
	"time"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/redact"
	"github.com/secops-agent/investigator/investigation"
)

// Bounds of a result's text.
const (
	maxFindings    = 5
	maxFindingText = 500
	maxTitle       = 300
	maxSummary     = 2000
)

// Result is what is delivered of one conclusion: the results topic gets it
// as JSON, Slack as a message. It holds no alert data beyond the alert's
// normalised title, source and severity, and no secret.
type Result struct {
	// Key is the idempotency key, "<session>/t<exchange>" (the session is
	// the workflow ID and, for a reinvestigation, a suffix): the same for
	// every attempt and every target, so a receiver drops duplicates, and
	// new for each run under one workflow ID.
	Key        string `json:"idempotency_key"`
	WorkflowID string `json:"workflow_id"`
	URL        string `json:"url"`
	AlertID    string `json:"alert_id"`
	Identity   string `json:"identity,omitempty"`
	Title      string `json:"title"`
	Source     string `json:"source,omitempty"`
	Severity   string `json:"severity,omitempty"`
	// Exchange is 1 for the investigation, then one more per follow-up.
	Exchange   int    `json:"exchange"`
	Verdict    string `json:"verdict"`
	Confidence string `json:"confidence"`
	// Previous is the verdict delivered before, when this one changes it.
	Previous string                   `json:"previous_verdict,omitempty"`
	Findings []investigation.Evidence `json:"findings,omitempty"`
	Summary  string                   `json:"summary,omitempty"`
	// Alerts counts the alerts the investigation took in (1 + arrivals).
	Alerts      int       `json:"alerts,omitempty"`
	ConcludedAt time.Time `json:"concluded_at"`
}

// Bounded removes every secret the redactor knows from every text of the
// result (a model can quote a key it read in a log line), then clips the
// free text and keeps the top findings. Redaction comes first: a secret
// the clip cut is no longer whole, and most of it would be delivered.
func (r Result) Bounded(secrets *redact.Redactor) Result {
	for _, s := range []*string{&r.Key, &r.WorkflowID, &r.URL, &r.AlertID, &r.Identity, &r.Title, &r.Source, &r.Severity,
		&r.Verdict, &r.Confidence, &r.Previous, &r.Summary} {
		*s = secrets.String(*s)
	}
	r.Title = clip.String(r.Title, maxTitle)
	r.Summary = clip.String(r.Summary, maxSummary)
	if len(r.Findings) > maxFindings {
		r.Findings = r.Findings[:maxFindings]
	}
	findings := make([]investigation.Evidence, len(r.Findings))
	for i, f := range r.Findings {
		f.StepID, f.Tool = secrets.String(f.StepID), secrets.String(f.Tool)
		f.Fact = clip.String(secrets.String(f.Fact), maxFindingText)
		findings[i] = f
	}
	r.Findings = findings
	return r
}
