package intel

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/upstream"

	"github.com/secops-agent/investigator/tools"
)

// abuseIPDBFake returns abuseipdb_check, built through Tools, talking to a
// fake AbuseIPDB.
func abuseIPDBFake(t *testing.T, h http.HandlerFunc) (tools.Tool, *[]*http.Request) {
	t.Helper()
	c, reqs := fakeProvider(t, h)
	return configuredTool(t, Config{AbuseIPDB: Provider{APIKey: testAPIKey, BaseURL: c.baseURL}}, c.http, "abuseipdb_check"), reqs
}

// abuseIPDBCheck is a /api/v2/check answer in the documented shape.
func abuseIPDBCheck(ip string, score, reports int, extra string) string {
	return fmt.Sprintf(`{"data": {"ipAddress": %q, "isPublic": true, "ipVersion": 4, "isWhitelisted": false,
		"abuseConfidenceScore": %d, "countryCode": "NL", "usageType": "Data Center/Web Hosting/Transit",
		"isp": "Example Hosting B.V.", "domain": "example-hosting.net",
		"hostnames": ["a.example-hosting.net", "b.example-hosting.net", "c.example-hosting.net", "d.example-hosting.net", "e.example-hosting.net", "f.example-hosting.net", "g.example-hosting.net"],
		"isTor": false, "totalReports": %d, "numDistinctUsers": 212, "lastReportedAt": "2024-03-01T12:34:56+00:00"%s}}`,
		ip, score, reports, extra)
}

func TestAbuseIPDBCheck(t *testing.T) {
	tool, reqs := abuseIPDBFake(t, respond(200, abuseIPDBCheck("198.51.100.23", 100, 1543, "")))
	res, err := tool.Call(context.Background(), map[string]any{"ip": "198.51.100.23", "max_age_days": 30.0})
	require.NoError(t, err)

	require.Len(t, *reqs, 1)
	r := (*reqs)[0]
	require.Equal(t, http.MethodGet, r.Method)
	require.Equal(t, "/api/v2/check", r.URL.Path)
	require.Equal(t, "198.51.100.23", r.URL.Query().Get("ipAddress"))
	require.Equal(t, "30", r.URL.Query().Get("maxAgeInDays"))
	require.False(t, r.URL.Query().Has("verbose"), "reports are not requested")
	require.Equal(t, testAPIKey, r.Header.Get("Key"))
	require.Equal(t, "application/json", r.Header.Get("Accept"))

	m := resultMap(t, res)
	require.Equal(t, map[string]any{
		"ip_address":             "198.51.100.23",
		"found":                  true,
		"abuse_confidence_score": 100.0,
		"verdict":                ">= 75: widely reported as abusive (1543 reports from 212 users in 30 days); likely malicious",
		"total_reports":          1543.0,
		"num_distinct_users":     212.0,
		"last_reported_at":       "2024-03-01T12:34:56+00:00",
		"country_code":           "NL",
		"usage_type":             "Data Center/Web Hosting/Transit",
		"isp":                    "Example Hosting B.V.",
		"domain":                 "example-hosting.net",
		"hostnames":              []any{"a.example-hosting.net", "b.example-hosting.net", "c.example-hosting.net", "d.example-hosting.net", "e.example-hosting.net"},
		"is_tor":                 false,
		"is_public":              true,
		"is_whitelisted":         false,
		"ip_version":             4.0,
		"max_age_days":           30.0,
		"note":                   "2 more hostnames omitted",
	}, m)
	b := toJSON(t, res)
	require.Less(t, len(b), 1000)
	t.Logf("REPORT abuseipdb_check (score 100): %d bytes: %s", len(b), b)
}

func TestAbuseIPDBDefaultsAndIPv6(t *testing.T) {
	body := `{"data": {"ipAddress": "2001:db8::7", "isPublic": true, "ipVersion": 6, "isWhitelisted": null,
		"abuseConfidenceScore": 0, "countryCode": null, "usageType": null, "isp": "Example", "domain": null,
		"hostnames": [], "isTor": false, "totalReports": 0, "numDistinctUsers": 0, "lastReportedAt": null}}`
	tool, reqs := abuseIPDBFake(t, respond(200, body))
	res, err := tool.Call(context.Background(), map[string]any{"ip": "2001:DB8:0::7"})
	require.NoError(t, err)
	q := (*reqs)[0].URL.Query()
	require.Equal(t, "2001:db8::7", q.Get("ipAddress"))
	require.Equal(t, "90", q.Get("maxAgeInDays"), "default window")
	m := resultMap(t, res)
	require.Equal(t, "0: no abuse reports in the last 90 days", m["verdict"])
	require.EqualValues(t, 0, m["abuse_confidence_score"])
	require.EqualValues(t, 6, m["ip_version"])
	require.NotContains(t, m, "country_code", "null fields are left out")
	require.NotContains(t, m, "is_whitelisted")
	require.NotContains(t, m, "last_reported_at")
	b := toJSON(t, res)
	t.Logf("REPORT abuseipdb_check (clean IPv6): %d bytes: %s", len(b), b)
}

func TestAbuseIPDBVerdicts(t *testing.T) {
	cases := []struct {
		score, reports int
		extra          string
		want           string
	}{
		{75, 40, "", ">= 75: widely reported as abusive"},
		{74, 12, "", "25-74: reported as abusive by several users (12 reports); suspicious"},
		{25, 3, "", "25-74"},
		{24, 2, "", "1-24: a few abuse reports (2); weak signal"},
		{1, 1, "", "1-24"},
		{0, 5, `, "isWhitelisted": true`, "0: 5 reports but no abuse confidence (old, disputed or whitelisted); whitelisted by AbuseIPDB (known legitimate service)"},
		{0, 0, "", "0: no abuse reports in the last 90 days"},
		{90, 300, `, "isTor": true`, "; Tor exit node"},
	}
	for _, c := range cases {
		// JSON keeps the last duplicate key, so extra overrides the defaults.
		tool, _ := abuseIPDBFake(t, respond(200, abuseIPDBCheck("198.51.100.23", c.score, c.reports, c.extra)))
		res, err := tool.Call(context.Background(), map[string]any{"ip": "198.51.100.23"})
		require.NoError(t, err)
		require.Contains(t, resultMap(t, res)["verdict"], c.want, "score %d", c.score)
	}
}

func TestAbuseIPDBNotFound(t *testing.T) {
	tool, reqs := abuseIPDBFake(t, respond(404, `{"errors": [{"detail": "Not found", "status": 404}]}`))
	res, err := tool.Call(context.Background(), map[string]any{"ip": "203.0.113.9"})
	require.NoError(t, err, "404 is an answer, not an error")
	require.Len(t, *reqs, 1)
	m := resultMap(t, res)
	require.Equal(t, "203.0.113.9", m["ip_address"])
	require.Equal(t, false, m["found"])
	require.Equal(t, "AbuseIPDB has no data for this IP", m["note"])
	b := toJSON(t, res)
	t.Logf("REPORT abuseipdb_check not found: %d bytes: %s", len(b), b)
}

func TestAbuseIPDBRateLimited(t *testing.T) {
	tool, _ := abuseIPDBFake(t, respond(429, `{"errors": [{"detail": "Daily rate limit of 1000 requests exceeded for this endpoint.", "status": 429}]}`,
		"Retry-After", "7", "X-RateLimit-Remaining", "0"))
	_, err := tool.Call(context.Background(), map[string]any{"ip": "198.51.100.23"})
	assertRateLimited(t, err, 7*time.Second)
	require.Contains(t, err.Error(), "AbuseIPDB")
}

func TestAbuseIPDBAPIKeyRejected(t *testing.T) {
	for _, code := range []int{401, 403} {
		tool, _ := abuseIPDBFake(t, respond(code, `{"errors": [{"detail": "Authentication failed. Your API key is either missing, incorrect, or revoked.", "status": 401}]}`))
		_, err := tool.Call(context.Background(), map[string]any{"ip": "198.51.100.23"})
		assertRefused(t, err, upstream.CredentialsRejected, "API key rejected by AbuseIPDB")
		require.NotContains(t, err.Error(), testAPIKey)
	}
}

func TestAbuseIPDBUnprocessableGoesToModel(t *testing.T) {
	tool, _ := abuseIPDBFake(t, respond(422, `{"errors": [{"detail": "The max age in days must be between 1 and 365.", "status": 422, "source": {"parameter": "maxAgeInDays"}}]}`))
	_, err := tool.Call(context.Background(), map[string]any{"ip": "198.51.100.23"})
	assertRefused(t, err, upstream.BadRequest, "The max age in days must be between 1 and 365.")
}

func TestAbuseIPDBServerErrorIsRetried(t *testing.T) {
	for _, code := range []int{500, 503} {
		tool, _ := abuseIPDBFake(t, respond(code, `{"errors": [{"detail": "Server Error"}]}`))
		_, err := tool.Call(context.Background(), map[string]any{"ip": "198.51.100.23"})
		assertRetryable(t, err)
		require.Contains(t, err.Error(), fmt.Sprintf("AbuseIPDB is unavailable (HTTP %d)", code))
	}
}

func TestAbuseIPDBBadArgumentsSendNothing(t *testing.T) {
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, `missing required argument "ip"`},
		{map[string]any{"ip": ""}, `"ip" must not be empty`},
		{map[string]any{"ip": 198.0}, `"ip" must be a string`},
		{map[string]any{"ip": "evil.example.com"}, "is not an IP address"},
		{map[string]any{"ip": "198.51.100.0/24"}, "is not an IP address"},
		{map[string]any{"ip": "192.168.1.20"}, "private, loopback, link-local or multicast"},
		{map[string]any{"ip": "::1"}, "private, loopback"},
		{map[string]any{"ip": "198.51.100.23", "max_age_days": 0.0}, `"max_age_days" must be a whole number from 1 to 365`},
		{map[string]any{"ip": "198.51.100.23", "max_age_days": 366.0}, `"max_age_days" must be a whole number from 1 to 365`},
		{map[string]any{"ip": "198.51.100.23", "max_age_days": 7.5}, `"max_age_days" must be a whole number`},
		{map[string]any{"ip": "198.51.100.23", "max_age_days": "a week"}, `"max_age_days" must be a whole number`},
		{map[string]any{"ip": "198.51.100.23", "max_age_days": true}, `"max_age_days" must be a number`},
	}
	for _, c := range cases {
		tool, reqs := abuseIPDBFake(t, respond(200, abuseIPDBCheck("198.51.100.23", 0, 0, "")))
		_, err := tool.Call(context.Background(), c.args)
		assertRejection(t, err, c.want)
		require.Empty(t, *reqs, "no request for %v", c.args)
	}
}

func TestAbuseIPDBAcceptsDefangedAndNumericStrings(t *testing.T) {
	tool, reqs := abuseIPDBFake(t, respond(200, abuseIPDBCheck("198.51.100.23", 0, 0, "")))
	_, err := tool.Call(context.Background(), map[string]any{"ip": "198.51.100[.]23", "max_age_days": "14"})
	require.NoError(t, err)
	q := (*reqs)[0].URL.Query()
	require.Equal(t, "198.51.100.23", q.Get("ipAddress"))
	require.Equal(t, "14", q.Get("maxAgeInDays"))
}

func TestAbuseIPDBDeclaration(t *testing.T) {
	d := newAbuseIPDB(nil).Declaration()
	require.Equal(t, "abuseipdb_check", d.Name)
	require.Contains(t, d.Description, "198.51.100.23")
	require.True(t, strings.Contains(d.Description, "abuse_confidence_score") && strings.Contains(d.Description, "verdict"))
	require.Equal(t, []string{"ip"}, d.Parameters.Required)
}
