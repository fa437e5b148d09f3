// Package intel holds the threat-intelligence tools (AlienVault OTX,
// URLScan.io, VirusTotal, AbuseIPDB). Each is enabled only when its API key is
// configured, talks to a configurable base URL, and shapes the provider's
// answer into the few fields an analyst needs.
package intel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/tools"
)

// ErrRateLimited is the Temporal error type of a provider's 429; the tool
// activity is retried after the provider's Retry-After.
const ErrRateLimited = "IntelRateLimited"

// maxBody bounds how much of a provider response is read.
const maxBody = 8 << 20

// errNotFound is returned by get for a 404; tools turn it into a "not found" result.
var errNotFound = errors.New("not found")

// Provider says how to reach one threat-intelligence service.
type Provider struct {
	APIKey  string
	BaseURL string
}

// Config holds every provider; a provider without an API key is disabled.
type Config struct {
	OTX        Provider
	URLScan    Provider
	VirusTotal Provider
	AbuseIPDB  Provider
}

// Default base URLs.
const (
	DefaultOTXURL        = "https://otx.alienvault.com"
	DefaultURLScanURL    = "https://urlscan.io"
	DefaultVirusTotalURL = "https://www.virustotal.com"
	DefaultAbuseIPDBURL  = "https://api.abuseipdb.com"
)

// client is one provider's HTTP access: base URL, auth header and display name.
type client struct {
	name    string // as shown to users: "VirusTotal"
	baseURL string
	header  string // auth header name
	key     string
	http    *http.Client
}

func newClient(name, header string, p Provider, def string, hc *http.Client) *client {
	base := strings.TrimRight(p.BaseURL, "/")
	if base == "" {
		base = def
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &client{name: name, baseURL: base, header: header, key: p.APIKey, http: hc}
}

// get calls GET base+path?query with the API key header and decodes the JSON
// answer into out. It classifies failures for the tool activity:
//   - 404: errNotFound (the tool reports "nothing known" to the model);
//   - 401/403: a tools.Rejection "API key rejected by NAME", not retried;
//   - 429: a retryable ApplicationError whose next retry delay is Retry-After;
//   - other 4xx: a tools.Rejection with the provider's message;
//   - 5xx and transport errors: plain errors, retried by Temporal.
func (c *client) get(ctx context.Context, path string, query url.Values, out any) error {
	u := c.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return tools.Reject("cannot build the %s request: %v", c.name, err)
	}
	req.Header.Set(c.header, c.key)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s request failed: %w", c.name, redact(err, c.key))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("read the %s response: %w", c.name, err)
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%s answered with invalid JSON: %w", c.name, err)
		}
		return nil
	case code == http.StatusNotFound:
		return errNotFound
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return tools.Reject("API key rejected by %s (HTTP %d); check its API key setting", c.name, code)
	case code == http.StatusTooManyRequests:
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("%s rate limit reached (HTTP 429)", c.name), ErrRateLimited,
			temporal.ApplicationErrorOptions{NextRetryDelay: retryAfter(resp.Header.Get("Retry-After"), time.Now())})
	case code >= 400 && code < 500:
		return tools.Reject("%s refused the request (HTTP %d): %s", c.name, code, c.errorText(body))
	default:
		return fmt.Errorf("%s is unavailable (HTTP %d): %s", c.name, code, c.errorText(body))
	}
}

// retryAfter reads a Retry-After header (seconds or HTTP date), capped at 10
// minutes; zero means "use the retry policy's backoff".
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(v); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), 10*time.Minute)
}

// errorText is the short error text of a provider's error body, without the
// API key (a provider or a proxy may quote the request back).
func (c *client) errorText(body []byte) string {
	return message([]byte(redactText(string(body), c.key)))
}

// message extracts a short error text from a provider's error body.
func message(body []byte) string {
	var e struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
		Detail  string `json:"detail"`
		Errors  []struct {
			Detail string `json:"detail"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &e) == nil {
		switch {
		case e.Message != "":
			return clip(e.Message, 300)
		case e.Detail != "":
			return clip(e.Detail, 300)
		case len(e.Errors) > 0 && e.Errors[0].Detail != "":
			return clip(e.Errors[0].Detail, 300)
		case e.Error != nil:
			b, _ := json.Marshal(e.Error)
			return clip(string(b), 300)
		}
	}
	return clip(strings.TrimSpace(string(body)), 300)
}

// redact returns err itself when its text does not hold key, and an error
// with the key removed (and the chain dropped) when it does.
func redact(err error, key string) error {
	if key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return errors.New(redactText(err.Error(), key))
}

func redactText(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[REDACTED]")
}

// clip cuts s to n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s[:n])
	return string(r[:len(r)-1]) + "…"
}
