package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/upstream"
)

// googleError is a Google API error body with a google.rpc.Code name.
func googleError(status int, name, message, retryAfter string) geminitest.Reply {
	r := geminitest.Reply{Status: status, Body: map[string]any{"error": map[string]any{
		"code": status, "message": message, "status": name,
	}}}
	if retryAfter != "" {
		r.Header = http.Header{"Retry-After": []string{retryAfter}}
	}
	return r
}

// Google's API error model (google.rpc.Code and the HTTP status it travels
// with): only what a retry cannot change fails fast. 499 CANCELLED (Gemini
// under load, reason backendError) and 409 ABORTED are retried, with the
// server's delay.
func TestCallGoogleErrorModel(t *testing.T) {
	cases := []struct {
		status int
		name   string
		kind   upstream.Kind
		says   string
	}{
		{400, "INVALID_ARGUMENT", upstream.BadRequest, "invalid (HTTP 400)"},
		{400, "FAILED_PRECONDITION", upstream.BadRequest, "invalid (HTTP 400)"},
		{400, "OUT_OF_RANGE", upstream.BadRequest, "invalid (HTTP 400)"},
		{401, "UNAUTHENTICATED", upstream.CredentialsRejected, "credentials (HTTP 401)"},
		{403, "PERMISSION_DENIED", upstream.CredentialsRejected, "denied access (HTTP 403)"},
		{404, "NOT_FOUND", upstream.NotFound, "not found (HTTP 404)"},
		{409, "ABORTED", upstream.Unavailable, "aborted the request (HTTP 409)"},
		{409, "", upstream.Unavailable, "aborted the request (HTTP 409)"},
		{409, "ALREADY_EXISTS", upstream.BadRequest, "invalid (HTTP 409)"},
		{429, "RESOURCE_EXHAUSTED", upstream.RateLimited, "rate limit or quota exceeded (HTTP 429)"},
		{499, "CANCELLED", upstream.Unavailable, "cancelled the request (HTTP 499)"},
		{500, "INTERNAL", upstream.Unavailable, "unavailable (HTTP 500)"},
		{500, "UNKNOWN", upstream.Unavailable, "unavailable (HTTP 500)"},
		{500, "DATA_LOSS", upstream.Unavailable, "unavailable (HTTP 500)"},
		{501, "UNIMPLEMENTED", upstream.BadRequest, "does not support the request (HTTP 501)"},
		{503, "UNAVAILABLE", upstream.Unavailable, "unavailable (HTTP 503)"},
		{504, "DEADLINE_EXCEEDED", upstream.Unavailable, "unavailable (HTTP 504)"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.status, tc.name), func(t *testing.T) {
			srv := geminitest.NewServer(geminitest.Always(googleError(tc.status, tc.name, "The operation was cancelled.", "4")))
			defer srv.Close()
			c := newTestClient(t, srv)

			_, err := Call(context.Background(), generate(c, nil))
			e := upstreamError(t, err)
			assert.Equal(t, tc.kind, e.Kind)
			assert.Equal(t, tc.status, e.Status)
			assert.Contains(t, e.Message, tc.says)
			assert.Contains(t, e.Message, "The operation was cancelled.")
			if tc.kind.Retryable() {
				assert.Equal(t, 4*time.Second, e.RetryAfter, "Retry-After honoured")
			} else {
				assert.Zero(t, e.RetryAfter)
			}
			assert.Len(t, srv.Requests(), 1)
		})
	}
}

// A 499 or 409 with its delay in google.rpc.RetryInfo rather than a header.
func TestCallTransientCodesReadRetryInfo(t *testing.T) {
	for _, status := range []int{409, 499} {
		body := map[string]any{"error": map[string]any{
			"code": status, "message": "try again", "status": "ABORTED",
			"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}},
		}}
		srv := geminitest.NewServer(geminitest.Always(geminitest.Reply{Status: status, Body: body}))
		c := newTestClient(t, srv)
		_, err := Call(context.Background(), generate(c, nil))
		srv.Close()
		e := upstreamError(t, err)
		assert.True(t, e.Kind.Retryable(), "HTTP %d", status)
		assert.Equal(t, 12*time.Second, e.RetryAfter, "HTTP %d", status)
	}
}

// A 200 whose body is a Google error object is that error, not an empty
// answer: a rate limit stays a rate limit with its Retry-After.
func TestCall200WithErrorBodyIsThatError(t *testing.T) {
	cases := []struct {
		name  string
		body  map[string]any
		kind  upstream.Kind
		code  int
		delay time.Duration
	}{
		{"429 with code", map[string]any{"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"},
			upstream.RateLimited, 429, 30 * time.Second},
		{"status name only", map[string]any{"message": "overloaded", "status": "UNAVAILABLE"},
			upstream.Unavailable, 503, 30 * time.Second},
		{"400 in the body", map[string]any{"code": 400, "message": "bad field", "status": "INVALID_ARGUMENT"},
			upstream.BadRequest, 400, 0},
		{"nothing to go on", map[string]any{"code": 200, "message": "oops"},
			upstream.Unavailable, 500, 30 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := geminitest.NewServer(geminitest.Always(geminitest.Reply{
				Status: 200, Header: http.Header{"Retry-After": []string{"30"}},
				Body: map[string]any{"error": tc.body},
			}))
			defer srv.Close()
			c := newTestClient(t, srv)

			resp, err := Call(context.Background(), generate(c, nil))
			assert.Nil(t, resp)
			e := upstreamError(t, err)
			assert.Equal(t, tc.kind, e.Kind)
			assert.Equal(t, tc.code, e.Status)
			assert.Equal(t, tc.delay, e.RetryAfter)
			assert.Contains(t, e.Message, tc.body["message"])
			var apiErr genai.APIError
			require.ErrorAs(t, err, &apiErr, "the error object stays reachable")
		})
	}

	// An embedding call too.
	srv := geminitest.NewServer(geminitest.Always(geminitest.Reply{Body: map[string]any{"error": map[string]any{"code": 429, "message": "slow down"}}}))
	defer srv.Close()
	c := newTestClient(t, srv)
	_, err := Call(context.Background(), func(ctx context.Context) (*genai.EmbedContentResponse, error) {
		return c.Models.EmbedContent(ctx, "gemini-embedding-001", genai.Text("hi"), nil)
	})
	assert.Equal(t, upstream.RateLimited, upstreamError(t, err).Kind)

	// A real answer still gets through whole.
	ok := geminitest.NewServer(geminitest.Always(geminitest.Text("all fine")))
	defer ok.Close()
	c = newTestClient(t, ok)
	resp, err := Call(context.Background(), generate(c, nil))
	require.NoError(t, err)
	assert.Equal(t, "all fine", resp.Text())
}

// cutShort answers status with headers, then drops the connection half-way
// through the body it announced.
func cutShort(status int, header http.Header) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", "500")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"code":`))
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
}

// An error response whose body is cut short is still classified by its
// status line: a 401 fails fast, a 429 keeps its Retry-After.
func TestCallErrorBodyCutShortUsesTheStatus(t *testing.T) {
	cases := []struct {
		status int
		kind   upstream.Kind
		delay  time.Duration
	}{
		{401, upstream.CredentialsRejected, 0},
		{403, upstream.CredentialsRejected, 0},
		{429, upstream.RateLimited, 9 * time.Second},
		{503, upstream.Unavailable, 9 * time.Second},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			srv := cutShort(tc.status, http.Header{"Retry-After": []string{"9"}})
			defer srv.Close()
			clearGeminiEnv(t)
			c, err := NewClient(context.Background(), Config{APIKey: testKey, BaseURL: srv.URL})
			require.NoError(t, err)

			_, err = Call(context.Background(), generate(c, nil))
			e := upstreamError(t, err)
			assert.Equal(t, tc.kind, e.Kind)
			assert.Equal(t, tc.status, e.Status)
			assert.Equal(t, tc.delay, e.RetryAfter)
			assert.Contains(t, e.Message, fmt.Sprintf("(HTTP %d)", tc.status))
			assertNoSecret(t, err, testKey)
		})
	}
}

// When the status line and the body's code disagree, the one that is
// retried wins: a 503 whose body says 400 is retried.
func TestCallStatusAndBodyCodeDisagree(t *testing.T) {
	cases := []struct {
		status, bodyCode int
		kind             upstream.Kind
		code             int
	}{
		{503, 400, upstream.Unavailable, 503},
		{429, 401, upstream.RateLimited, 429},
		{400, 503, upstream.Unavailable, 503},
		{401, 404, upstream.NotFound, 404}, // neither retried: the body's code, as Google sends it
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.status, "/", tc.bodyCode), func(t *testing.T) {
			srv := geminitest.NewServer(geminitest.Always(geminitest.Reply{
				Status: tc.status, Header: http.Header{"Retry-After": []string{"3"}},
				Body: map[string]any{"error": map[string]any{"code": tc.bodyCode, "message": "mixed signals"}},
			}))
			defer srv.Close()
			c := newTestClient(t, srv)

			_, err := Call(context.Background(), generate(c, nil))
			e := upstreamError(t, err)
			assert.Equal(t, tc.kind, e.Kind)
			assert.Equal(t, tc.code, e.Status)
			if tc.kind.Retryable() {
				assert.Equal(t, 3*time.Second, e.RetryAfter)
			}
		})
	}
}

// assertShortChain checks that no error in the chain quotes the body:
// Temporal stores the cause.
func assertShortChain(t *testing.T, err error) {
	t.Helper()
	for e := err; e != nil; e = errors.Unwrap(e) {
		assert.LessOrEqual(t, len(e.Error()), maxCauseLen+100)
	}
}

// A response body over maxResponseBytes is one clear error naming the
// limit, never an answer cut short; an error response that large keeps its
// status.
func TestCallResponseOverTheLimit(t *testing.T) {
	huge := strings.Repeat("a", maxResponseBytes)
	t.Run("answer, chunked", func(t *testing.T) {
		srv := geminitest.NewServer(geminitest.Always(geminitest.Text(huge)))
		defer srv.Close()
		c := newTestClient(t, srv)
		resp, err := Call(context.Background(), generate(c, nil))
		assert.Nil(t, resp)
		e := upstreamError(t, err)
		assert.False(t, e.Kind.Retryable())
		assert.Contains(t, e.Message, "8 MiB")
		assertShortChain(t, err)
	})
	t.Run("answer, Content-Length", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(maxResponseBytes+100))
			_, _ = w.Write([]byte(`{"candidates":[`))
		}))
		defer srv.Close()
		clearGeminiEnv(t)
		c, err := NewClient(context.Background(), Config{APIKey: testKey, BaseURL: srv.URL})
		require.NoError(t, err)
		_, err = Call(context.Background(), generate(c, nil))
		e := upstreamError(t, err)
		assert.False(t, e.Kind.Retryable())
		assert.Contains(t, e.Message, "8 MiB")
		assertShortChain(t, err)
	})
	t.Run("503 page", func(t *testing.T) {
		srv := geminitest.NewServer(geminitest.Always(geminitest.Reply{Status: 503, Header: http.Header{"Content-Type": []string{"text/html"}}, Body: "<html>" + huge}))
		defer srv.Close()
		c := newTestClient(t, srv)
		_, err := Call(context.Background(), generate(c, nil))
		e := upstreamError(t, err)
		assert.Equal(t, upstream.Unavailable, e.Kind)
		assert.Equal(t, 503, e.Status)
		assert.Less(t, len(e.Message), 700)
		assertShortChain(t, err)
	})
	t.Run("just under", func(t *testing.T) {
		srv := geminitest.NewServer(geminitest.Always(geminitest.Text(huge[:maxResponseBytes/2])))
		defer srv.Close()
		c := newTestClient(t, srv)
		resp, err := Call(context.Background(), generate(c, nil))
		require.NoError(t, err)
		assert.Len(t, resp.Text(), maxResponseBytes/2)
	})
}

// A streamed answer over the limit ends in the same error.
func TestCallStreamOverTheLimit(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Always(geminitest.Text(strings.Repeat("b", maxResponseBytes))))
	defer srv.Close()
	c := newTestClient(t, srv)
	_, err := Call(context.Background(), func(ctx context.Context) (string, error) {
		var sb strings.Builder
		for resp, err := range c.Models.GenerateContentStream(ctx, testModel, genai.Text("hi"), nil) {
			if err != nil {
				return "", err
			}
			sb.WriteString(resp.Text())
		}
		return sb.String(), nil
	})
	e := upstreamError(t, err)
	assert.False(t, e.Kind.Retryable())
	assert.Contains(t, e.Message, "8 MiB")
	assertShortChain(t, err)
}
