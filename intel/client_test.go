package intel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/tools"
)

// A 429 with an HTTP-date Retry-After is retried at that date.
func TestRateLimitedRetryAfterHTTPDate(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	c, _ := fakeProvider(t, respond(429, `{"message": "slow down"}`, "Retry-After", date))
	err := c.get(context.Background(), "/x", nil, &struct{}{})
	e, ok := upstream.As(err)
	require.True(t, ok, "%T: %v", err, err)
	require.Equal(t, upstream.RateLimited, e.Kind)
	require.Equal(t, "Test Provider", e.Service)
	require.True(t, e.Kind.Retryable())
	// The date has a one-second resolution and the clock moved on.
	require.Greater(t, e.RetryAfter, 85*time.Second)
	require.LessOrEqual(t, e.RetryAfter, 90*time.Second)
}

// A 503 is retried after its Retry-After too; a 408 is a timeout.
func TestUnavailableAndTimeoutAreRetried(t *testing.T) {
	c, _ := fakeProvider(t, respond(503, `{"message": "maintenance"}`, "Retry-After", "12"))
	err := c.get(context.Background(), "/x", nil, &struct{}{})
	e, ok := upstream.As(err)
	require.True(t, ok)
	require.Equal(t, upstream.Unavailable, e.Kind)
	require.Equal(t, 12*time.Second, e.RetryAfter)
	require.Equal(t, "Test Provider is unavailable (HTTP 503): maintenance", e.Error())

	c, _ = fakeProvider(t, respond(408, `{"message": "took too long"}`))
	require.True(t, upstream.Is(c.get(context.Background(), "/x", nil, &struct{}{}), upstream.Timeout))
}

// A provider that redirects to another host gets no request with the key:
// the call ends with an error result naming the provider. A redirect within
// the provider's host is followed.
func TestRedirectToAnotherHostIsRefused(t *testing.T) {
	for _, it := range intelTools {
		t.Run(it.name, func(t *testing.T) {
			var mu sync.Mutex
			var leaked []http.Header
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				leaked = append(leaked, r.Header.Clone())
				mu.Unlock()
				respond(200, fmt.Sprintf(it.okBody, "from elsewhere"))(w, r)
			}))
			defer other.Close()
			provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
			}))
			defer provider.Close()

			tool := configuredTool(t, it.cfg(Provider{APIKey: testAPIKey, BaseURL: provider.URL}), provider.Client(), it.name)
			res, err := tool.Call(context.Background(), it.args)
			require.Nil(t, res)
			assertRejection(t, err, it.provider+" redirected the request to another host ("+other.URL+"); refused")
			require.NotContains(t, err.Error(), testAPIKey)
			mu.Lock()
			defer mu.Unlock()
			require.Empty(t, leaked, "no request reached the other host")
		})
	}

	// Same host: followed, and the key goes with it.
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("API-Key"))
		mu.Unlock()
		if !strings.HasPrefix(r.URL.Path, "/moved/") {
			http.Redirect(w, r, "/moved"+r.URL.RequestURI(), http.StatusMovedPermanently)
			return
		}
		respond(200, `{"results": [], "total": 0}`)(w, r)
	}))
	defer srv.Close()
	tool := configuredTool(t, Config{URLScan: Provider{APIKey: testAPIKey, BaseURL: srv.URL}}, srv.Client(), "urlscan_search")
	_, err := tool.Call(context.Background(), map[string]any{"query": "domain:evil.example.com"})
	require.NoError(t, err)
	require.Equal(t, []string{testAPIKey, testAPIKey}, keys)
}

// A redirect from https to http on the same host is refused too: the key
// would cross the network in clear.
func TestRedirectDowngradeIsRefused(t *testing.T) {
	check := sameHostOnly(nil)
	from, _ := http.NewRequest(http.MethodGet, "https://api.example.com/x", nil)
	for target, ok := range map[string]bool{
		"https://api.example.com/y":      true,
		"https://API.example.com/y":      true,
		"http://api.example.com/y":       false,
		"https://api.example.com:8443/y": false,
		"https://evil.example.net/y":     false,
	} {
		to, _ := http.NewRequest(http.MethodGet, target, nil)
		err := check(to, []*http.Request{from})
		require.Equal(t, ok, err == nil, "%s: %v", target, err)
	}
	// http to https on the same host is an upgrade: allowed.
	plain, _ := http.NewRequest(http.MethodGet, "http://api.example.com/x", nil)
	secure, _ := http.NewRequest(http.MethodGet, "https://api.example.com/x", nil)
	require.NoError(t, check(secure, []*http.Request{plain}))
}

// A provider that quotes the key back in another form than it was sent
// (JSON-escaped, percent-encoded, base64) has it redacted, in its error
// messages and in every string of its answers that reaches the result.
func TestEscapedKeyRedactedInResultsAndErrors(t *testing.T) {
	const secret = "s3cr3t/Key+intel-0123456789"
	jsonEscaped := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		return b.String()
	}
	forms := map[string]string{
		"raw":                  secret,
		"JSON \\u escapes":     jsonEscaped(secret),
		"one JSON \\u escape":  `\u0073` + secret[1:],
		"JSON \\/ escape":      strings.ReplaceAll(secret, "/", `\/`),
		"percent-encoded":      url.QueryEscape(secret),
		"base64":               base64.StdEncoding.EncodeToString([]byte(secret)),
		"base64 of basic auth": base64.StdEncoding.EncodeToString([]byte("user:" + secret)),
	}
	// What must never reach the model or history: the key, and the forms
	// that are not JSON syntax (those are the key once decoded).
	banned := []string{secret, strings.ToLower(secret), url.QueryEscape(secret), base64.StdEncoding.EncodeToString([]byte(secret))}
	for _, it := range intelTools {
		t.Run(it.name, func(t *testing.T) {
			for formName, form := range forms {
				// An error reply quotes it in each field errorText reads, or in
				// none (then the reply's raw text is quoted).
				errorBodies := []string{
					`{"message": "key %s refused", "detail": "x", "errors": [{"detail": "x"}], "error": "x"}`,
					`{"detail": "key %s", "errors": [{"detail": "x"}], "error": "x"}`,
					`{"errors": [{"detail": "key %s"}, {}], "error": "x"}`,
					`{"error": {"message": "key %s", "code": 3}}`,
					`{"error": "key %s"}`,
					`{"other": ["key %s"]}`,
				}
				for i, status := range []int{200, 400, 422, 500, 503, 500, 400} {
					body := fmt.Sprintf(it.okBody, form)
					if status != 200 {
						body = fmt.Sprintf(errorBodies[i-1], form)
					}
					srv := httptest.NewServer(respond(status, body))
					tool := configuredTool(t, it.cfg(Provider{APIKey: secret, BaseURL: srv.URL}), srv.Client(), it.name)
					res, err := tool.Call(context.Background(), it.args)
					srv.Close()
					what := fmt.Sprintf("%s, HTTP %d", formName, status)
					var seen string
					if status == 200 {
						require.NoError(t, err, what)
						seen = string(toJSON(t, res))
					} else {
						require.Error(t, err, what)
						require.Nil(t, res, what)
						seen = err.Error()
					}
					require.Contains(t, seen, "[REDACTED]", "%s: the quoted key reached the output, redacted: %s", what, seen)
					for _, b := range banned {
						require.NotContains(t, seen, b, what)
					}
					var decoded any
					if json.Unmarshal([]byte(seen), &decoded) == nil {
						require.NotContains(t, fmt.Sprint(decoded), secret, what)
					}
				}
			}
		})
	}
}

// An answer over 8 MiB is refused as the tool's result, not retried: the
// provider would send the same answer again.
func TestOversizedAnswerIsRefused(t *testing.T) {
	big := `{"data": "` + strings.Repeat("a", maxBody) + `"}`
	c, _ := fakeProvider(t, respond(200, big))
	err := c.get(context.Background(), "/x", nil, &struct{}{})
	require.True(t, tools.IsRejection(err), "%T: %v", err, err)
	require.Equal(t, "Test Provider answered with more than 8 MiB; ask for a narrower section or one indicator", err.Error())

	c, _ = fakeProvider(t, respond(200, `{"data": "`+strings.Repeat("a", maxBody-20)+`"}`))
	require.NoError(t, c.get(context.Background(), "/x", nil, &struct{ Data string }{}), "an answer just under the bound is read")
}
