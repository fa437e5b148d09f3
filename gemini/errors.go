package gemini

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/redact"
	"github.com/secops-agent/investigator/internal/upstream"
)

// service names Gemini in upstream errors.
const service = "Gemini"

// maxMessageLen bounds the server message quoted in an error (a proxy may
// answer with a whole HTML page).
const maxMessageLen = 500

// Call runs fn with a context whose HTTP requests (made through a client from
// NewClient) have the status and Retry-After header of their error response
// recorded, and returns fn's result with its error classified as an
// *upstream.Error (the activities turn it into a Temporal error):
//
//   - HTTP 400: BadRequest; 401 and 403: CredentialsRejected (a 401 names the
//     credential settings of the client's backend); 404: NotFound;
//   - HTTP 429: RateLimited; 408: Timeout; 5xx: Unavailable. RetryAfter is
//     the response's Retry-After (delta-seconds or HTTP-date) or, failing
//     that, the google.rpc.RetryInfo delay of the error details, capped at
//     10 minutes;
//   - deadline exceeded and network timeouts: Timeout; other transport
//     failures (connection refused or reset): Unavailable;
//   - a redirect to another origin, refused by the client (RedirectError):
//     BadRequest, not retried;
//   - an error that already is an *upstream.Error is returned as is;
//   - anything else (including cancellation and other statuses) is returned
//     wrapped, which Temporal treats as retryable.
//
// Messages say what Gemini answered, not which call it was: the caller (the
// activity and the workflow) adds that context. Messages never contain the
// API key sent with the request (the transport of a client from NewClient
// tells Call which key to redact).
func Call[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	state := &callState{}
	res, err := fn(context.WithValue(ctx, callStateKey{}, state))
	if err == nil {
		return res, nil
	}
	return res, classify(err, state)
}

func classify(err error, state *callState) error {
	status, retryAfter, apiKey, backend := state.snapshot()

	if _, ok := upstream.As(err); ok {
		return err
	}

	// Keep the original error as the cause (so callers can errors.As it to
	// genai.APIError) unless its text holds the key.
	r := redact.New(apiKey)
	cause := r.Error(err)

	if apiErr, ok := asAPIError(err); ok {
		code := apiErr.Code
		if code == 0 {
			code = status
		}
		msg := r.String(apiMessage(apiErr, code))
		kind, ok := upstream.StatusKind(code)
		switch {
		case !ok && code >= 400 && code < 500:
			// 409, 413, 422...: the same request gets the same answer.
			kind = upstream.BadRequest
		case !ok:
			return fmt.Errorf("Gemini error (HTTP %d): %s: %w", code, msg, cause)
		}
		e := &upstream.Error{Service: service, Kind: kind, Status: code, Cause: cause}
		if kind.Retryable() {
			e.RetryAfter = retryDelayFrom(retryAfter, apiErr.Details, time.Now())
		}
		switch {
		case kind == upstream.BadRequest:
			e.Message = fmt.Sprintf("Gemini rejected the request as invalid (HTTP %d): %s", code, msg)
		case code == http.StatusUnauthorized:
			e.Message = fmt.Sprintf("Gemini rejected the credentials (HTTP 401): %s; %s", msg, credentialsHint(backend))
		case code == http.StatusForbidden:
			e.Message = fmt.Sprintf("Gemini denied access (HTTP 403): %s", msg)
		case code == http.StatusNotFound:
			e.Message = fmt.Sprintf("Gemini model or endpoint not found (HTTP 404): %s; check the model name", msg)
		case code == http.StatusTooManyRequests:
			e.Message = fmt.Sprintf("Gemini rate limit or quota exceeded (HTTP 429): %s", msg)
		case code == http.StatusRequestTimeout:
			e.Message = fmt.Sprintf("Gemini request timed out (HTTP 408): %s", msg)
		default:
			e.Message = fmt.Sprintf("Gemini is unavailable (HTTP %d): %s", code, msg)
		}
		return e
	}

	if errors.Is(err, context.Canceled) {
		// Leave cancellation recognisable (errors.Is) for Temporal.
		return fmt.Errorf("Gemini call cancelled: %w", cause)
	}
	if re := (*RedirectError)(nil); errors.As(err, &re) {
		// The same request gets the same redirect: not worth retrying.
		return &upstream.Error{Service: service, Kind: upstream.BadRequest, Message: re.Error(), Cause: cause}
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return &upstream.Error{Service: service, Kind: upstream.Timeout, Message: "Gemini call timed out", Cause: cause}
	}
	var urlErr *url.Error
	var opErr *net.OpError
	if errors.As(err, &urlErr) || errors.As(err, &opErr) {
		return &upstream.Error{Service: service, Kind: upstream.Unavailable, Message: "cannot reach Gemini", Cause: cause}
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
	return clip.String(strings.Join(strings.Fields(msg), " "), maxMessageLen)
}

// retryDelayFrom reads the Retry-After header value (delta-seconds or an
// HTTP-date) or, when there is none, a google.rpc.RetryInfo retryDelay
// ("37s") in the error details. It returns 0 when neither gives a positive
// delay, and caps the result at upstream.MaxRetryDelay.
func retryDelayFrom(retryAfter string, details []map[string]any, now time.Time) time.Duration {
	d := upstream.ParseRetryAfter(retryAfter, now)
	if d <= 0 {
		d = retryInfoDelay(details)
	}
	if d <= 0 {
		return 0
	}
	return min(d, upstream.MaxRetryDelay)
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
