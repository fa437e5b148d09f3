package gemini

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"google.golang.org/genai"
)

// Application error types set on the *temporal.ApplicationError returned by
// Call. Workflows can list the non-retryable ones in a RetryPolicy or match
// on them.
const (
	ErrInvalidRequest = "GeminiInvalidRequest"
	ErrUnauthorized   = "GeminiUnauthorized"
	ErrForbidden      = "GeminiForbidden"
	ErrNotFound       = "GeminiNotFound"
	ErrRateLimited    = "GeminiRateLimited"
	ErrUnavailable    = "GeminiUnavailable"
	ErrTimeout        = "GeminiTimeout"
)

// maxRetryDelay caps the delay a server may ask for with Retry-After.
const maxRetryDelay = 10 * time.Minute

// maxMessageLen bounds the server message quoted in an error (a proxy may
// answer with a whole HTML page).
const maxMessageLen = 500

// Call runs fn with a context whose HTTP requests (made through a client from
// NewClient) have the status and Retry-After header of their error response
// recorded, and returns fn's result with its error classified for Temporal:
//
//   - HTTP 400, 401, 403, 404: non-retryable *temporal.ApplicationError of
//     type ErrInvalidRequest, ErrUnauthorized, ErrForbidden, ErrNotFound (a
//     401 names the credential settings of the client's backend);
//   - HTTP 429: retryable ErrRateLimited; 408: retryable ErrTimeout; 5xx:
//     retryable ErrUnavailable. NextRetryDelay is the response's Retry-After
//     (delta-seconds or HTTP-date) or, failing that, the google.rpc.RetryInfo
//     delay of the error details, capped at 10 minutes;
//   - deadline exceeded and network timeouts: retryable ErrTimeout; other
//     transport failures (connection refused or reset): retryable
//     ErrUnavailable;
//   - an error that already is a *temporal.ApplicationError is returned as is;
//   - anything else (including cancellation) is returned wrapped, which
//     Temporal treats as retryable.
//
// Messages say what Gemini answered, not which call it was: the caller (the
// activity and the workflow) adds that context. Messages never contain the API key sent with the request (the transport of
// a client from NewClient tells Call which key to redact).
func Call[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	state := &callState{}
	res, err := fn(context.WithValue(ctx, callStateKey{}, state))
	if err == nil {
		return res, nil
	}
	return res, classify(ctx, err, state)
}

func classify(ctx context.Context, err error, state *callState) error {
	status, retryAfter, apiKey, backend := state.snapshot()

	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return err
	}

	// Keep the original error as the cause (so callers can errors.As it to
	// genai.APIError) unless its text holds the key.
	cause := redactError(err, apiKey)

	if apiErr, ok := asAPIError(err); ok {
		code := apiErr.Code
		if code == 0 {
			code = status
		}
		msg := redact(apiMessage(apiErr, code), apiKey)
		delay := retryDelayFrom(retryAfter, apiErr.Details, time.Now())
		switch {
		case code == http.StatusBadRequest:
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("Gemini rejected the request as invalid (HTTP 400): %s", msg), ErrInvalidRequest, cause)
		case code == http.StatusUnauthorized:
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("Gemini rejected the credentials (HTTP 401): %s; %s", msg, credentialsHint(backend)), ErrUnauthorized, cause)
		case code == http.StatusForbidden:
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("Gemini denied access (HTTP 403): %s", msg), ErrForbidden, cause)
		case code == http.StatusNotFound:
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("Gemini model or endpoint not found (HTTP 404): %s; check the model name", msg), ErrNotFound, cause)
		case code == http.StatusTooManyRequests:
			return retryable(fmt.Sprintf("Gemini rate limit or quota exceeded (HTTP 429): %s", msg), ErrRateLimited, cause, delay)
		case code == http.StatusRequestTimeout:
			return retryable(fmt.Sprintf("Gemini request timed out (HTTP 408): %s", msg), ErrTimeout, cause, delay)
		case code >= 500 && code <= 599:
			return retryable(fmt.Sprintf("Gemini is unavailable (HTTP %d): %s", code, msg), ErrUnavailable, cause, delay)
		default:
			return fmt.Errorf("Gemini error (HTTP %d): %s: %w", code, msg, cause)
		}
	}

	if errors.Is(err, context.Canceled) {
		// Leave cancellation recognisable (errors.Is) for Temporal.
		return fmt.Errorf("Gemini call cancelled: %w", cause)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return retryable("Gemini call timed out", ErrTimeout, cause, 0)
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return retryable("Gemini call timed out", ErrTimeout, cause, 0)
	}
	var urlErr *url.Error
	var opErr *net.OpError
	if errors.As(err, &urlErr) || errors.As(err, &opErr) {
		return retryable("cannot reach Gemini", ErrUnavailable, cause, 0)
	}
	return fmt.Errorf("Gemini call failed: %w", cause)
}

// credentialsHint says which settings hold the credentials of backend (as
// noted by the transport of a client from NewClient; empty when unknown). It
// names settings, never their values.
func credentialsHint(backend string) string {
	switch backend {
	case backendGeminiAPI:
		return "check GEMINI_API_KEY (or GOOGLE_API_KEY)"
	case backendVertexAI:
		return "check the Vertex AI Application Default Credentials (the service account in GOOGLE_APPLICATION_CREDENTIALS, or gcloud auth application-default login) and GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_LOCATION"
	case backendVertexExpress:
		return "check the Vertex AI express-mode API key (GEMINI_API_KEY or GOOGLE_API_KEY)"
	}
	return "check GEMINI_API_KEY (or GOOGLE_API_KEY), or the Vertex AI Application Default Credentials"
}

func retryable(msg, errType string, cause error, delay time.Duration) error {
	return temporal.NewApplicationErrorWithOptions(msg, errType, temporal.ApplicationErrorOptions{
		Cause:          cause,
		NextRetryDelay: delay,
	})
}

// asAPIError finds a genai.APIError (the SDK returns it by value) in err.
func asAPIError(err error) (genai.APIError, bool) {
	var v genai.APIError
	if errors.As(err, &v) {
		return v, true
	}
	var p *genai.APIError
	if errors.As(err, &p) && p != nil {
		return *p, true
	}
	return genai.APIError{}, false
}

// apiMessage is the server's message, shortened, or a fallback.
func apiMessage(e genai.APIError, code int) string {
	msg := strings.TrimSpace(e.Message)
	if msg == "" {
		msg = strings.TrimSpace(e.Status)
	}
	if msg == "" {
		msg = http.StatusText(code)
	}
	if msg == "" {
		msg = "no message"
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxMessageLen {
		cut := maxMessageLen
		for cut > 0 && !isRuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// retryDelayFrom reads the Retry-After header value (delta-seconds or an
// HTTP-date) or, when there is none, a google.rpc.RetryInfo retryDelay
// ("37s") in the error details. It returns 0 when neither gives a positive
// delay, and caps the result at maxRetryDelay.
func retryDelayFrom(retryAfter string, details []map[string]any, now time.Time) time.Duration {
	d := parseRetryAfter(retryAfter, now)
	if d <= 0 {
		d = retryInfoDelay(details)
	}
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryDelay)
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryDelay/time.Second) {
			return maxRetryDelay
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(now)
	}
	return 0
}

func retryInfoDelay(details []map[string]any) time.Duration {
	for _, d := range details {
		typ, _ := d["@type"].(string)
		if !strings.HasSuffix(typ, "google.rpc.RetryInfo") {
			continue
		}
		s, _ := d["retryDelay"].(string)
		if dur, err := time.ParseDuration(strings.TrimSpace(s)); err == nil {
			return dur
		}
	}
	return 0
}
