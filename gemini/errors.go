package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"cloud.google.com/go/auth"
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

// maxCauseLen bounds the text of the cause kept with an error.
const maxCauseLen = 4 << 10

// Call runs fn with a context whose HTTP requests (made through a client from
// NewClient) have the status and Retry-After header of their error response
// recorded, and returns fn's result with its error classified as an
// *upstream.Error (the activities turn it into a Temporal error):
//
//   - an HTTP error status, read as kindOf's table says (Google's API error
//     model: only what a retry cannot change fails fast). RetryAfter, for a
//     retried kind, is the response's Retry-After (delta-seconds or
//     HTTP-date) or, failing that, the google.rpc.RetryInfo delay of the
//     error details, capped at 10 minutes;
//   - a 2xx response whose body is a Google error object (the transport
//     turns it into that error), read as the code it names;
//   - an error response whose body could not be read (cut short, over the
//     size limit): read by its status line;
//   - a 2xx response over maxResponseBytes (a stream's too): BadRequest,
//     naming the limit;
//   - a token the Application Default Credentials could not get because
//     Google refused it (a 4xx from the token endpoint, tokenRefused):
//     CredentialsRejected;
//   - a whole 2xx body the SDK could not decode: an *UnreadableError, which
//     never quotes the body;
//   - deadline exceeded and network timeouts: Timeout; other transport
//     failures (connection refused or reset): Unavailable;
//   - a redirect to another origin, refused by the client (RedirectError):
//     BadRequest, not retried;
//   - an error that already is an *upstream.Error is returned as is;
//   - anything else (including cancellation and 1xx/3xx statuses) is
//     returned wrapped, which Temporal treats as retryable.
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
	status, retryAfter, tooLarge, apiKey, backend := state.snapshot()
	okBody, body := state.answered()

	if _, ok := upstream.As(err); ok {
		return err
	}
	if ue := (*UnreadableError)(nil); errors.As(err, &ue) {
		return ue
	}
	if tooLarge && status < 400 {
		// Whatever the SDK made of the part it read (a stream's last event
		// fails to decode), the answer was refused. The cause is the
		// sentinel: the SDK's error may quote megabytes of the body.
		return &upstream.Error{Service: service, Kind: upstream.BadRequest, Message: errResponseTooLarge.Error(), Cause: errResponseTooLarge}
	}

	// Keep the original error as the cause (so callers can errors.As it to
	// genai.APIError) unless its text holds the key or is too long to keep
	// (Temporal stores the cause: the SDK quotes whole bodies in some errors).
	r := redact.New(apiKey)
	cause := r.Error(err)
	if msg := cause.Error(); len(msg) > maxCauseLen {
		cause = errors.New(clip.String(msg, maxCauseLen))
	}
	a := answer{retryAfter: retryAfter, backend: backend, cause: cause}

	if apiErr, ok := asAPIError(err); ok {
		a.code = pickCode(status, apiErr.Code)
		if a.code == apiErr.Code {
			a.rpcStatus = strings.TrimSpace(apiErr.Status)
		}
		a.msg = r.String(apiMessage(apiErr, a.code))
		a.details = apiErr.Details
		return a.typed()
	}

	if errors.Is(err, context.Canceled) {
		// Leave cancellation recognisable (errors.Is) for Temporal.
		return fmt.Errorf("Gemini call cancelled: %w", cause)
	}
	if status >= 400 {
		// The SDK could not read the error body (cut short, or over
		// maxResponseBytes), so it gave no APIError; the status line the
		// transport saw is still Gemini's answer.
		a.code = status
		a.msg = "the error body could not be read"
		return a.typed()
	}
	if re := (*RedirectError)(nil); errors.As(err, &re) {
		// The same request gets the same redirect: not worth retrying.
		return &upstream.Error{Service: service, Kind: upstream.BadRequest, Message: re.Error(), Cause: cause}
	}
	if ae := (*auth.Error)(nil); errors.As(err, &ae) && ae.Response != nil {
		// The auth transport (Vertex AI's Application Default Credentials)
		// could not get a token; it reports that as a transport failure.
		if e := tokenRefused(ae, cause); e != nil {
			return e
		}
	}
	if okBody && status < 400 {
		// The SDK failed on a complete 2xx body: it could not decode it.
		// Its error quotes the body (the model's answer) and the same
		// body fails the same way, so neither is kept.
		return &UnreadableError{Usage: usageIn(body)}
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

// UnreadableError is a 2xx answer whose body the SDK could not decode (not
// JSON, or a field of the wrong type: a broken proxy, or an API the SDK
// does not match). The same body fails the same way, so it is not worth a
// retry. It never holds the body: that is the model's answer, alert data
// in it.
type UnreadableError struct {
	// Usage is the answer's usageMetadata when that much could be read
	// (the call was billed), else nil.
	Usage *genai.GenerateContentResponseUsageMetadata
}

func (e *UnreadableError) Error() string {
	return "Gemini answered with a body that could not be read as a response"
}

// usageIn reads the usageMetadata of a body the SDK could not decode, if
// its first JSON value has a readable one: the answer was billed.
func usageIn(body []byte) *genai.GenerateContentResponseUsageMetadata {
	var v struct {
		UsageMetadata *genai.GenerateContentResponseUsageMetadata `json:"usageMetadata"`
	}
	// A Decoder reads the first value and ignores what trails it.
	if json.NewDecoder(bytes.NewReader(body)).Decode(&v) != nil {
		return nil
	}
	return v.UsageMetadata
}

// tokenRefused reads a failed token request of the Application Default
// Credentials: a 4xx (invalid_grant: a deleted service account key, a
// gcloud login that needs re-authentication) is a credentials problem no
// retry fixes; a 408, 429 or 5xx is the token endpoint's outage (nil:
// classified as a transport failure). The response body is not quoted: the
// OAuth error code is enough and is read by an allow-list.
func tokenRefused(ae *auth.Error, cause error) error {
	code := ae.Response.StatusCode
	if code < 400 || code > 499 || ae.Temporary() {
		return nil
	}
	what := fmt.Sprintf("HTTP %d", code)
	var body struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(ae.Body, &body) == nil && oauthCode.MatchString(body.Error) {
		what += " " + body.Error
	}
	return &upstream.Error{Service: service, Kind: upstream.CredentialsRejected, Status: code, Cause: cause,
		Message: fmt.Sprintf("Google refused a token for the Vertex AI Application Default Credentials (%s); %s", what, credentialsHint(backendVertexAI))}
}

// oauthCode is an OAuth error code as RFC 6749 spells them (invalid_grant).
var oauthCode = regexp.MustCompile(`^[a-z_]{1,40}$`)

// kindOf reads an HTTP status (and the google.rpc.Code name of the error
// body, when it names one) by Google's API error model
// (https://cloud.google.com/apis/design/errors), failing fast only where a
// retry cannot change the answer:
//
//	HTTP   google.rpc.Code                                   Kind
//	400    INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE  BadRequest
//	401    UNAUTHENTICATED                                   CredentialsRejected
//	403    PERMISSION_DENIED                                 CredentialsRejected
//	404    NOT_FOUND                                         NotFound
//	408    (a proxy's request timeout)                       Timeout
//	409    ABORTED, or no name (Google: retry the sequence)  Unavailable
//	409    ALREADY_EXISTS (never from generate or embed)     BadRequest
//	429    RESOURCE_EXHAUSTED                                RateLimited
//	499    CANCELLED (Gemini under load, backendError)       Unavailable
//	500    INTERNAL, UNKNOWN, DATA_LOSS                      Unavailable
//	501    UNIMPLEMENTED                                     BadRequest
//	503    UNAVAILABLE                                       Unavailable
//	504    DEADLINE_EXCEEDED                                 Unavailable
//	other 4xx (405, 413, 422, ...)                           BadRequest
//	other 5xx                                                Unavailable
//
// Any other status (1xx, 2xx, 3xx) has no kind (ok is false).
func kindOf(code int, rpcStatus string) (k upstream.Kind, ok bool) {
	switch {
	case code == http.StatusConflict && rpcStatus == "ALREADY_EXISTS":
		return upstream.BadRequest, true
	case code == http.StatusConflict, code == statusClientClosed:
		return upstream.Unavailable, true
	case code == http.StatusNotImplemented:
		return upstream.BadRequest, true
	}
	if k, ok := upstream.StatusKind(code); ok {
		return k, true
	}
	if code >= 400 && code < 500 {
		return upstream.BadRequest, true
	}
	return 0, false
}

// statusClientClosed is HTTP 499, google.rpc.Code CANCELLED.
const statusClientClosed = 499

// rpcHTTPStatus is the HTTP status of each google.rpc.Code name, for an error
// object that names its code but gives no number (in a 2xx body).
var rpcHTTPStatus = map[string]int{
	"CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400, "DEADLINE_EXCEEDED": 504,
	"NOT_FOUND": 404, "ALREADY_EXISTS": 409, "PERMISSION_DENIED": 403, "UNAUTHENTICATED": 401,
	"RESOURCE_EXHAUSTED": 429, "FAILED_PRECONDITION": 400, "ABORTED": 409, "OUT_OF_RANGE": 400,
	"UNIMPLEMENTED": 501, "INTERNAL": 500, "UNAVAILABLE": 503, "DATA_LOSS": 500,
}

// pickCode chooses between the status line the transport saw and the code in
// the error body. Google sends the same number in both; when a proxy or a
// buggy server makes them disagree, the one that is retried wins: a wrong
// fail-fast ends the phase at once, a wrong retry costs only part of
// Temporal's bounded retry budget. So a 503 whose body says 400 is retried
// (and a 400 whose body says 503); between two retried codes the status line
// wins, its Retry-After being about it; between two fail-fast codes the
// body's, as the SDK reports it.
func pickCode(status, bodyCode int) int {
	switch {
	case bodyCode == 0:
		return status
	case status == 0 || status == bodyCode:
		return bodyCode
	}
	if k, ok := kindOf(status, ""); ok && k.Retryable() {
		return status
	}
	return bodyCode
}

// answer is an HTTP error answer of Gemini, to be typed.
type answer struct {
	code       int
	rpcStatus  string // the google.rpc.Code name in the body, if any
	msg        string // the server's message, redacted and shortened
	details    []map[string]any
	retryAfter string
	backend    string
	cause      error
}

// typed is the *upstream.Error of a, or a plain (retried) error for a status
// kindOf has no kind for.
func (a answer) typed() error {
	code, msg := a.code, a.msg
	kind, ok := kindOf(code, a.rpcStatus)
	if !ok {
		return fmt.Errorf("Gemini error (HTTP %d): %s: %w", code, msg, a.cause)
	}
	e := &upstream.Error{Service: service, Kind: kind, Status: code, Cause: a.cause}
	if kind.Retryable() {
		e.RetryAfter = retryDelayFrom(a.retryAfter, a.details, time.Now())
	}
	switch {
	case code == http.StatusNotImplemented:
		e.Message = fmt.Sprintf("Gemini does not support the request (HTTP 501): %s; check the model name and the base URL", msg)
	case kind == upstream.BadRequest:
		e.Message = fmt.Sprintf("Gemini rejected the request as invalid (HTTP %d): %s", code, msg)
	case code == http.StatusUnauthorized:
		e.Message = fmt.Sprintf("Gemini rejected the credentials (HTTP 401): %s; %s", msg, credentialsHint(a.backend))
	case code == http.StatusForbidden:
		e.Message = fmt.Sprintf("Gemini denied access (HTTP 403): %s", msg)
	case code == http.StatusNotFound:
		e.Message = fmt.Sprintf("Gemini model or endpoint not found (HTTP 404): %s; check the model name", msg)
	case code == http.StatusTooManyRequests:
		e.Message = fmt.Sprintf("Gemini rate limit or quota exceeded (HTTP 429): %s", msg)
	case code == http.StatusRequestTimeout:
		e.Message = fmt.Sprintf("Gemini request timed out (HTTP 408): %s", msg)
	case code == http.StatusConflict:
		e.Message = fmt.Sprintf("Gemini aborted the request (HTTP 409): %s", msg)
	case code == statusClientClosed:
		e.Message = fmt.Sprintf("Gemini cancelled the request (HTTP 499): %s", msg)
	default:
		e.Message = fmt.Sprintf("Gemini is unavailable (HTTP %d): %s", code, msg)
	}
	return e
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
