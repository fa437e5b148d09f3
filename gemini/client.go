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
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// that records the status and Retry-After header of error responses for Call.
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
	apiKey     string
	backend    string
}

func (s *callState) noteRequest(apiKey, backend string) {
	s.mu.Lock()
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

func (s *callState) snapshot() (status int, retryAfter, apiKey, backend string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, s.retryAfter, s.apiKey, s.backend
}

type callStateKey struct{}

func callStateFrom(ctx context.Context) *callState {
	s, _ := ctx.Value(callStateKey{}).(*callState)
	return s
}

// recordingTransport notes, for requests made inside Call, the API key sent
// (so that Call can redact it from messages), the backend (so that Call can
// name its credentials) and the status and Retry-After header of error
// responses. It never changes the request or response.
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
	if state != nil && err == nil && resp != nil && resp.StatusCode >= 400 {
		state.noteErrorResponse(resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	return resp, err
}
