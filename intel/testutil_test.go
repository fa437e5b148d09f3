package intel

// Shared test helpers for the intel package: a fake provider (an httptest
// server plus a client pointed at it) and checks for the error classes every
// tool must produce.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/tools"
)

// testAPIKey is the API key every fake provider client sends.
const testAPIKey = "test-api-key-123"

// fakeProvider starts an httptest server that records each request and then
// runs handler, and returns a client pointed at it plus the recorded requests
// (clones, safe to read once the tool call has returned). The client is
// named "Test Provider" and sends testAPIKey in "X-Test-Key"; use
// fakeProviderAs to get a provider's real name and auth header.
func fakeProvider(t *testing.T, handler http.HandlerFunc) (*client, *[]*http.Request) {
	t.Helper()
	return fakeProviderAs(t, "Test Provider", "X-Test-Key", handler)
}

// fakeProviderAs is fakeProvider with the display name and auth header of a
// real provider, e.g. fakeProviderAs(t, "AlienVault OTX", "X-OTX-API-KEY", h).
func fakeProviderAs(t *testing.T, name, header string, handler http.HandlerFunc) (*client, *[]*http.Request) {
	t.Helper()
	var (
		mu   sync.Mutex
		reqs []*http.Request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.Clone(r.Context()))
		mu.Unlock()
		if handler == nil {
			http.NotFound(w, r)
			return
		}
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	c := newClient(name, header, Provider{APIKey: testAPIKey, BaseURL: srv.URL}, "", srv.Client())
	return c, &reqs
}

// respond returns a handler that answers with status and body (JSON content
// type); headers are name/value pairs, e.g. respond(429, `{}`, "Retry-After", "7").
func respond(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// toJSON marshals a tool result as the model would see it.
func toJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal result: %v", err)
	}
	return b
}

// assertRateLimited checks err is the provider's rate limit, to be retried
// after delay.
func assertRateLimited(t *testing.T, err error, delay time.Duration) {
	t.Helper()
	e, ok := upstream.As(err)
	if !ok {
		t.Fatalf("want *upstream.Error, got %T: %v", err, err)
	}
	if e.Kind != upstream.RateLimited || e.Status != http.StatusTooManyRequests {
		t.Errorf("kind %v, status %d; want rate limited, 429", e.Kind, e.Status)
	}
	if !e.Kind.Retryable() {
		t.Error("rate-limit error is non-retryable, want retryable")
	}
	if e.RetryAfter != delay {
		t.Errorf("RetryAfter = %v, want %v", e.RetryAfter, delay)
	}
	if tools.IsRejection(err) {
		t.Error("rate-limit error is a Rejection, want a retryable error")
	}
}

// assertRetryable checks err is a transient error: not a Rejection, and not
// an upstream error of a kind that is not retried.
func assertRetryable(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("want an error, got nil")
	}
	if tools.IsRejection(err) {
		t.Fatalf("want a retryable error, got a Rejection: %v", err)
	}
	if e, ok := upstream.As(err); ok && !e.Kind.Retryable() {
		t.Fatalf("want a retryable error, got a non-retryable one (%v): %v", e.Kind, err)
	}
}

// assertRejection checks err is a tools.Rejection whose message contains want.
func assertRejection(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a Rejection containing %q, got nil", want)
	}
	if !tools.IsRejection(err) {
		t.Fatalf("want a Rejection, got %T: %v", err, err)
	}
	if want != "" && !strings.Contains(err.Error(), want) {
		t.Errorf("rejection %q does not contain %q", err.Error(), want)
	}
}

// assertRefused checks err is the provider's refusal of kind k, which the
// tool activity hands to the model as the tool's error result (never
// retried), and that its message contains want.
func assertRefused(t *testing.T, err error, k upstream.Kind, want string) {
	t.Helper()
	e, ok := upstream.As(err)
	if !ok {
		t.Fatalf("want *upstream.Error, got %T: %v", err, err)
	}
	if e.Kind != k || e.Kind.Retryable() {
		t.Errorf("kind %v, want %v (not retried)", e.Kind, k)
	}
	if e.Status < 400 || e.Status > 499 {
		t.Errorf("status %d, want a 4xx", e.Status)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err.Error(), want)
	}
}

// configuredTool builds the tools through Tools (so the real display names
// and auth headers are used) and returns the named one, e.g.
//
//	c, reqs := fakeProvider(t, h)
//	tool := configuredTool(t, Config{OTX: Provider{APIKey: testAPIKey, BaseURL: c.baseURL}}, c.http, "query_otx")
func configuredTool(t *testing.T, cfg Config, hc *http.Client, name string) tools.Tool {
	t.Helper()
	on, _ := Tools(cfg, hc)
	for _, tool := range on {
		if tool.Declaration().Name == name {
			return tool
		}
	}
	t.Fatalf("tool %q is not enabled by this config", name)
	return nil
}

// resultMap returns a tool result as the model sees it: its JSON decoded
// into a map.
func resultMap(t *testing.T, v any) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(toJSON(t, v), &m); err != nil {
		t.Fatalf("result is not a JSON object: %v", err)
	}
	return m
}
