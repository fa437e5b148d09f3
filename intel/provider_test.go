package intel

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// Retry-After is delta-seconds or an HTTP-date (RFC 9110: IMF-fixdate, the
// RFC 1123 form in GMT, plus the obsolete RFC 850 and asctime forms).
func TestRetryAfter(t *testing.T) {
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
		{"3600", 10 * time.Minute},
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
		require.Equal(t, tc.want, retryAfter(tc.header, now), "Retry-After %q", tc.header)
	}
}

// A 429 with an HTTP-date Retry-After is retried at that date.
func TestRateLimitedRetryAfterHTTPDate(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	c, _ := fakeProvider(t, respond(429, `{"message": "slow down"}`, "Retry-After", date))
	err := c.get(context.Background(), "/x", nil, &struct{}{})
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, ErrRateLimited, ae.Type())
	require.False(t, ae.NonRetryable())
	// The date has a one-second resolution and the clock moved on.
	require.Greater(t, ae.NextRetryDelay(), 85*time.Second)
	require.LessOrEqual(t, ae.NextRetryDelay(), 90*time.Second)
}
