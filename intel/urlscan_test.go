package intel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/upstream"
)

// urlscanSearchJSON is a search answer in the documented shape: one scan with
// an overall verdict, one with only stats.malicious, one with neither.
const urlscanSearchJSON = `{
  "results": [
    {
      "task": {"visibility": "public", "method": "api", "domain": "evil.example.com", "apexDomain": "example.com",
               "time": "2025-03-02T10:15:04.123Z", "uuid": "0e37e828-a9d9-45c0-ac50-1ca579b86c72",
               "url": "https://evil.example.com/login", "source": "f2a6b7c3"},
      "stats": {"uniqIPs": 4, "uniqCountries": 2, "dataLength": 123456, "encodedDataLength": 45678, "requests": 17, "malicious": 2},
      "page": {"country": "NL", "server": "nginx", "ip": "198.51.100.23", "mimeType": "text/html",
               "title": "Sign in to your account", "url": "https://evil.example.com/login?session=1",
               "tlsValidDays": 89, "tlsAgeDays": 1, "ptr": "host23.example.net", "domain": "evil.example.com",
               "apexDomain": "example.com", "asnname": "EXAMPLE-HOSTING, NL", "asn": "AS64500", "tlsIssuer": "R3", "status": "200"},
      "verdicts": {"overall": {"score": 100, "malicious": true, "hasVerdicts": true}},
      "_id": "0e37e828-a9d9-45c0-ac50-1ca579b86c72", "_score": null, "sort": [1740910504123, "0e37e828"],
      "result": "https://urlscan.io/api/v1/result/0e37e828-a9d9-45c0-ac50-1ca579b86c72/",
      "screenshot": "https://urlscan.io/screenshots/0e37e828-a9d9-45c0-ac50-1ca579b86c72.png"
    },
    {
      "task": {"visibility": "unlisted", "method": "manual", "time": "2025-03-01T08:00:00.000Z",
               "uuid": "5b0f6a5e-1c2d-4e3f-8a9b-0c1d2e3f4a5b", "url": "http://evil.example.com/"},
      "stats": {"requests": 3, "malicious": 1},
      "page": {"country": "NL", "ip": "198.51.100.23", "url": "http://evil.example.com/", "domain": "evil.example.com",
               "asnname": "EXAMPLE-HOSTING, NL", "asn": "AS64500", "status": 301},
      "_id": "5b0f6a5e-1c2d-4e3f-8a9b-0c1d2e3f4a5b",
      "result": "https://urlscan.io/api/v1/result/5b0f6a5e-1c2d-4e3f-8a9b-0c1d2e3f4a5b/"
    },
    {
      "task": {"visibility": "public", "method": "api", "time": "2025-02-27T23:59:59.000Z",
               "uuid": "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d", "url": "https://www.example.com/"},
      "stats": {"requests": 25, "malicious": 0},
      "page": {"country": "US", "ip": "203.0.113.7", "url": "https://www.example.com/", "domain": "www.example.com",
               "asnname": "EXAMPLE-CDN, US", "asn": "AS64501", "status": "200", "title": "Example Domain"},
      "_id": "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d"
    }
  ],
  "total": 42,
  "took": 87,
  "has_more": true
}`

func TestURLScanSearch(t *testing.T) {
	c, reqs := fakeProviderAs(t, "URLScan.io", "API-Key", respond(200, urlscanSearchJSON))
	tool := newURLScanSearch(c)
	require.Equal(t, "urlscan_search", tool.Declaration().Name)

	got, err := tool.Call(context.Background(), map[string]any{"query": " page.ip:198.51.100.23 ", "size": 3.0})
	require.NoError(t, err)

	require.Len(t, *reqs, 1)
	r := (*reqs)[0]
	require.Equal(t, http.MethodGet, r.Method)
	require.Equal(t, "/api/v1/search/", r.URL.Path)
	require.Equal(t, "page.ip:198.51.100.23", r.URL.Query().Get("q"))
	require.Equal(t, "3", r.URL.Query().Get("size"))
	require.Equal(t, testAPIKey, r.Header.Get("API-Key"))

	b := toJSON(t, got)
	var out struct {
		Query   string `json:"query"`
		Total   int    `json:"total"`
		HasMore bool   `json:"has_more"`
		Results []struct {
			UUID, Time, URL, Domain, IP, Country, Status, Title string
			ASNName                                             string `json:"asn_name"`
			Malicious                                           *bool  `json:"malicious"`
		} `json:"results"`
		Note string `json:"note"`
	}
	require.NoError(t, json.Unmarshal(b, &out))
	require.Equal(t, "page.ip:198.51.100.23", out.Query)
	require.Equal(t, 42, out.Total)
	require.True(t, out.HasMore)
	require.Len(t, out.Results, 3)
	first := out.Results[0]
	require.Equal(t, "0e37e828-a9d9-45c0-ac50-1ca579b86c72", first.UUID)
	require.Equal(t, "2025-03-02T10:15:04.123Z", first.Time)
	require.Equal(t, "https://evil.example.com/login?session=1", first.URL)
	require.Equal(t, "evil.example.com", first.Domain)
	require.Equal(t, "198.51.100.23", first.IP)
	require.Equal(t, "NL", first.Country)
	require.Equal(t, "200", first.Status)
	require.Equal(t, "Sign in to your account", first.Title)
	require.Equal(t, "EXAMPLE-HOSTING, NL", first.ASNName)
	require.NotNil(t, first.Malicious)
	require.True(t, *first.Malicious)
	// status given as a number; malicious from stats only.
	require.Equal(t, "301", out.Results[1].Status)
	require.NotNil(t, out.Results[1].Malicious)
	require.True(t, *out.Results[1].Malicious)
	// stats.malicious 0 is not a verdict: the field is left out.
	require.Nil(t, out.Results[2].Malicious)
	require.NotContains(t, string(b), "screenshot")
	require.Contains(t, out.Note, "urlscan_result")
	t.Logf("REPORT urlscan_search (3 scans) shaped result, %d bytes: %s", len(b), b)
}

func TestURLScanSearchDefaultsAndEmpty(t *testing.T) {
	c, reqs := fakeProviderAs(t, "URLScan.io", "API-Key", respond(200, `{"results": [], "total": 0, "took": 3, "has_more": false}`))
	got, err := newURLScanSearch(c).Call(context.Background(), map[string]any{"query": "domain:nothing.example"})
	require.NoError(t, err)
	require.Equal(t, "10", (*reqs)[0].URL.Query().Get("size"))
	b := toJSON(t, got)
	require.Contains(t, string(b), `"results":[]`)
	require.Contains(t, string(b), "No URLScan.io scan matches")
}

// A 404 from the search endpoint is "no scan matches", not an error.
func TestURLScanSearchNotFoundIsEmpty(t *testing.T) {
	c, reqs := fakeProviderAs(t, "URLScan.io", "API-Key", respond(404, `{"message": "Not Found", "status": 404}`))
	got, err := newURLScanSearch(c).Call(context.Background(), map[string]any{"query": "domain:nothing.example"})
	require.NoError(t, err)
	require.Len(t, *reqs, 1)
	out := got.(usSearchResult)
	require.Equal(t, "domain:nothing.example", out.Query)
	require.Zero(t, out.Total)
	require.False(t, out.HasMore)
	require.Empty(t, out.Results)
	require.Contains(t, out.Note, "No URLScan.io scan matches this query")
	require.Contains(t, string(toJSON(t, got)), `"results":[]`)
}

// A large answer is cut to a byte budget, and the cut is reported.
func TestURLScanSearchCapped(t *testing.T) {
	var res []string
	for i := range 100 {
		res = append(res, fmt.Sprintf(`{"task": {"uuid": "00000000-0000-4000-8000-%012d", "time": "2025-03-01T00:00:00.000Z", "url": "https://x.example/"},
		  "page": {"url": "https://evil.example.com/%s", "domain": "evil.example.com", "ip": "198.51.100.23", "country": "NL",
		  "status": "200", "title": "%s", "asnname": "EXAMPLE-HOSTING, NL"}}`, i, strings.Repeat("p", 400), strings.Repeat("t", 300)))
	}
	body := `{"results": [` + strings.Join(res, ",") + `], "total": 10000, "has_more": true}`
	c, _ := fakeProviderAs(t, "URLScan.io", "API-Key", respond(200, body))
	got, err := newURLScanSearch(c).Call(context.Background(), map[string]any{"query": "domain:evil.example.com", "size": 100})
	require.NoError(t, err)
	out := got.(usSearchResult)
	require.NotEmpty(t, out.Results)
	require.Equal(t, 100, len(out.Results)+out.Omitted)
	require.Positive(t, out.Omitted)
	require.Contains(t, out.Note, "left out")
	require.LessOrEqual(t, len(out.Results[0].URL), 200+3) // clip may add "…"
	b := toJSON(t, got)
	require.Less(t, len(b), usSearchBudget+1024)
	t.Logf("REPORT urlscan_search (100 long scans, capped to %d) shaped result, %d bytes", len(out.Results), len(b))
}

func TestURLScanSearchBadArguments(t *testing.T) {
	c, reqs := fakeProviderAs(t, "URLScan.io", "API-Key", respond(200, urlscanSearchJSON))
	tool := newURLScanSearch(c)
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, `missing required argument "query"`},
		{map[string]any{"query": "  "}, `"query" must not be empty`},
		{map[string]any{"query": 42.0}, `"query" must be a string`},
		{map[string]any{"query": strings.Repeat("a", 1001)}, `"query" is too long`},
		{map[string]any{"query": "domain:x.example", "size": 0.0}, `"size" must be a whole number from 1 to 100`},
		{map[string]any{"query": "domain:x.example", "size": 101.0}, `"size" must be a whole number from 1 to 100`},
		{map[string]any{"query": "domain:x.example", "size": 2.5}, `"size" must be a whole number`},
		{map[string]any{"query": "domain:x.example", "size": "many"}, `"size" must be a whole number`},
	}
	for _, tc := range cases {
		_, err := tool.Call(context.Background(), tc.args)
		assertRejection(t, err, tc.want)
	}
	require.Empty(t, *reqs, "bad arguments must be rejected before any request")
}

func TestURLScanErrors(t *testing.T) {
	const id = "0e37e828-a9d9-45c0-ac50-1ca579b86c72"
	calls := map[string]map[string]any{
		"search": {"query": "domain:evil.example.com"},
		"result": {"uuid": id},
	}
	for name, args := range calls {
		t.Run(name, func(t *testing.T) {
			call := func(h http.HandlerFunc) error {
				c, reqs := fakeProviderAs(t, "URLScan.io", "API-Key", h)
				var err error
				if name == "search" {
					_, err = newURLScanSearch(c).Call(context.Background(), args)
				} else {
					_, err = newURLScanResult(c).Call(context.Background(), args)
				}
				require.Len(t, *reqs, 1)
				return err
			}
			assertRateLimited(t, call(respond(429, `{"message": "Rate limit exceeded", "status": 429}`, "Retry-After", "7")), 7*time.Second)

			for _, code := range []int{401, 403} {
				err := call(respond(code, fmt.Sprintf(`{"message": "API key not valid or not allowed for this resource", "status": %d}`, code)))
				assertRefused(t, err, upstream.CredentialsRejected, fmt.Sprintf("API key rejected by URLScan.io (HTTP %d); check its API key setting", code))
				require.NotContains(t, err.Error(), testAPIKey)
			}

			err := call(respond(503, `{"message": "Service unavailable", "status": 503}`))
			assertRetryable(t, err)
			require.Contains(t, err.Error(), "URLScan.io is unavailable (HTTP 503)")

			assertRefused(t, call(respond(400, `{"message": "Invalid query", "description": "Query string could not be parsed", "status": 400}`)), upstream.BadRequest, "Invalid query")
		})
	}
}

// urlscanResultJSON is a result in the documented shape (data and meta
// trimmed to a token request, since the tool ignores them).
func urlscanResultJSON() string {
	var ips, domains, urls, hashes, certs []string
	for i := range 40 {
		ips = append(ips, fmt.Sprintf(`"198.51.100.%d"`, i+1))
		domains = append(domains, fmt.Sprintf(`"cdn%d.example.net"`, i))
		urls = append(urls, fmt.Sprintf(`"https://cdn%d.example.net/assets/%s.js"`, i, strings.Repeat("x", 300)))
		hashes = append(hashes, fmt.Sprintf(`"%064x"`, i))
		certs = append(certs, fmt.Sprintf(`{"subjectName": "cdn%d.example.net", "issuer": "R3", "validFrom": 1740787200, "validTo": 1748563200}`, i))
	}
	return `{
  "data": {"requests": [{"request": {"requestId": "1", "documentURL": "https://evil.example.com/login"}, "response": {"hash": "ab"}}],
           "cookies": [], "console": [], "links": [], "timing": {}, "globals": []},
  "stats": {"resourceStats": [], "protocolStats": [], "tlsStats": [], "serverStats": [], "domainStats": [], "regDomainStats": [],
            "secureRequests": 16, "securePercentage": 94, "IPv6Percentage": 0, "uniqCountries": 2, "totalLinks": 3, "malicious": 2, "adBlocked": 0,
            "ipStats": []},
  "meta": {"processors": {"umbrella": {"data": []}, "geoip": {"data": []}, "asn": {"data": []}}},
  "task": {"uuid": "0e37e828-a9d9-45c0-ac50-1ca579b86c72", "time": "2025-03-02T10:15:04.123Z", "url": "https://evil.example.com/login",
           "visibility": "public", "method": "api", "source": "f2a6b7c3", "tags": [],
           "reportURL": "https://urlscan.io/result/0e37e828-a9d9-45c0-ac50-1ca579b86c72/",
           "screenshotURL": "https://urlscan.io/screenshots/0e37e828-a9d9-45c0-ac50-1ca579b86c72.png",
           "domURL": "https://urlscan.io/dom/0e37e828-a9d9-45c0-ac50-1ca579b86c72/"},
  "page": {"url": "https://evil.example.com/login?session=1", "domain": "evil.example.com", "country": "NL", "city": "Amsterdam",
           "server": "nginx", "ip": "198.51.100.23", "asn": "AS64500", "asnname": "EXAMPLE-HOSTING, NL", "title": "Sign in to your account",
           "status": "200", "mimeType": "text/html", "redirected": "sub-domain"},
  "lists": {"ips": [` + strings.Join(ips, ",") + `], "countries": ["NL", "US"], "asns": ["64500", "64501"],
            "domains": [` + strings.Join(domains, ",") + `], "servers": ["nginx"],
            "urls": [` + strings.Join(urls, ",") + `], "linkDomains": [],
            "certificates": [` + strings.Join(certs, ",") + `], "hashes": [` + strings.Join(hashes, ",") + `]},
  "verdicts": {
    "overall": {"score": 100, "categories": ["phishing"], "brands": ["Microsoft"], "tags": ["phishing"], "malicious": true, "hasVerdicts": true},
    "urlscan": {"score": 100, "categories": ["phishing"],
                "brands": [{"key": "microsoft", "name": "Microsoft", "country": ["US"], "vertical": ["technology"]}], "tags": [], "malicious": true},
    "engines": {"score": 0, "malicious": [], "benign": [], "maliciousTotal": 0, "benignTotal": 0, "verdicts": [], "enginesTotal": 0, "categories": []},
    "community": {"score": 0, "votes": [], "votesTotal": 0, "votesMalicious": 0, "votesBenign": 0, "tags": [], "categories": []}
  }
}`
}

func TestURLScanResult(t *testing.T) {
	const id = "0E37E828-A9D9-45C0-AC50-1CA579B86C72" // upper case is accepted and normalised
	c, reqs := fakeProviderAs(t, "URLScan.io", "API-Key", respond(200, urlscanResultJSON()))
	tool := newURLScanResult(c)
	require.Equal(t, "urlscan_result", tool.Declaration().Name)

	got, err := tool.Call(context.Background(), map[string]any{"uuid": id})
	require.NoError(t, err)
	require.Len(t, *reqs, 1)
	require.Equal(t, "/api/v1/result/0e37e828-a9d9-45c0-ac50-1ca579b86c72/", (*reqs)[0].URL.Path)
	require.Empty(t, (*reqs)[0].URL.RawQuery)
	require.Equal(t, testAPIKey, (*reqs)[0].Header.Get("API-Key"))

	out := got.(usResultOut)
	require.True(t, out.Found)
	require.Equal(t, "0e37e828-a9d9-45c0-ac50-1ca579b86c72", out.UUID)
	require.Equal(t, "2025-03-02T10:15:04.123Z", out.ScannedAt)
	require.Equal(t, "https://evil.example.com/login", out.SubmittedURL)
	require.Equal(t, "https://urlscan.io/result/0e37e828-a9d9-45c0-ac50-1ca579b86c72/", out.ReportURL)
	require.Equal(t, usPageOut{URL: "https://evil.example.com/login?session=1", Domain: "evil.example.com", IP: "198.51.100.23",
		Country: "NL", Server: "nginx", Title: "Sign in to your account", Status: "200", ASN: "AS64500",
		ASNName: "EXAMPLE-HOSTING, NL", Redirected: "sub-domain"}, *out.Page)
	require.NotNil(t, out.Verdict)
	require.True(t, *out.Verdict.Malicious)
	require.Equal(t, 100.0, *out.Verdict.Score)
	require.Equal(t, []string{"phishing"}, out.Verdict.Categories)
	require.Equal(t, []string{"Microsoft"}, out.Verdict.Brands)
	require.Equal(t, []string{"Microsoft"}, out.URLScanVerdict.Brands, "brand objects are reduced to their names")
	require.Nil(t, out.Engines, "no engine verdicts: left out")
	require.Nil(t, out.Community, "no votes: left out")
	require.Equal(t, 2, *out.Stats.MaliciousRequests)
	require.Equal(t, 94.0, *out.Stats.SecurePercentage)

	require.Equal(t, 40, out.Lists.IPs.Total)
	require.Len(t, out.Lists.IPs.Items, usListCap)
	require.Equal(t, "198.51.100.1", out.Lists.IPs.Items[0])
	require.Equal(t, 40, out.Lists.Domains.Total)
	require.Len(t, out.Lists.Domains.Items, usListCap)
	require.Equal(t, 40, out.Lists.URLs.Total)
	require.Len(t, out.Lists.URLs.Items, usURLListCap)
	require.LessOrEqual(t, len(out.Lists.URLs.Items[0]), 120+3) // clip may add "…"
	require.Len(t, out.Lists.Hashes.Items, usURLListCap)
	require.Equal(t, 40, out.Lists.Certificates.Total)
	require.Len(t, out.Lists.Certificates.Items, usCertListCap)
	require.Equal(t, usCert{Subject: "cdn0.example.net", Issuer: "R3", ValidFrom: "2025-03-01T00:00:00Z", ValidTo: "2025-05-30T00:00:00Z"},
		out.Lists.Certificates.Items[0])

	b := toJSON(t, got)
	require.NotContains(t, string(b), "requestId", "the data section is not passed on")
	t.Logf("REPORT urlscan_result (40 entries per list in the answer) shaped result, %d bytes: %s", len(b), b)

	// A small, typical page.
	small := `{
  "task": {"uuid": "5b0f6a5e-1c2d-4e3f-8a9b-0c1d2e3f4a5b", "time": "2025-03-01T08:00:00.000Z", "url": "http://evil.example.com/", "visibility": "public",
           "reportURL": "https://urlscan.io/result/5b0f6a5e-1c2d-4e3f-8a9b-0c1d2e3f4a5b/"},
  "page": {"url": "https://evil.example.com/login", "domain": "evil.example.com", "country": "NL", "server": "nginx", "ip": "198.51.100.23",
           "asn": "AS64500", "asnname": "EXAMPLE-HOSTING, NL", "title": "Sign in", "status": "200"},
  "lists": {"ips": ["198.51.100.23", "203.0.113.7"], "countries": ["NL", "US"], "domains": ["evil.example.com", "cdn.example.net"],
            "urls": ["http://evil.example.com/", "https://evil.example.com/login", "https://cdn.example.net/app.js"],
            "hashes": ["275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f"],
            "certificates": [{"subjectName": "evil.example.com", "issuer": "R3", "validFrom": 1740787200, "validTo": 1748563200}]},
  "stats": {"uniqCountries": 2, "totalLinks": 0, "malicious": 0, "secureRequests": 2, "securePercentage": 67, "adBlocked": 0},
  "verdicts": {"overall": {"score": 0, "categories": [], "brands": [], "tags": [], "malicious": false, "hasVerdicts": false},
               "urlscan": {"score": 0, "categories": [], "brands": [], "tags": [], "malicious": false},
               "engines": {"score": 0, "malicious": [], "benign": [], "maliciousTotal": 0, "benignTotal": 0, "verdicts": [], "enginesTotal": 0},
               "community": {"score": 0, "votes": [], "votesTotal": 0, "votesMalicious": 0, "votesBenign": 0}}
}`
	c2, _ := fakeProviderAs(t, "URLScan.io", "API-Key", respond(200, small))
	got, err = newURLScanResult(c2).Call(context.Background(), map[string]any{"uuid": "5b0f6a5e-1c2d-4e3f-8a9b-0c1d2e3f4a5b"})
	require.NoError(t, err)
	b = toJSON(t, got)
	require.Contains(t, string(b), `"malicious":false`)
	t.Logf("REPORT urlscan_result (typical small page) shaped result, %d bytes: %s", len(b), b)
}

func TestURLScanResultEngines(t *testing.T) {
	body := `{"task": {"uuid": "0e37e828-a9d9-45c0-ac50-1ca579b86c72"}, "page": {},
	  "verdicts": {"engines": {"score": 100, "malicious": [{"engine": "EngineA", "classification": ["phishing"]}, "EngineB"],
	  "maliciousTotal": 2, "benignTotal": 5, "enginesTotal": 7, "categories": ["phishing"]},
	  "community": {"votesTotal": 3, "votesMalicious": 2, "votesBenign": 1}}}`
	c, _ := fakeProviderAs(t, "URLScan.io", "API-Key", respond(200, body))
	got, err := newURLScanResult(c).Call(context.Background(), map[string]any{"uuid": "0e37e828-a9d9-45c0-ac50-1ca579b86c72"})
	require.NoError(t, err)
	out := got.(usResultOut)
	require.Equal(t, &usEnginesOut{MaliciousTotal: 2, BenignTotal: 5, EnginesTotal: 7, Malicious: []string{"EngineA", "EngineB"}, Categories: []string{"phishing"}}, out.Engines)
	require.Equal(t, &usVotesOut{Total: 3, Malicious: 2, Benign: 1}, out.Community)
	require.Nil(t, out.Lists)
	require.Equal(t, "https://urlscan.io/result/0e37e828-a9d9-45c0-ac50-1ca579b86c72/", out.ReportURL)
}

func TestURLScanResultNotFound(t *testing.T) {
	c, reqs := fakeProviderAs(t, "URLScan.io", "API-Key", respond(404, `{"message": "Scan is not finished yet or was not found", "status": 404}`))
	got, err := newURLScanResult(c).Call(context.Background(), map[string]any{"uuid": "0e37e828-a9d9-45c0-ac50-1ca579b86c72"})
	require.NoError(t, err)
	require.Len(t, *reqs, 1)
	b := toJSON(t, got)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	require.Equal(t, "0e37e828-a9d9-45c0-ac50-1ca579b86c72", out["uuid"])
	require.Equal(t, false, out["found"])
	require.Contains(t, out["note"], "still running")
	require.Len(t, out, 3, "only uuid, found and note")
	t.Logf("REPORT urlscan_result (404) shaped result, %d bytes: %s", len(b), b)
}

func TestURLScanResultBadArguments(t *testing.T) {
	c, reqs := fakeProviderAs(t, "URLScan.io", "API-Key", respond(200, urlscanResultJSON()))
	tool := newURLScanResult(c)
	for _, args := range []map[string]any{
		{},
		{"uuid": ""},
		{"uuid": "not-a-uuid"},
		{"uuid": "0e37e828a9d945c0ac501ca579b86c72"},
		{"uuid": "0e37e828-a9d9-45c0-ac50-1ca579b86c72/../../search"},
		{"uuid": "0e37e828-a9d9-45c0-ac50-1ca579b86c7g"},
		{"uuid": 12.0},
	} {
		_, err := tool.Call(context.Background(), args)
		assertRejection(t, err, "")
	}
	_, err := tool.Call(context.Background(), map[string]any{"uuid": "nope"})
	assertRejection(t, err, "is not a URLScan.io scan uuid")
	require.Empty(t, *reqs, "bad arguments must be rejected before any request")
}
