package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// Retry-After is delta-seconds or an HTTP-date (RFC 9110: IMF-fixdate, the
// RFC 1123 form in GMT, plus the obsolete RFC 850 and asctime forms).
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 2, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 30 ", 30 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"601", 10 * time.Minute},
		{"3600", 10 * time.Minute},
		{"99999999999999999999", 0}, // overflows int64: unreadable
		{"soon", 0},
		{now.Add(45 * time.Second).Format(http.TimeFormat), 45 * time.Second},
		{"Sun, 02 Mar 2025 10:02:00 GMT", 2 * time.Minute},
		{now.Add(90 * time.Second).Format(time.RFC1123), 0},  // "UTC", not "GMT": not an HTTP-date, backoff applies
		{"Sunday, 02-Mar-25 10:00:20 GMT", 20 * time.Second}, // RFC 850
		{"Sun Mar  2 10:00:15 2025", 15 * time.Second},       // asctime
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},   // already past
		{now.Add(2 * time.Hour).Format(http.TimeFormat), 10 * time.Minute},
		{"Sun, 02 Mar 2025 10:02:00 +0100", 0}, // not an HTTP-date
	}
	for _, tc := range cases {
		if got := ParseRetryAfter(tc.header, now); got != tc.want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

func TestStatusKind(t *testing.T) {
	cases := map[int]Kind{400: BadRequest, 401: CredentialsRejected, 403: CredentialsRejected, 404: NotFound,
		408: Timeout, 429: RateLimited, 500: Unavailable, 503: Unavailable, 599: Unavailable}
	for status, want := range cases {
		if got, ok := StatusKind(status); !ok || got != want {
			t.Errorf("StatusKind(%d) = %v, %v; want %v", status, got, ok, want)
		}
	}
	for _, status := range []int{200, 302, 409, 422, 600} {
		if k, ok := StatusKind(status); ok {
			t.Errorf("StatusKind(%d) = %v, want none: the caller decides", status, k)
		}
	}
	for _, k := range []Kind{RateLimited, Unavailable, Timeout} {
		if !k.Retryable() {
			t.Errorf("%v is not retryable", k)
		}
	}
	for _, k := range []Kind{CredentialsRejected, NotFound, BadRequest, 0} {
		if k.Retryable() {
			t.Errorf("%v is retryable", k)
		}
	}
}

// The error is found through wrapping, and its cause stays reachable.
func TestAsAndIs(t *testing.T) {
	cause := errors.New("connection reset")
	e := &Error{Service: "VirusTotal", Kind: Unavailable, Status: 503, Message: "VirusTotal is unavailable (HTTP 503)", Cause: cause}
	wrapped := fmt.Errorf("tool virustotal_lookup: %w", e)
	got, ok := As(wrapped)
	if !ok || got != e {
		t.Fatalf("As = %v, %v", got, ok)
	}
	if !Is(wrapped, Unavailable) || Is(wrapped, RateLimited) {
		t.Error("Is does not read the kind")
	}
	if !errors.Is(wrapped, cause) {
		t.Error("the cause is not reachable")
	}
	if e.Error() != "VirusTotal is unavailable (HTTP 503)" {
		t.Errorf("Error() = %q", e.Error())
	}
	if _, ok := As(cause); ok || Is(nil, NotFound) {
		t.Error("a plain error is not an upstream error")
	}
}
