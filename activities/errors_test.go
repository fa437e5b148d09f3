package activities

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini"
	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/modeltest"
	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

const geminiTestKey = "AIzaTEST-activities-key-0123456789"

// geminiActivities returns activities whose model is a real genai client
// (SDK retries off) talking to a local Gemini-REST server.
func geminiModel(t *testing.T, srv *geminitest.Server) *Model {
	t.Helper()
	c, err := gemini.NewClient(context.Background(), gemini.Config{APIKey: geminiTestKey, BaseURL: srv.URL})
	require.NoError(t, err)
	return &Model{LLM: c.Models, Name: "gemini-2.5-flash"}
}

// Each Gemini failure becomes the Temporal error the retry table names.
func TestGeminiFailuresBecomeTemporalErrors(t *testing.T) {
	cases := []struct {
		status       int
		retryAfter   string
		errType      string
		nonRetryable bool
		delay        time.Duration
		contains     string
	}{
		{400, "5", ErrGeminiInvalidRequest, true, 0, "Gemini rejected the request as invalid (HTTP 400)"},
		{422, "", ErrGeminiInvalidRequest, true, 0, "Gemini rejected the request as invalid (HTTP 422)"},
		{409, "4", ErrGeminiUnavailable, false, 4 * time.Second, "Gemini aborted the request (HTTP 409)"}, // ABORTED: Google's "retry"
		{401, "", ErrGeminiUnauthorized, true, 0, "Gemini rejected the credentials (HTTP 401)"},
		{403, "", ErrGeminiForbidden, true, 0, "Gemini denied access (HTTP 403)"},
		{404, "", ErrGeminiNotFound, true, 0, "check the model name"},
		{408, "", ErrGeminiTimeout, false, 0, "Gemini request timed out (HTTP 408)"},
		{429, "7", ErrGeminiRateLimited, false, 7 * time.Second, "Gemini rate limit or quota exceeded (HTTP 429)"},
		{503, "2", ErrGeminiUnavailable, false, 2 * time.Second, "Gemini is unavailable (HTTP 503)"},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv := geminitest.NewServer(geminitest.Always(geminitest.Error(tc.status, "key "+geminiTestKey+" said no", tc.retryAfter)))
			defer srv.Close()
			_, _, err := geminiModel(t, srv).generate(context.Background(), genai.Text("hi"), nil)
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			require.Equal(t, tc.errType, app.Type())
			require.Equal(t, tc.nonRetryable, app.NonRetryable())
			require.Equal(t, tc.delay, app.NextRetryDelay())
			require.Contains(t, app.Message(), tc.contains)
			require.Contains(t, app.Message(), "key [REDACTED] said no")
			for e := error(app); e != nil; e = errors.Unwrap(e) {
				require.NotContains(t, e.Error(), geminiTestKey)
			}
			require.Len(t, srv.Requests(), 1, "one HTTP attempt per activity attempt")
		})
	}

	// Nothing listening: retryable, unavailable.
	srv := geminitest.NewServer(geminitest.Always(geminitest.Text("unused")))
	a := geminiModel(t, srv)
	srv.Close()
	_, _, err := a.generate(context.Background(), genai.Text("hi"), nil)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, ErrGeminiUnavailable, app.Type())
	require.False(t, app.NonRetryable())

}

// Errors that are not typed Gemini failures pass through unchanged.
func TestGeminiErrorPassesOthersThrough(t *testing.T) {
	app := temporal.NewNonRetryableApplicationError("bad model output", "BadOutput", nil)
	require.Same(t, app, geminiError(app))
	plain := errors.New("decode plan: unexpected end of JSON input")
	require.Same(t, plain, geminiError(plain))
	require.NoError(t, geminiError(nil))
}

// failingTool fails every call with err.
type failingTool struct{ err error }

func (failingTool) Purpose() string { return "test tool" }

func (failingTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: "failing"}
}

func (f failingTool) Call(context.Context, map[string]any) (any, error) { return nil, f.err }

// callFailing runs CallTool on a tool failing with err, and returns what the
// activity returned and the transcript it stored into.
func callFailing(t *testing.T, err error) (ToolOutput, *modeltest.Transcript, error) {
	t.Helper()
	a, _, ts := newActivities(t)
	reg, regErr := tools.NewRegistry(failingTool{err})
	require.NoError(t, regErr)
	a.Tools = reg
	out, err := a.CallTool(context.Background(), ToolInput{Session: "s", Key: "k", Call: toolcall.Call{Name: "failing"}, MaxResultBytes: 1000})
	return out, ts, err
}

// A provider's refusal (key, request, unknown resource) is the tool's error
// result; its rate limit, unavailability and timeouts are retried after its
// Retry-After; other errors are retried with the policy's backoff.
func TestCallToolUpstreamFailures(t *testing.T) {
	vt := func(k upstream.Kind, status int, msg string) error {
		return &upstream.Error{Service: "VirusTotal", Kind: k, Status: status, RetryAfter: 3 * time.Second, Message: msg}
	}
	results := []struct {
		err  error
		want string
	}{
		{vt(upstream.CredentialsRejected, 401, "API key rejected by VirusTotal (HTTP 401); check its API key setting"),
			"API key rejected by VirusTotal (HTTP 401); check its API key setting"},
		{vt(upstream.CredentialsRejected, 403, "API key rejected by VirusTotal (HTTP 403); check its API key setting"),
			"API key rejected by VirusTotal (HTTP 403); check its API key setting"},
		{vt(upstream.BadRequest, 400, "VirusTotal refused the request (HTTP 400): bad domain"), "VirusTotal refused the request (HTTP 400): bad domain"},
		{vt(upstream.NotFound, 404, "VirusTotal has no such object (HTTP 404)"), "VirusTotal has no such object (HTTP 404)"},
		{tools.Reject("argument %q must be a string", "ip"), `argument "ip" must be a string`},
	}
	for _, tc := range results {
		out, ts, err := callFailing(t, tc.err)
		require.NoError(t, err, tc.want)
		require.False(t, out.OK)
		require.Equal(t, tc.want, out.Error)
		stored, err := json.Marshal(map[string]string{"error": tc.want})
		require.NoError(t, err)
		require.JSONEq(t, string(stored), ts.M["s/k"].Response)
	}

	retried := []struct {
		err     error
		errType string
		delay   time.Duration
		message string
	}{
		{vt(upstream.RateLimited, 429, "VirusTotal rate limit reached (HTTP 429)"), ErrIntelRateLimited, 3 * time.Second, "VirusTotal rate limit reached (HTTP 429)"},
		{vt(upstream.Unavailable, 503, "VirusTotal is unavailable (HTTP 503)"), ErrIntelUnavailable, 3 * time.Second, "tool failing: VirusTotal is unavailable (HTTP 503)"},
		{vt(upstream.Timeout, 0, "VirusTotal did not answer in time"), ErrIntelTimeout, 3 * time.Second, "tool failing: VirusTotal did not answer in time"},
	}
	for _, tc := range retried {
		_, ts, err := callFailing(t, tc.err)
		app, ok := err.(*temporal.ApplicationError)
		require.True(t, ok, "returned unwrapped, so Temporal reads its retry delay: %T", err)
		require.Equal(t, tc.errType, app.Type())
		require.False(t, app.NonRetryable())
		require.Equal(t, tc.delay, app.NextRetryDelay())
		require.Equal(t, tc.message, app.Message())
		require.NotContains(t, ts.M, "s/k", "nothing is stored for a call that will be retried")
	}

	// Anything else is retried with the policy's backoff, naming the tool.
	_, _, err := callFailing(t, errors.New("connection reset"))
	require.EqualError(t, err, "tool failing: connection reset")
	_, _, err = callFailing(t, &upstream.Error{Service: "VirusTotal", Message: "no kind"})
	require.EqualError(t, err, "tool failing: no kind", "an upstream error of no known kind is retried")
	var app *temporal.ApplicationError
	require.False(t, errors.As(err, &app))
}
