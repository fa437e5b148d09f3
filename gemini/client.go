// Package gemini builds google.golang.org/genai clients for use inside
// Temporal activities and classifies their errors as typed upstream errors
// (rate limited with the server's Retry-After, unavailable, timed out,
// credentials rejected, not found, bad request), from which the activities
// decide what Temporal retries.
//
// The SDK's own HTTP retries are switched off: Temporal retries the activity,
// and two retry layers would multiply the attempts.
package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/redact"
)

// DefaultTimeout bounds one HTTP request to Gemini when Config.Timeout is zero.
const DefaultTimeout = 2 * time.Minute

// errNoCredentials is returned by NewClient when neither an API key nor a
// complete Vertex AI configuration is given.
var errNoCredentials = errors.New("no Gemini credentials: set GEMINI_API_KEY (or GOOGLE_API_KEY), or GOOGLE_GENAI_USE_VERTEXAI=true with GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION")

// Config selects the Gemini backend and how to reach it. The caller reads
// the environment; NewClient does not look at GEMINI_API_KEY and friends
// itself (the SDK still reads GOOGLE_GEMINI_BASE_URL / GOOGLE_VERTEX_BASE_URL
// when BaseURL is empty).
type Config struct {
	// APIKey is the Gemini API key (GEMINI_API_KEY or GOOGLE_API_KEY).
	APIKey string
	// Vertex selects the Vertex AI backend (GOOGLE_GENAI_USE_VERTEXAI).
	Vertex bool
	// Project is the Google Cloud project for Vertex AI (GOOGLE_CLOUD_PROJECT).
	Project string
	// Location is the Vertex AI region (GOOGLE_CLOUD_LOCATION).
	Location string
	// BaseURL overrides the endpoint, for example a local stand-in. When empty
	// the SDK's GOOGLE_GEMINI_BASE_URL / GOOGLE_VERTEX_BASE_URL handling applies.
	BaseURL string
	// Timeout bounds each HTTP request; zero or negative means DefaultTimeout.
	Timeout time.Duration
}

// NewClient builds a genai client with SDK retries off, redirects followed
// only within the origin of the request (sameOrigin), and an HTTP transport
// (recordingTransport) that records the status and Retry-After header of
// error responses for Call, bounds response bodies and makes a 2xx holding a
// Google error object that error.
//
// With Vertex set and both Project and Location given, it uses Vertex AI with
// Application Default Credentials. With Vertex set, an API key and no
// project/location, it uses Vertex AI express mode with the key. Otherwise it
// uses the Gemini API with APIKey.
func NewClient(ctx context.Context, cfg Config) (*genai.Client, error) {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	attempts := int32(1)
	rt := &recordingTransport{base: http.DefaultTransport}
	cc := &genai.ClientConfig{
		HTTPClient: &http.Client{Transport: rt, CheckRedirect: sameOrigin},
		HTTPOptions: genai.HTTPOptions{
			BaseURL: strings.TrimSpace(cfg.BaseURL),
			Timeout: &timeout,
			// Attempts=1: exactly one HTTP attempt per SDK call. (A nil
			// RetryOptions also means one attempt in v1.77.0, but say so
			// explicitly in case the default changes.)
			RetryOptions: &genai.HTTPRetryOptions{Attempts: &attempts},
		},
	}

	if err := cfg.Check(); err != nil {
		return nil, err
	}
	backend := backendGeminiAPI
	switch {
	case cfg.Vertex && cfg.Project != "" && cfg.Location != "":
		backend = backendVertexAI
		cc.Backend = genai.BackendVertexAI
		cc.Project = cfg.Project
		cc.Location = cfg.Location
		// Our own HTTPClient means the SDK will not add OAuth itself:
		// UseDefaultCredentials finds ADC and wraps our transport with the
		// authorization middleware.
		if err := cc.UseDefaultCredentials(); err != nil {
			return nil, noADC()
		}
		// The SDK's own client sends the quota project; keep that behaviour.
		if qp, err := cc.Credentials.QuotaProjectID(ctx); err == nil && qp != "" {
			cc.HTTPOptions.Headers = http.Header{"X-Goog-User-Project": []string{qp}}
		}
	case cfg.Vertex && cfg.APIKey != "":
		backend = backendVertexExpress
		cc.Backend = genai.BackendVertexAI
		cc.APIKey = cfg.APIKey
	case !cfg.Vertex && cfg.APIKey != "":
		cc.Backend = genai.BackendGeminiAPI
		cc.APIKey = cfg.APIKey
	default:
		return nil, errNoCredentials
	}
	rt.backend = backend

	client, err := genai.NewClient(ctx, cc)
	if err != nil {
		// The SDK formats its ClientConfig (API key included) into some of
		// its errors: never pass that text on unredacted.
		return nil, fmt.Errorf("create Gemini client (%s): %w", backend, redact.New(cfg.APIKey).Error(err))
	}
	slog.Debug("gemini client ready", "backend", backend, "base_url", client.ClientConfig().HTTPOptions.BaseURL, "timeout", timeout)
	return client, nil
}

// Check refuses, without looking anything up, a configuration NewClient
// cannot use, naming what is missing: Vertex AI without an API key
// (express mode) needs both a project and a location, and the generic "no
// credentials" hid which one was missing.
func (cfg Config) Check() error {
	switch {
	case !cfg.Vertex && cfg.APIKey == "":
		return errNoCredentials
	case !cfg.Vertex || cfg.APIKey != "":
		return nil
	}
	var missing []string
	if cfg.Project == "" {
		missing = append(missing, "GOOGLE_CLOUD_PROJECT (--project)")
	}
	if cfg.Location == "" {
		missing = append(missing, "GOOGLE_CLOUD_LOCATION (--location, a region such as us-central1)")
	}
	if len(missing) == 0 {
		return nil
	}
	them := map[bool]string{true: "them", false: "it"}[len(missing) > 1]
	return fmt.Errorf("Vertex AI (GOOGLE_GENAI_USE_VERTEXAI) needs %s: set %s, or set an API key (GOOGLE_API_KEY) for Vertex AI express mode", strings.Join(missing, " and "), them)
}

// noADC is the one sentence for Application Default Credentials that cannot
// be found or loaded, telling a file that is there but unusable (named by
// its path) from none at all, in the auth library's order. Its own error (a
// wrapped paragraph and a link) is left out: it may quote the file.
func noADC() error {
	if p := strings.TrimSpace(os.Getenv("GOOGLE_APPLICATION_CREDENTIALS")); p != "" {
		return fmt.Errorf("Vertex AI: GOOGLE_APPLICATION_CREDENTIALS=%q is not a usable credentials file: point it at a service account key, "+
			"or unset it and run `gcloud auth application-default login`", p)
	}
	if p := gcloudADCFile(); p != "" {
		if _, err := os.ReadFile(p); err == nil { // what the library reads next
			return fmt.Errorf("Vertex AI: the Application Default Credentials in %s are not usable: "+
				"run `gcloud auth application-default login` again, or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file", p)
		}
	}
	return errors.New("Vertex AI: no Application Default Credentials found: run `gcloud auth application-default login` " +
		"(or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file), or unset GOOGLE_GENAI_USE_VERTEXAI and set GEMINI_API_KEY or GOOGLE_API_KEY for the Gemini API")
}

// gcloudADCFile is where the auth library looks for a gcloud login
// (cloud.google.com/go/auth's credsfile.GetWellKnownFileName).
func gcloudADCFile() string {
	if runtime.GOOS == "windows" {
		return filepath.Join(os.Getenv("APPDATA"), "gcloud", "application_default_credentials.json")
	}
	home := os.Getenv("HOME")
	if home == "" {
		if u, err := user.Current(); err == nil {
			home = u.HomeDir
		}
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".config", "gcloud", "application_default_credentials.json")
}

// maxRedirects is Go's default limit, kept for same-origin redirects.
const maxRedirects = 10

// RedirectError is a redirect that NewClient's client refused to follow
// because it leads away from the origin of the request.
type RedirectError struct{ From, To string }

func (e *RedirectError) Error() string {
	return fmt.Sprintf("Gemini endpoint %s redirected to another origin (%s); the redirect was not followed, so that the API key is not sent there", e.From, e.To)
}

// sameOrigin follows a redirect only to the scheme, host and port of the
// first request. The API key travels in a header (x-goog-api-key) that Go
// copies to every redirect, even to another host (it strips only
// Authorization and cookies), so a base URL that redirects elsewhere, or a
// compromised proxy, would otherwise hand the key to whoever it names.
func sameOrigin(req *http.Request, via []*http.Request) error {
	from, to := origin(via[0].URL), origin(req.URL)
	switch {
	case from != to:
		return &RedirectError{From: from, To: to}
	case len(via) >= maxRedirects:
		return fmt.Errorf("Gemini endpoint %s redirected %d times", from, len(via))
	}
	return nil
}

// origin is scheme://host[:port], lower-cased.
func origin(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

// Backends, as logged by NewClient and told to Call by the transport (so that
// a 401 names the credentials of the backend in use).
const (
	backendGeminiAPI     = "gemini-api"
	backendVertexAI      = "vertex-ai"         // Application Default Credentials
	backendVertexExpress = "vertex-ai-express" // Vertex AI with an API key
)

// callState collects what the transport saw during one Call.
type callState struct {
	mu         sync.Mutex
	status     int
	retryAfter string
	tooLarge   bool   // a response body went past maxResponseBytes
	okBody     []byte // the whole body of a 2xx answer handed to the SDK
	apiKey     string
	backend    string
}

func (s *callState) noteRequest(apiKey, backend string) {
	s.mu.Lock()
	// What the previous response said is no longer the answer.
	s.status, s.retryAfter, s.tooLarge, s.okBody = 0, "", false, nil
	if apiKey != "" {
		s.apiKey = apiKey
	}
	if backend != "" {
		s.backend = backend
	}
	s.mu.Unlock()
}

func (s *callState) noteErrorResponse(status int, retryAfter string) {
	s.mu.Lock()
	s.status = status
	s.retryAfter = retryAfter
	s.mu.Unlock()
}

func (s *callState) noteTooLarge() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.tooLarge = true
	s.mu.Unlock()
}

// noteAnswer records the 2xx body handed to the SDK: an error after it is
// the SDK's failure to decode it (Call).
func (s *callState) noteAnswer(body []byte) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.okBody = body
	s.mu.Unlock()
}

// answered says whether a whole 2xx body reached the SDK, and gives it.
func (s *callState) answered() (bool, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.okBody != nil, s.okBody
}

func (s *callState) snapshot() (status int, retryAfter string, tooLarge bool, apiKey, backend string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, s.retryAfter, s.tooLarge, s.apiKey, s.backend
}

type callStateKey struct{}

func callStateFrom(ctx context.Context) *callState {
	s, _ := ctx.Value(callStateKey{}).(*callState)
	return s
}

// maxResponseBytes bounds a response body: far above any real answer (a
// generate reply is bounded by its output tokens, an embedding reply by its
// vectors), so that a hostile or broken endpoint cannot make the worker read
// without end (the SDK reads bodies with io.ReadAll).
const maxResponseBytes = 8 << 20

// errResponseTooLarge is what reading a body past maxResponseBytes returns.
var errResponseTooLarge = fmt.Errorf("Gemini's response is larger than the %d MiB limit; it was refused rather than read in part", maxResponseBytes>>20)

// recordingTransport notes, for requests made inside Call, the API key sent
// (so that Call can redact it from messages), the backend (so that Call can
// name its credentials) and the status and Retry-After header of error
// responses. For every request it bounds the response body
// (maxResponseBytes) and turns a 2xx whose body is a Google error object
// into that error (errorInOK).
type recordingTransport struct {
	base    http.RoundTripper
	backend string // set by NewClient before the client is used
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	state := callStateFrom(req.Context())
	if state != nil {
		state.noteRequest(req.Header.Get("x-goog-api-key"), t.backend)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	if state != nil && resp.StatusCode >= 400 {
		state.noteErrorResponse(resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp.Body = &cappedBody{body: resp.Body, left: maxResponseBytes, state: state}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, nil // an error body is read by the SDK; one too large leaves the status (Call)
	}
	if isEventStream(resp.Header) {
		return resp, nil // the SDK reads error events of a stream itself
	}
	if resp.ContentLength > maxResponseBytes {
		resp.Body.Close()
		state.noteTooLarge()
		return nil, errResponseTooLarge
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if apiErr, ok := errorInOK(body); ok {
		if state != nil {
			state.noteErrorResponse(apiErr.Code, resp.Header.Get("Retry-After"))
		}
		return nil, apiErr
	}
	state.noteAnswer(body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// errorInOK finds a top-level "error" object in a 2xx body, which the SDK
// would decode as an empty answer (no generate or embed reply has such a
// field). Its code is the HTTP status it names: the number when it is an
// error status, else that of its google.rpc.Code name, else 500 (the server
// failed without saying how: worth a retry).
func errorInOK(body []byte) (genai.APIError, bool) {
	var top struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &top) != nil || len(top.Error) == 0 || string(top.Error) == "null" {
		return genai.APIError{}, false
	}
	var e genai.APIError
	if json.Unmarshal(top.Error, &e) != nil {
		// "error": "..." or a malformed object: still an error, its text the message.
		e = genai.APIError{Message: string(top.Error)}
	}
	if e.Code < 400 || e.Code > 599 {
		e.Code = rpcHTTPStatus[strings.TrimSpace(e.Status)]
	}
	if e.Code == 0 {
		e.Code = http.StatusInternalServerError
	}
	return e, true
}

// cappedBody reads at most left bytes of body and fails with
// errResponseTooLarge past them, so that a body over the limit is never taken
// for a complete one. It tells state (nil outside Call), because the SDK may
// report a stream cut there as a mere decoding error.
type cappedBody struct {
	body  io.ReadCloser
	left  int64
	state *callState
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the limit: one more byte means the body is too large.
		var one [1]byte
		n, err := b.body.Read(one[:])
		if n > 0 {
			b.state.noteTooLarge()
			return 0, errResponseTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.body.Close() }
