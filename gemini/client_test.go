package gemini

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/upstream"
)

const (
	testKey   = "AIzaTEST-secret-key-0123456789"
	testModel = "gemini-2.5-flash"
)

// clearGeminiEnv keeps the developer's environment out of the tests.
func clearGeminiEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{
		"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE",
		"GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION",
		"GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_APPLICATION_CREDENTIALS",
	} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

func newTestClient(t *testing.T, srv *geminitest.Server) *genai.Client {
	t.Helper()
	clearGeminiEnv(t)
	c, err := NewClient(context.Background(), Config{APIKey: testKey, BaseURL: srv.URL})
	require.NoError(t, err)
	return c
}

func generate(c *genai.Client, config *genai.GenerateContentConfig) func(context.Context) (*genai.GenerateContentResponse, error) {
	return func(ctx context.Context) (*genai.GenerateContentResponse, error) {
		return c.Models.GenerateContent(ctx, testModel, genai.Text("hello"), config)
	}
}

// upstreamError returns the *upstream.Error that Call returned.
func upstreamError(t *testing.T, err error) *upstream.Error {
	t.Helper()
	require.Error(t, err)
	e, ok := upstream.As(err)
	require.True(t, ok, "want an *upstream.Error, got %T: %v", err, err)
	require.Equal(t, "Gemini", e.Service)
	return e
}

// assertNoSecret checks every error in the chain.
func assertNoSecret(t *testing.T, err error, secret string) {
	t.Helper()
	for e := err; e != nil; e = errors.Unwrap(e) {
		assert.NotContains(t, e.Error(), secret)
	}
}

func TestCall503WithRetryAfterIsRetryableOnceWithDelay(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Always(geminitest.Error(http.StatusServiceUnavailable, "The model is overloaded.", "2")))
	defer srv.Close()
	c := newTestClient(t, srv)

	resp, err := Call(context.Background(), generate(c, nil))
	assert.Nil(t, resp)
	appErr := upstreamError(t, err)
	assert.Equal(t, upstream.Unavailable, appErr.Kind)
	assert.True(t, appErr.Kind.Retryable())
	assert.Equal(t, 2*time.Second, appErr.RetryAfter)
	assert.Contains(t, appErr.Error(), "503")
	assert.Contains(t, appErr.Error(), "The model is overloaded.")
	// The genai error stays reachable as the cause.
	var apiErr genai.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 503, apiErr.Code)
	// SDK retries are off: exactly one HTTP request.
	assert.Len(t, srv.Requests(), 1)
}

func TestCall429WithoutRetryAfter(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Always(geminitest.Error(http.StatusTooManyRequests, "Resource has been exhausted", "")))
	defer srv.Close()
	c := newTestClient(t, srv)

	_, err := Call(context.Background(), generate(c, nil))
	appErr := upstreamError(t, err)
	assert.Equal(t, upstream.RateLimited, appErr.Kind)
	assert.True(t, appErr.Kind.Retryable())
	assert.Zero(t, appErr.RetryAfter)
	assert.Len(t, srv.Requests(), 1)
}

func TestCall429RetryInfoDetailsGiveDelay(t *testing.T) {
	// Gemini's quota errors carry google.rpc.RetryInfo rather than a header.
	body := map[string]any{"error": map[string]any{
		"code": 429, "message": "You exceeded your current quota", "status": "RESOURCE_EXHAUSTED",
		"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}},
	}}
	srv := geminitest.NewServer(geminitest.Always(geminitest.Reply{Status: 429, Body: body}))
	defer srv.Close()
	c := newTestClient(t, srv)

	_, err := Call(context.Background(), generate(c, nil))
	appErr := upstreamError(t, err)
	assert.Equal(t, upstream.RateLimited, appErr.Kind)
	assert.Equal(t, 37*time.Second, appErr.RetryAfter)
}

func TestCallRetryAfterHTTPDateAndCap(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	srv := geminitest.NewServer(geminitest.Script(
		geminitest.Always(geminitest.Error(http.StatusServiceUnavailable, "busy", date)),
		geminitest.Always(geminitest.Error(http.StatusTooManyRequests, "slow down", "86400")),
	))
	defer srv.Close()
	c := newTestClient(t, srv)

	_, err := Call(context.Background(), generate(c, nil))
	d := upstreamError(t, err).RetryAfter
	assert.Greater(t, d, 80*time.Second)
	assert.LessOrEqual(t, d, 90*time.Second)

	_, err = Call(context.Background(), generate(c, nil))
	assert.Equal(t, 10*time.Minute, upstreamError(t, err).RetryAfter)
}

func TestCallNonRetryableStatuses(t *testing.T) {
	cases := []struct {
		status   int
		kind     upstream.Kind
		contains []string
	}{
		{400, upstream.BadRequest, []string{"invalid", "HTTP 400"}},
		{422, upstream.BadRequest, []string{"invalid", "HTTP 422"}},
		{401, upstream.CredentialsRejected, []string{"credentials", "HTTP 401", "GEMINI_API_KEY"}},
		{403, upstream.CredentialsRejected, []string{"denied access", "HTTP 403"}},
		{404, upstream.NotFound, []string{"not found", "HTTP 404", "model name"}},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			// The server message quotes the key, to prove it is redacted.
			srv := geminitest.NewServer(geminitest.Always(geminitest.Error(tc.status, "API key "+testKey+" is not valid for this.", "5")))
			defer srv.Close()
			c := newTestClient(t, srv)

			_, err := Call(context.Background(), generate(c, nil))
			appErr := upstreamError(t, err)
			assert.Equal(t, tc.kind, appErr.Kind)
			assert.Equal(t, tc.status, appErr.Status)
			assert.False(t, appErr.Kind.Retryable())
			for _, s := range tc.contains {
				assert.Contains(t, appErr.Error(), s)
			}
			assert.Contains(t, appErr.Error(), "API key [REDACTED] is not valid")
			assertNoSecret(t, err, testKey)
			assert.Len(t, srv.Requests(), 1)
			assert.Equal(t, testKey, srv.Requests()[0].APIKey)
		})
	}
}

func TestCallRetryableStatuses(t *testing.T) {
	cases := []struct {
		status int
		kind   upstream.Kind
	}{
		{408, upstream.Timeout},
		{500, upstream.Unavailable},
		{502, upstream.Unavailable},
		{504, upstream.Unavailable},
		{599, upstream.Unavailable},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv := geminitest.NewServer(geminitest.Always(geminitest.Error(tc.status, "try later", "")))
			defer srv.Close()
			c := newTestClient(t, srv)

			_, err := Call(context.Background(), generate(c, nil))
			appErr := upstreamError(t, err)
			assert.Equal(t, tc.kind, appErr.Kind)
			assert.Equal(t, tc.status, appErr.Status)
			assert.True(t, appErr.Kind.Retryable())
			assert.Len(t, srv.Requests(), 1)
		})
	}
}

func TestCallNonJSONErrorBodyUsesHTTPStatus(t *testing.T) {
	// A proxy answering with HTML: the SDK keeps the status code.
	srv := geminitest.NewServer(geminitest.Always(geminitest.Reply{
		Status: http.StatusBadGateway,
		Header: http.Header{"Content-Type": []string{"text/html"}, "Retry-After": []string{"3"}},
		Body:   "<html><body>" + strings.Repeat("bad gateway ", 200) + "</body></html>",
	}))
	defer srv.Close()
	c := newTestClient(t, srv)

	_, err := Call(context.Background(), generate(c, nil))
	appErr := upstreamError(t, err)
	assert.Equal(t, upstream.Unavailable, appErr.Kind)
	assert.Equal(t, 3*time.Second, appErr.RetryAfter)
	assert.Less(t, len(appErr.Error()), 700, "long bodies are shortened")
}

func TestCallErrorWithoutCodeFallsBackToTransportStatus(t *testing.T) {
	// {"error":{...}} without "code": the SDK's APIError has Code 0, the
	// transport saw 401.
	srv := geminitest.NewServer(geminitest.Always(geminitest.Reply{
		Status: http.StatusUnauthorized,
		Body:   map[string]any{"error": map[string]any{"message": "bad key"}},
	}))
	defer srv.Close()
	c := newTestClient(t, srv)

	_, err := Call(context.Background(), generate(c, nil))
	appErr := upstreamError(t, err)
	assert.Equal(t, upstream.CredentialsRejected, appErr.Kind)
	assert.False(t, appErr.Kind.Retryable())
}

func TestCallRequestTimeout(t *testing.T) {
	clearGeminiEnv(t)
	var calls atomic.Int32
	srv := geminitest.NewServer(func(*geminitest.Request) geminitest.Reply {
		calls.Add(1)
		time.Sleep(400 * time.Millisecond)
		return geminitest.Text("late")
	})
	defer srv.Close()
	c, err := NewClient(context.Background(), Config{APIKey: testKey, BaseURL: srv.URL, Timeout: 50 * time.Millisecond})
	require.NoError(t, err)

	_, err = Call(context.Background(), generate(c, nil))
	appErr := upstreamError(t, err)
	assert.Equal(t, upstream.Timeout, appErr.Kind)
	assert.True(t, appErr.Kind.Retryable())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, int32(1), calls.Load())
}

func TestCallConnectionRefused(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Always(geminitest.Text("unused")))
	c := newTestClient(t, srv)
	srv.Close() // nothing listens any more

	_, err := Call(context.Background(), generate(c, nil))
	appErr := upstreamError(t, err)
	assert.Equal(t, upstream.Unavailable, appErr.Kind)
	assert.True(t, appErr.Kind.Retryable())
	assertNoSecret(t, err, testKey)
}

func TestCallCancelledStaysCancellation(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Always(geminitest.Text("unused")))
	defer srv.Close()
	c := newTestClient(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err := Call(ctx, generate(c, nil))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	_, typed := upstream.As(err)
	assert.False(t, typed, "cancellation is not turned into an upstream error")
}

func TestCallPassesThroughUpstreamErrorsAndWrapsOthers(t *testing.T) {
	mine := &upstream.Error{Service: "Gemini", Kind: upstream.BadRequest, Message: "bad model output"}
	_, err := Call(context.Background(), func(context.Context) (int, error) { return 0, mine })
	assert.Same(t, mine, err)

	plain := errors.New("decode plan: unexpected end of JSON input")
	_, err = Call(context.Background(), func(context.Context) (int, error) { return 0, plain })
	require.Error(t, err)
	assert.ErrorIs(t, err, plain)
	assert.Contains(t, err.Error(), "plan")
	_, typed := upstream.As(err)
	assert.False(t, typed, "an error that is not Gemini's answer is not classified")

	v, err := Call(context.Background(), func(context.Context) (int, error) { return 42, nil })
	require.NoError(t, err)
	assert.Equal(t, 42, v)
}

func TestCallStateDoesNotLeakBetweenCalls(t *testing.T) {
	// A 503 with Retry-After, then a 503 without: the second must not reuse
	// the first's delay.
	srv := geminitest.NewServer(geminitest.Replies(
		geminitest.Error(503, "busy", "7"),
		geminitest.Error(503, "busy", ""),
	))
	defer srv.Close()
	c := newTestClient(t, srv)

	_, err := Call(context.Background(), generate(c, nil))
	assert.Equal(t, 7*time.Second, upstreamError(t, err).RetryAfter)
	_, err = Call(context.Background(), generate(c, nil))
	assert.Zero(t, upstreamError(t, err).RetryAfter)
}

func TestNewClientHonoursGeminiBaseURLEnv(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Always(geminitest.Text("from env")))
	defer srv.Close()
	clearGeminiEnv(t)
	t.Setenv("GOOGLE_GEMINI_BASE_URL", srv.URL)

	c, err := NewClient(context.Background(), Config{APIKey: testKey})
	require.NoError(t, err)
	resp, err := Call(context.Background(), generate(c, nil))
	require.NoError(t, err)
	assert.Equal(t, "from env", resp.Text())
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/v1beta/models/"+testModel+":generateContent", reqs[0].Path)
	assert.Equal(t, testKey, reqs[0].APIKey)
}

func TestNewClientConfigBaseURLWinsOverEnv(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Always(geminitest.Text("from config")))
	defer srv.Close()
	clearGeminiEnv(t)
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:1") // nothing there

	c, err := NewClient(context.Background(), Config{APIKey: testKey, BaseURL: srv.URL})
	require.NoError(t, err)
	resp, err := Call(context.Background(), generate(c, nil))
	require.NoError(t, err)
	assert.Equal(t, "from config", resp.Text())
}

func TestNewClientMissingCredentials(t *testing.T) {
	clearGeminiEnv(t)
	// Even with a key in the environment: the caller reads env, not NewClient.
	t.Setenv("GEMINI_API_KEY", testKey)
	for _, cfg := range []Config{
		{},
		{Project: "p", Location: "us-central1"},
	} {
		_, err := NewClient(context.Background(), cfg)
		require.Error(t, err, "%+v", cfg)
		assert.Equal(t, "no Gemini credentials: set GEMINI_API_KEY (or GOOGLE_API_KEY), or GOOGLE_GENAI_USE_VERTEXAI=true with GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION", err.Error())
	}
}

// TestVertexNamesWhatIsMissing: Vertex AI without an API key names the
// missing project or location up front (Check, and NewClient before any
// credentials are looked up); before, it said only "no Gemini credentials".
func TestVertexNamesWhatIsMissing(t *testing.T) {
	clearGeminiEnv(t)
	fakeServiceAccount(t) // credentials there are: what is missing is the setting
	const tail = ", or set an API key (GOOGLE_API_KEY) for Vertex AI express mode"
	for cfg, want := range map[Config]string{
		{Vertex: true, Project: "p"}:            "Vertex AI (GOOGLE_GENAI_USE_VERTEXAI) needs GOOGLE_CLOUD_LOCATION (--location, a region such as us-central1): set it" + tail,
		{Vertex: true, Location: "us-central1"}: "Vertex AI (GOOGLE_GENAI_USE_VERTEXAI) needs GOOGLE_CLOUD_PROJECT (--project): set it" + tail,
		{Vertex: true}:                          "Vertex AI (GOOGLE_GENAI_USE_VERTEXAI) needs GOOGLE_CLOUD_PROJECT (--project) and GOOGLE_CLOUD_LOCATION (--location, a region such as us-central1): set them" + tail,
	} {
		require.EqualError(t, cfg.Check(), want)
		_, err := NewClient(context.Background(), cfg)
		require.EqualError(t, err, want)
	}
	require.NoError(t, Config{Vertex: true, Project: "p", Location: "us-central1"}.Check())
	require.NoError(t, Config{Vertex: true, APIKey: testKey}.Check(), "express mode needs neither")
}

// TestVertexWithoutADCSaysWhatToSet: Vertex AI with no Application Default
// Credentials, or a credentials file that is not one, fails in one short
// sentence saying what to run or set, with nothing of the file in it;
// before, it passed on the auth library's paragraph.
func TestVertexWithoutADCSaysWhatToSet(t *testing.T) {
	clearGeminiEnv(t)
	home := t.TempDir()
	t.Setenv("HOME", home) // no gcloud login of the machine's user
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	t.Setenv("GCE_METADATA_HOST", "")
	os.Unsetenv("GCE_METADATA_HOST") // set, the library takes the machine for Google Cloud
	cfg := Config{Vertex: true, Project: "p", Location: "us-central1"}
	_, err := NewClient(context.Background(), cfg)
	require.EqualError(t, err, "Vertex AI: no Application Default Credentials found: run `gcloud auth application-default login` "+
		"(or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file), or unset GOOGLE_GENAI_USE_VERTEXAI and set GEMINI_API_KEY or GOOGLE_API_KEY for the Gemini API")

	// A gcloud login whose file is broken is found, not missing: said so,
	// with its path and nothing of its content.
	const secret = "-----BEGIN PRIVATE KEY-----sekr1t"
	adc := filepath.Join(home, ".config", "gcloud", "application_default_credentials.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(adc), 0o700))
	require.NoError(t, os.WriteFile(adc, []byte(`{"type":"authorized_user","refresh_token":"`+secret+`"`), 0o600))
	_, err = NewClient(context.Background(), cfg)
	require.EqualError(t, err, fmt.Sprintf("Vertex AI: the Application Default Credentials in %s are not usable: "+
		"run `gcloud auth application-default login` again, or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file", adc))
	require.NotContains(t, err.Error(), "sekr1t")

	bad := filepath.Join(t.TempDir(), "sa.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"type":"service_account","private_key":"`+secret+`"`), 0o600))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", bad)
	_, err = NewClient(context.Background(), cfg)
	require.EqualError(t, err, fmt.Sprintf("Vertex AI: GOOGLE_APPLICATION_CREDENTIALS=%q is not a usable credentials file: "+
		"point it at a service account key, or unset it and run `gcloud auth application-default login`", bad))
	require.NotContains(t, err.Error(), "sekr1t")
}

func TestFunctionCallRoundTripAndUsage(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Replies(
		geminitest.Calls(
			&genai.FunctionCall{ID: "call-1", Name: "get_alert", Args: map[string]any{"id": "A-1"}},
			&genai.FunctionCall{Name: "search_alerts", Args: map[string]any{"field": "type", "limit": 10}},
		),
		geminitest.Text("done"),
	))
	defer srv.Close()
	c := newTestClient(t, srv)

	config := &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText("You are an analyst.\nAlert ID: A-1", genai.RoleUser),
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
			{Name: "get_alert", Description: "Fetch an alert", Parameters: &genai.Schema{
				Type: genai.TypeObject, Properties: map[string]*genai.Schema{"id": {Type: genai.TypeString}}, Required: []string{"id"},
			}},
			{Name: "search_alerts", Description: "Search alerts"},
		}}},
	}
	contents := genai.Text("Execute this step: fetch the alert")
	resp, err := Call(context.Background(), func(ctx context.Context) (*genai.GenerateContentResponse, error) {
		return c.Models.GenerateContent(ctx, testModel, contents, config)
	})
	require.NoError(t, err)

	calls := resp.FunctionCalls()
	require.Len(t, calls, 2)
	assert.Equal(t, "call-1", calls[0].ID)
	assert.Equal(t, "get_alert", calls[0].Name)
	assert.Equal(t, map[string]any{"id": "A-1"}, calls[0].Args)
	assert.Equal(t, "", calls[1].ID)
	assert.Equal(t, "search_alerts", calls[1].Name)
	assert.Equal(t, float64(10), calls[1].Args["limit"])

	require.NotNil(t, resp.UsageMetadata)
	assert.Positive(t, resp.UsageMetadata.PromptTokenCount)
	assert.Positive(t, resp.UsageMetadata.CandidatesTokenCount)
	assert.Equal(t, resp.UsageMetadata.PromptTokenCount+resp.UsageMetadata.CandidatesTokenCount, resp.UsageMetadata.TotalTokenCount)
	require.Len(t, resp.Candidates, 1)
	assert.Equal(t, genai.FinishReasonStop, resp.Candidates[0].FinishReason)

	// Second turn: send the function responses back.
	contents = append(contents, resp.Candidates[0].Content,
		&genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{
			genai.NewPartFromFunctionResponse("get_alert", map[string]any{"output": "alert A-1"}),
		}})
	contents[len(contents)-1].Parts[0].FunctionResponse.ID = "call-1"
	resp, err = Call(context.Background(), func(ctx context.Context) (*genai.GenerateContentResponse, error) {
		return c.Models.GenerateContent(ctx, testModel, contents, config)
	})
	require.NoError(t, err)
	assert.Equal(t, "done", resp.Text())

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, []string{"get_alert", "search_alerts"}, reqs[0].FunctionNames())
	assert.Contains(t, reqs[0].SystemText(), "Alert ID: A-1")
	assert.Empty(t, reqs[0].FunctionResponses())
	frs := reqs[1].FunctionResponses()
	require.Len(t, frs, 1)
	assert.Equal(t, "call-1", frs[0].ID)
	assert.Equal(t, "get_alert", frs[0].Name)
	assert.Equal(t, "alert A-1", frs[0].Response["output"])
}

// fakeServiceAccount points GOOGLE_APPLICATION_CREDENTIALS at a service
// account whose token endpoint is a local server, and returns the number of
// tokens that server issued so far.
func fakeServiceAccount(t *testing.T) *atomic.Int32 {
	t.Helper()
	var tokenCalls atomic.Int32
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"ya29.test-token","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(tokenSrv.Close)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	sa, err := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     "proj",
		"private_key_id": "kid",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   "sa@proj.iam.gserviceaccount.com",
		"client_id":      "123",
		"token_uri":      tokenSrv.URL,
	})
	require.NoError(t, err)
	credFile := filepath.Join(t.TempDir(), "sa.json")
	require.NoError(t, os.WriteFile(credFile, sa, 0o600))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", credFile)
	return &tokenCalls
}

func TestVertexUsesApplicationDefaultCredentials(t *testing.T) {
	clearGeminiEnv(t)
	tokenCalls := fakeServiceAccount(t)

	srv := geminitest.NewServer(geminitest.Always(geminitest.Text("vertex ok")))
	defer srv.Close()
	c, err := NewClient(context.Background(), Config{Vertex: true, Project: "proj", Location: "us-central1", BaseURL: srv.URL, APIKey: testKey})
	require.NoError(t, err)
	resp, err := Call(context.Background(), generate(c, nil))
	require.NoError(t, err)
	assert.Equal(t, "vertex ok", resp.Text())

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/v1beta1/projects/proj/locations/us-central1/publishers/google/models/"+testModel+":generateContent", reqs[0].Path)
	assert.Equal(t, "Bearer ya29.test-token", reqs[0].Header.Get("Authorization"))
	assert.Empty(t, reqs[0].APIKey, "the API key is not sent when ADC is used")
	assert.Equal(t, int32(1), tokenCalls.Load())
}

// A 401 names the credentials of the backend in use, never their value.
func TestCall401NamesTheBackendsCredentials(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Config
		adc      bool
		contains []string
		excludes []string
	}{
		{"gemini api", Config{APIKey: testKey},
			false, []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, []string{"Vertex", "Application Default Credentials"}},
		{"vertex ai with ADC", Config{Vertex: true, Project: "proj", Location: "us-central1", APIKey: testKey},
			true, []string{"Application Default Credentials", "service account", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"}, []string{"GEMINI_API_KEY"}},
		{"vertex ai express mode", Config{Vertex: true, APIKey: testKey},
			false, []string{"Vertex AI express-mode API key", "GEMINI_API_KEY"}, []string{"Application Default Credentials"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearGeminiEnv(t)
			if tc.adc {
				fakeServiceAccount(t)
			}
			srv := geminitest.NewServer(geminitest.Always(geminitest.Error(http.StatusUnauthorized, "Request had invalid authentication credentials", "")))
			defer srv.Close()
			cfg := tc.cfg
			cfg.BaseURL = srv.URL
			c, err := NewClient(context.Background(), cfg)
			require.NoError(t, err)

			_, err = Call(context.Background(), generate(c, nil))
			appErr := upstreamError(t, err)
			assert.Equal(t, upstream.CredentialsRejected, appErr.Kind)
			assert.False(t, appErr.Kind.Retryable())
			msg := appErr.Error()
			assert.True(t, strings.HasPrefix(msg, "Gemini rejected the credentials (HTTP 401): Request had invalid authentication credentials; check "), msg)
			for _, s := range tc.contains {
				assert.Contains(t, msg, s)
			}
			for _, s := range tc.excludes {
				assert.NotContains(t, msg, s)
			}
			assert.NotContains(t, msg, ". ", "one sentence")
			assert.NotContains(t, msg, "\n", "one sentence")
			assertNoSecret(t, err, testKey)
			t.Logf("REPORT 401 message (%s): %s", tc.name, msg)
		})
	}
	// A client not built by NewClient: both kinds of credentials are named.
	assert.Contains(t, credentialsHint(""), "GEMINI_API_KEY")
	assert.Contains(t, credentialsHint(""), "Application Default Credentials")
}

func TestRetryDelayParsing(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		header  string
		details []map[string]any
		want    time.Duration
	}{
		{"", nil, 0},
		{"0", nil, 0},
		{"-3", nil, 0},
		{"garbage", nil, 0},
		{" 12 ", nil, 12 * time.Second},
		{"601", nil, 10 * time.Minute},
		{"99999999999999999999", nil, 0}, // overflows int64: ignored
		{now.Add(30 * time.Second).Format(http.TimeFormat), nil, 30 * time.Second},
		{now.Add(-30 * time.Second).Format(http.TimeFormat), nil, 0},
		{now.Add(2 * time.Hour).Format(http.TimeFormat), nil, 10 * time.Minute},
		{"", []map[string]any{{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}}, 1500 * time.Millisecond},
		{"4", []map[string]any{{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "40s"}}, 4 * time.Second},
		{"", []map[string]any{{"@type": "type.googleapis.com/google.rpc.QuotaFailure"}}, 0},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, retryDelayFrom(tc.header, tc.details, now), "header %q details %v", tc.header, tc.details)
	}
}

// redirector answers every request with a 307 to target(path).
func redirector(target func(path string) string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target(r.URL.Path), http.StatusTemporaryRedirect)
	}))
}

func TestRedirectToAnotherOriginIsRefused(t *testing.T) {
	// The other origin records what reaches it: nothing may.
	var reached atomic.Int32
	var keySeen atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		keySeen.Store(r.Header.Get("x-goog-api-key"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"stolen"}]}}]}`))
	}))
	defer other.Close()
	otherPort := other.Listener.Addr().(*net.TCPAddr).Port

	cases := map[string]func(base string) func(string) string{
		"another port": func(string) func(string) string { return func(p string) string { return other.URL + p } },
		"another host": func(string) func(string) string {
			return func(p string) string { return fmt.Sprintf("http://localhost:%d%s", otherPort, p) }
		},
		"another scheme": func(base string) func(string) string {
			return func(p string) string { return "https://" + strings.TrimPrefix(base, "http://") + p }
		},
	}
	for name, target := range cases {
		t.Run(name, func(t *testing.T) {
			var base string
			srv := redirector(func(p string) string { return target(base)(p) })
			defer srv.Close()
			base = srv.URL
			clearGeminiEnv(t)
			c, err := NewClient(context.Background(), Config{APIKey: testKey, BaseURL: srv.URL})
			require.NoError(t, err)

			_, err = Call(context.Background(), generate(c, nil))
			e := upstreamError(t, err)
			assert.Equal(t, upstream.BadRequest, e.Kind, "the same request gets the same redirect")
			assert.False(t, e.Kind.Retryable())
			assert.Contains(t, e.Error(), "redirected to another origin")
			assert.Contains(t, e.Error(), "so that the API key is not sent there")
			assertNoSecret(t, err, testKey)
			assert.Zero(t, reached.Load(), "the other origin got a request (key %v)", keySeen.Load())
		})
	}
}

func TestRedirectWithinTheOriginIsFollowed(t *testing.T) {
	var keys []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/moved/") {
			http.Redirect(w, r, "/moved"+r.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		mu.Lock()
		keys = append(keys, r.Header.Get("x-goog-api-key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"moved"}]}}]}`))
	}))
	defer srv.Close()
	clearGeminiEnv(t)
	c, err := NewClient(context.Background(), Config{APIKey: testKey, BaseURL: srv.URL})
	require.NoError(t, err)
	resp, err := Call(context.Background(), generate(c, nil))
	require.NoError(t, err)
	assert.Equal(t, "moved", resp.Text())
	assert.Equal(t, []string{testKey}, keys)
}
