package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/delivery"
	"github.com/secops-agent/investigator/internal/redact"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/telemetry"
)

// Intake holds the activities of the intake (design/intake.md): the
// admission workflow's (StartInvestigation, CheckInvestigations) and the
// deliveries of an investigation's verdicts (DeliverSlack, PublishResult,
// delivery.go). The worker registers one value of it.
type Intake struct {
	// Temporal starts and describes investigations.
	Temporal *agentclient.Client
	// Slack is nil when the worker has no SLACK_WEBHOOK_URL.
	Slack *delivery.Slack
	Topic *delivery.Topic
	// Alerts give a delivered result its alert's title, source and severity.
	Alerts alertReader
	// WebURL is the Web UI link of a workflow.
	WebURL func(workflowID string) string
	// Secrets are removed from every delivered message.
	Secrets *redact.Redactor
}

// Outcomes of StartInvestigation.
const (
	StartStarted = agentclient.IntakeStarted
	StartRunning = agentclient.IntakeRunning
	StartRepeat  = agentclient.IntakeRepeat
)

// StartInput starts the investigation of an admitted entity.
type StartInput struct {
	WorkflowID string              `json:"workflow_id"`
	Summary    string              `json:"summary"`
	Severity   string              `json:"severity"`
	Admitted   time.Time           `json:"admitted"`
	Input      investigation.Input `json:"input"`
	// Reinvestigate starts a new run even if the identity's last run
	// closed within RepeatWindow (its severity rose since).
	Reinvestigate bool                   `json:"reinvestigate,omitempty"`
	RepeatWindow  investigation.Duration `json:"repeat_window"`
	// Traceparent is the intake's span for the first alert: the
	// investigation's trace hangs under it.
	Traceparent string `json:"traceparent,omitempty"`
}

// StartOutput says what StartInvestigation did.
type StartOutput struct {
	Outcome string `json:"outcome"`
	RunID   string `json:"run_id,omitempty"`
	// Session is the open run's session when Outcome is running (from its
	// memo; "" for a run without one): the admission workflow waits for a
	// run that already told it it closed instead of taking it.
	Session string `json:"session,omitempty"`
	// Found: the outcome is started, but by an earlier attempt of this
	// start (its answer lost), not by this call, so this call's input went
	// nowhere: the admission signals its arrivals to the run instead.
	Found bool `json:"found,omitempty"`
}

// StartInvestigation starts (or finds open) the investigation of an
// admitted entity, under its identity's workflow ID; see
// agentclient.StartIntake. Temporal being unreachable is retried.
func (in *Intake) StartInvestigation(ctx context.Context, s StartInput) (StartOutput, error) {
	outcome, runID, session, found, err := in.Temporal.StartIntake(telemetry.WithTraceparent(ctx, s.Traceparent), agentclient.IntakeStart{
		Start:    agentclient.Start{ID: s.WorkflowID, Summary: s.Summary, Input: s.Input},
		Admitted: s.Admitted, Severity: s.Severity, Reinvestigate: s.Reinvestigate, RepeatWindow: s.RepeatWindow.Duration(),
	}, io.Discard)
	if err != nil {
		return StartOutput{}, fmt.Errorf("start investigation %s: %w", s.WorkflowID, err)
	}
	return StartOutput{Outcome: outcome, RunID: runID, Session: session, Found: found}, nil
}

// CheckInput names investigations the admission workflow counts as open.
type CheckInput struct {
	WorkflowIDs []string `json:"workflow_ids"`
}

// CheckOutput names those of them that have no open run.
type CheckOutput struct {
	Closed []string `json:"closed,omitempty"`
}

// CheckInvestigations says which of the investigations have closed.
func (in *Intake) CheckInvestigations(ctx context.Context, c CheckInput) (CheckOutput, error) {
	closed, err := in.Temporal.ClosedOf(ctx, c.WorkflowIDs)
	return CheckOutput{Closed: closed}, err
}

// DeliveryInput is one conclusion to deliver; its Key is the idempotency
// key, the same for every attempt and target.
type DeliveryInput struct {
	Key        string                 `json:"key"`
	WorkflowID string                 `json:"workflow_id"`
	AlertID    string                 `json:"alert_id"`
	Identity   string                 `json:"identity,omitempty"`
	Exchange   int                    `json:"exchange"`
	Verdict    investigation.Verdict  `json:"verdict"`
	Previous   string                 `json:"previous,omitempty"`
	Summary    string                 `json:"summary,omitempty"`
	Alerts     int                    `json:"alerts,omitempty"`
	At         time.Time              `json:"at"`
	Delivery   investigation.Delivery `json:"delivery"`
}

// DeliveryOutput is what one target made of a delivery.
type DeliveryOutput struct {
	// Skipped says why nothing was sent (no webhook on this worker).
	Skipped   string `json:"skipped,omitempty"`
	MessageID string `json:"message_id,omitempty"`
}

// DeliverSlack posts the conclusion to Slack (SLACK_WEBHOOK_URL of the
// worker). Without a webhook it sends nothing and says so.
func (in *Intake) DeliverSlack(ctx context.Context, d DeliveryInput) (DeliveryOutput, error) {
	if in.Slack == nil || in.Slack.URL == "" {
		return DeliveryOutput{Skipped: "SLACK_WEBHOOK_URL is not set on the worker"}, nil
	}
	r, err := in.result(ctx, d)
	if err != nil {
		return DeliveryOutput{}, err
	}
	return DeliveryOutput{}, deliveryError(in.Slack.Post(ctx, r))
}

// ApprovalInput says that an action waits for the analyst (an MCP tool
// that acts): the Slack message of an intake investigation says so.
type ApprovalInput struct {
	WorkflowID string `json:"workflow_id"`
	AlertID    string `json:"alert_id"`
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	Args       string `json:"args"`
	Reason     string `json:"reason"`
}

// RequestApproval posts to Slack that an action waits for approval, with
// the commands that decide it. Without a webhook it sends nothing.
func (in *Intake) RequestApproval(ctx context.Context, d ApprovalInput) (DeliveryOutput, error) {
	if in.Slack == nil || in.Slack.URL == "" {
		return DeliveryOutput{Skipped: "SLACK_WEBHOOK_URL is not set on the worker"}, nil
	}
	a := delivery.Approval{WorkflowID: d.WorkflowID, AlertID: d.AlertID, Title: d.AlertID, CallID: d.CallID, Tool: d.Tool, Args: d.Args, Reason: d.Reason}
	if in.WebURL != nil {
		a.URL = in.WebURL(d.WorkflowID)
	}
	if in.Alerts != nil {
		if al, err := in.Alerts.Get(ctx, d.AlertID); err == nil {
			a.Title = al.Title
		}
	}
	if in.Secrets != nil {
		a.Args, a.Reason, a.Title = in.Secrets.String(a.Args), in.Secrets.String(a.Reason), in.Secrets.String(a.Title)
	}
	return DeliveryOutput{}, deliveryError(in.Slack.PostApproval(ctx, a))
}

// PublishResult publishes the conclusion to the results topic.
func (in *Intake) PublishResult(ctx context.Context, d DeliveryInput) (DeliveryOutput, error) {
	r, err := in.result(ctx, d)
	if err != nil {
		return DeliveryOutput{}, err
	}
	id, err := in.Topic.Publish(ctx, d.Delivery.ResultsTopic, r)
	return DeliveryOutput{MessageID: id}, deliveryError(err)
}

// result builds the delivered result: the alert's normalised fields from
// the store (a missing alert still delivers, with its ID only), the
// verdict, the link, bounded and without secrets.
func (in *Intake) result(ctx context.Context, d DeliveryInput) (delivery.Result, error) {
	r := delivery.Result{
		Key: d.Key, WorkflowID: d.WorkflowID, AlertID: d.AlertID, Identity: d.Identity, Exchange: d.Exchange,
		Verdict: d.Verdict.Verdict, Confidence: d.Verdict.Confidence, Previous: d.Previous, Findings: d.Verdict.Evidence,
		Summary: d.Summary, Alerts: d.Alerts, ConcludedAt: d.At, Title: d.AlertID,
	}
	if in.WebURL != nil {
		r.URL = in.WebURL(d.WorkflowID)
	}
	if in.Alerts != nil {
		al, err := in.Alerts.Get(ctx, d.AlertID)
		switch {
		case err == nil:
			r.Title, r.Source, r.Severity = al.Title, al.Source, al.Severity
		case !errors.Is(err, alerts.ErrNotFound):
			return r, fmt.Errorf("load alert %s: %w", d.AlertID, err)
		}
	}
	return r.Bounded(in.Secrets), nil
}
