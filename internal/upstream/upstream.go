// Package upstream is the typed error of a call to an outside service (Gemini,
// a threat-intelligence provider): which service failed, how (the Kind), the
// HTTP status and one secret-free sentence. The I/O packages return it; the
// activities map it to Temporal errors in one place, so Temporal stays out of
// the I/O packages.
package upstream

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Kind says how an upstream call failed, and so whether it is worth retrying.
type Kind int

const (
	// RateLimited: the service asked to slow down (HTTP 429); retry after RetryAfter.
	RateLimited Kind = iota + 1
	// Unavailable: the service failed or could not be reached (5xx, connection refused).
	Unavailable
	// Timeout: the call took too long (HTTP 408, a deadline, a network timeout).
	Timeout
	// CredentialsRejected: the service refused the credentials (HTTP 401 or 403).
	CredentialsRejected
	// NotFound: the service does not know what was asked for (HTTP 404).
	NotFound
	// BadRequest: the service refused the request as it is (HTTP 400, other 4xx).
	BadRequest
)

var kindNames = map[Kind]string{
	RateLimited: "rate limited", Unavailable: "unavailable", Timeout: "timeout",
	CredentialsRejected: "credentials rejected", NotFound: "not found", BadRequest: "bad request",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "kind " + strconv.Itoa(int(k))
}

// Retryable reports whether the same call may succeed later.
func (k Kind) Retryable() bool { return k == RateLimited || k == Unavailable || k == Timeout }

// Error is a failed call to an outside service.
type Error struct {
	// Service names the service as users know it: "Gemini", "VirusTotal".
	Service string
	Kind    Kind
	// Status is the HTTP status; 0 when no response came (timeouts, refused connections).
	Status int
	// RetryAfter is the delay the service asked for (Retry-After), 0 when none.
	RetryAfter time.Duration
	// Message is one sentence for users and the model; it never holds a secret.
	Message string
	// Cause is the underlying error, already free of secrets; may be nil.
	Cause error
}

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.Cause }

// As finds an *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e, true
	}
	return nil, false
}

// Is reports whether err's chain holds an *Error of kind k.
func Is(err error, k Kind) bool {
	e, ok := As(err)
	return ok && e.Kind == k
}

// StatusKind classifies the HTTP statuses every service means the same way:
// 400, 401, 403, 404, 408, 429 and 5xx. Other statuses are left to the caller
// (ok is false).
func StatusKind(status int) (k Kind, ok bool) {
	switch {
	case status == http.StatusBadRequest:
		return BadRequest, true
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return CredentialsRejected, true
	case status == http.StatusNotFound:
		return NotFound, true
	case status == http.StatusRequestTimeout:
		return Timeout, true
	case status == http.StatusTooManyRequests:
		return RateLimited, true
	case status >= 500 && status <= 599:
		return Unavailable, true
	}
	return 0, false
}

// MaxRetryDelay caps the delay a service may ask for: a longer one is more
// likely a misconfigured proxy than a plan worth waiting for in an activity.
const MaxRetryDelay = 10 * time.Minute

// ParseRetryAfter reads a Retry-After header value: delta-seconds or an
// HTTP-date (RFC 9110: IMF-fixdate, RFC 850 or asctime). It returns 0 (use
// the retry policy's backoff) when the value is absent, unreadable or
// already past, and caps the delay at MaxRetryDelay.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs > int64(MaxRetryDelay/time.Second) {
			return MaxRetryDelay
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryDelay)
}
