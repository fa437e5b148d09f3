package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/gemini"
	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/tools"
	"github.com/secops-agent/investigator/transcript"
)

// Temporal error types of failed Gemini calls. The non-retryable ones end the
// run with their one-sentence message (the retry table in
// design/durability.md).
const (
	ErrGeminiInvalidRequest = "GeminiInvalidRequest"
	ErrGeminiUnauthorized   = "GeminiUnauthorized"
	ErrGeminiForbidden      = "GeminiForbidden"
	ErrGeminiNotFound       = "GeminiNotFound"
	ErrGeminiRateLimited    = "GeminiRateLimited"
	ErrGeminiUnavailable    = "GeminiUnavailable"
	ErrGeminiTimeout        = "GeminiTimeout"
	// ErrGeminiUnreadable: a 2xx answer the SDK could not decode
	// (gemini.UnreadableError); the same body fails the same way.
	ErrGeminiUnreadable = "GeminiUnreadable"
	// ErrModelRefused: the model answered nothing for a reason the same
	// request meets again (RefusedError).
	ErrModelRefused = "ModelRefused"
	// ErrAnswerTooLarge: a model answer too large to store even clipped.
	ErrAnswerTooLarge = "AnswerTooLarge"
)

// Temporal error types of a tool's outside service (a threat-intelligence
// provider) that is worth retrying; its other failures are the tool's error
// result.
const (
	ErrIntelRateLimited = "IntelRateLimited"
	ErrIntelUnavailable = "IntelUnavailable"
	ErrIntelTimeout     = "IntelTimeout"
)

// CallGemini runs one Gemini request and turns its failure into the Temporal
// error that decides whether the activity is retried.
func CallGemini[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	res, err := gemini.Call(ctx, fn)
	return res, geminiError(err)
}

// geminiError maps a typed Gemini failure to a Temporal error: rate limits,
// unavailability and timeouts are retried (after the server's Retry-After),
// the rest fail the activity at once, as does a refused answer. Other errors
// are returned as they are.
func geminiError(err error) error {
	var refused *RefusedError
	if errors.As(err, &refused) {
		return temporal.NewNonRetryableApplicationError(refused.Error(), ErrModelRefused, nil)
	}
	var unreadable *gemini.UnreadableError
	if errors.As(err, &unreadable) {
		return temporal.NewNonRetryableApplicationError(unreadable.Error(), ErrGeminiUnreadable, unreadable)
	}
	e, ok := upstream.As(err)
	if !ok {
		return err
	}
	switch e.Kind {
	case upstream.RateLimited:
		return retryable(e.Message, ErrGeminiRateLimited, e)
	case upstream.Unavailable:
		return retryable(e.Message, ErrGeminiUnavailable, e)
	case upstream.Timeout:
		return retryable(e.Message, ErrGeminiTimeout, e)
	case upstream.BadRequest:
		return temporal.NewNonRetryableApplicationError(e.Message, ErrGeminiInvalidRequest, e.Cause)
	case upstream.CredentialsRejected:
		if e.Status == http.StatusForbidden {
			return temporal.NewNonRetryableApplicationError(e.Message, ErrGeminiForbidden, e.Cause)
		}
		return temporal.NewNonRetryableApplicationError(e.Message, ErrGeminiUnauthorized, e.Cause)
	case upstream.NotFound:
		return temporal.NewNonRetryableApplicationError(e.Message, ErrGeminiNotFound, e.Cause)
	}
	return err
}

// toolFailure decides what a tool's error becomes: a result the model reads
// (rejected arguments, a provider that refused the key or the request, or
// knows nothing) or an error for Temporal to retry (a rate limit after its
// Retry-After, an unavailable provider, anything unexpected).
func toolFailure(tool string, err error) (result string, retry error) {
	if tools.IsRejection(err) {
		return err.Error(), nil
	}
	e, ok := upstream.As(err)
	if !ok {
		return "", fmt.Errorf("tool %s: %w", tool, err)
	}
	switch e.Kind {
	case upstream.RateLimited:
		return "", retryable(e.Message, ErrIntelRateLimited, e)
	case upstream.Unavailable:
		return "", retryable("tool "+tool+": "+e.Message, ErrIntelUnavailable, e)
	case upstream.Timeout:
		return "", retryable("tool "+tool+": "+e.Message, ErrIntelTimeout, e)
	case upstream.CredentialsRejected, upstream.BadRequest, upstream.NotFound:
		return e.Message, nil
	}
	return "", fmt.Errorf("tool %s: %w", tool, err)
}

// retryable is a retryable application error whose next attempt waits for
// the delay the service asked for (0: the retry policy's backoff).
func retryable(msg, errType string, e *upstream.Error) error {
	return temporal.NewApplicationErrorWithOptions(msg, errType, temporal.ApplicationErrorOptions{
		Cause:          e.Cause,
		NextRetryDelay: e.RetryAfter,
	})
}

// Temporal error types of a verdict's delivery (intake.go): a target
// that cannot be reached now is retried, one that refused is not.
const (
	ErrDeliveryUnavailable = "DeliveryUnavailable"
	ErrDeliveryRefused     = "DeliveryRefused"
)

// deliveryError maps a failed delivery (Slack, the results topic): a rate
// limit is retried after its Retry-After, an unreachable target is retried,
// a refusal (a revoked webhook, a missing topic) is not.
func deliveryError(err error) error {
	e, ok := upstream.As(err)
	if !ok {
		return err
	}
	if e.Kind.Retryable() {
		return retryable(e.Message, ErrDeliveryUnavailable, e)
	}
	return temporal.NewNonRetryableApplicationError(e.Message, ErrDeliveryRefused, e.Cause)
}

// ErrTranscriptMissing is the error type of an activity that needs a
// transcript entry the store does not hold: retrying cannot bring it back,
// so the workflow runs the calls again instead.
const ErrTranscriptMissing = "TranscriptMissing"

// ErrTranscriptKey is the error type of an activity that named a key no
// transcript entry can have (transcript.KeyError): the same key is refused
// on every attempt.
const ErrTranscriptKey = "TranscriptKey"

// storeError makes a missing transcript entry and a key no entry can have
// non-retryable; other store errors (an outage) stay retryable, within the
// activity's time budget.
func storeError(err error) error {
	var missing *transcript.MissingError
	if errors.As(err, &missing) {
		return temporal.NewNonRetryableApplicationError(missing.Error(), ErrTranscriptMissing, err)
	}
	var key *transcript.KeyError
	if errors.As(err, &key) {
		return temporal.NewNonRetryableApplicationError(key.Error(), ErrTranscriptKey, err)
	}
	return err
}
