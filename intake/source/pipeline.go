// Package source is an intake process's way in: the Pub/Sub subscription
// (PubSub) and the webhook (HTTP), both through one Pipeline that
// validates, stores and admits each alert, and a Batcher that sends the
// admission workflow its alerts in batches. It knows nothing of Temporal:
// the starter hands it the admission client (agentclient.Client.Admit).
// A message is acknowledged, and a webhook call answered 202, only once
// the alert is stored and its outcome is recorded by the admission
// workflow (design/intake.md, "Nothing lost").
package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/clip"
)

// Store keeps alerts (alerts.Store): Create stores a new one and leaves
// one already stored under its ID (its content) as it is. Its errors
// wrapping alerts.ErrIDTaken or alerts.ErrUnstorable are the alert's, not
// the store's: the message is dead-lettered (400), never retried.
type Store interface {
	Create(ctx context.Context, a alerts.Alert) (bool, error)
}

// Pipeline takes one message body to its outcome.
type Pipeline struct {
	Store   Store
	Batcher *Batcher
	// CallTimeout bounds the store write; the admission has the
	// admitter's own bound.
	CallTimeout time.Duration
	Log         *slog.Logger
	// Span, when set, starts the alert's span (telemetry.Telemetry.Span),
	// and Traceparent names it (telemetry.Traceparent): it goes with the
	// admitted alert, so the investigation started for it joins the trace.
	Span        func(ctx context.Context, name string) (context.Context, func(failed bool))
	Traceparent func(context.Context) string
}

// Result is what became of one message. Exactly one of Invalid, Retry,
// Busy and Outcome says it: Invalid is a malformed or oversized message, or one
// Firestore refuses or whose ID another alert holds (dead letter, 400), Retry a service that failed (nack, 503),
// Busy a source holding too many decoded bytes (nack, 429), RetryAfter > 0 a
// full waiting room (nack later, 429); otherwise Outcome is recorded.
type Result struct {
	Alert      alerts.Alert
	Identity   intake.Identity
	Envelopes  []string
	Outcome    intake.Outcome
	Invalid    error
	Retry      error
	Busy       error
	RetryAfter time.Duration
}

// Take validates body as `starter investigate` validates an alert file
// (intake.Unwrap, then alerts.Parse), stores the alert and has the
// admission workflow decide what becomes of it.
func (p *Pipeline) Take(ctx context.Context, body []byte) Result {
	return p.take(ctx, body, nil)
}

// take is Take with the alert's decoded bytes (alerts.ParseWeighed's
// estimate) taken from a source's budget by acquire, when set, before the
// alert is decoded, and given back once the decoded data is dropped or
// take returns, whatever the result.
func (p *Pipeline) take(ctx context.Context, body []byte, acquire func(weight int) (release func(), err error)) (res Result) {
	if p.Span != nil {
		var end func(bool)
		ctx, end = p.Span(ctx, "intake alert")
		defer func() { end(res.Invalid != nil || res.Retry != nil) }()
	}
	u, err := intake.Unwrap(body)
	if err != nil {
		res.Invalid = err
		return res
	}
	res.Envelopes = u.Envelopes
	release := func() {}
	defer func() { release() }()
	var weigh func(int) error
	if acquire != nil {
		weigh = func(weight int) (err error) {
			release, err = acquire(weight)
			if err != nil {
				release = func() {}
			}
			return err
		}
	}
	if res.Alert, err = alerts.ParseWeighed(u.Alert, weigh); err != nil {
		if errors.Is(err, errOverBudget) {
			res.Busy = err
		} else {
			res.Invalid = err
		}
		return res
	}
	res.Identity = intake.Identify(res.Alert)
	admit := intake.Alert{
		AlertID: res.Alert.ID, Identity: res.Identity.Key, Count: res.Identity.Count, Severity: res.Alert.Severity,
		Source: res.Alert.Source, Title: clip.String(res.Alert.Title, intake.MaxTitleBytes), Keys: intake.Keys(res.Alert.Data),
		Traceparent: p.traceparent(ctx),
	}
	// The admission workflow refuses a whole batch for one alert it cannot
	// hold, and a refused batch comes back: such an alert is malformed
	// here, alone, before it can share a batch.
	if err := admit.Check(); err != nil {
		res.Invalid = err
		return res
	}
	sctx, cancel := context.WithTimeout(ctx, p.CallTimeout)
	_, err = p.Store.Create(sctx, res.Alert)
	cancel()
	switch {
	case errors.Is(err, alerts.ErrIDTaken):
		// Another alert holds the ID (48 bits of the content's hash):
		// admitting this one would have it investigated from the other's
		// data, and no retry changes that.
		p.Log.Warn("alert refused: another alert with the same ID but different content is stored", "alert_id", res.Alert.ID)
		res.Invalid = err
		return res
	case errors.Is(err, alerts.ErrUnstorable):
		// Firestore refused the document itself; a retry is refused again.
		res.Invalid = err
		return res
	case err != nil:
		res.Retry = storeError(ctx, sctx, err)
		return res
	}
	// The decoded data (up to alerts' 8 MiB bound) is not held while the
	// admission workflow decides, which may take seconds under a burst:
	// the investigation loads the alert by ID.
	res.Alert.Data = nil
	release()
	out, retryAfter, err := p.Batcher.Submit(ctx, admit)
	switch {
	case err != nil:
		res.Retry = err
	case out.Kind == intake.OutcomeShed:
		res.RetryAfter = max(retryAfter, time.Second)
		res.Outcome = out
	default:
		res.Outcome = out
	}
	return res
}

func (p *Pipeline) traceparent(ctx context.Context) string {
	if p.Traceparent == nil {
		return ""
	}
	return p.Traceparent(ctx)
}

// storeError says in one sentence why the alert could not be stored.
func storeError(ctx, call context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return errors.New("interrupted while storing the alert")
	case call.Err() != nil:
		return errors.New("Firestore did not answer in time; the alert was not stored")
	}
	return fmt.Errorf("the alert could not be stored: %w", err)
}
