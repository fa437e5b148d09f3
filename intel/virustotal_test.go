package intel

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/upstream"
)

// vtEngines renders last_analysis_results with the given number of
// malicious and suspicious verdicts plus some harmless/undetected ones.
func vtEngines(malicious, suspicious int) string {
	var parts []string
	for i := range malicious {
		name := fmt.Sprintf("Engine%02d", i)
		parts = append(parts, fmt.Sprintf(`"%s": {"method": "blacklist", "engine_name": "%s", "category": "malicious", "result": "malware"}`, name, name))
	}
	for i := range suspicious {
		name := fmt.Sprintf("Susp%02d", i)
		parts = append(parts, fmt.Sprintf(`"%s": {"method": "blacklist", "engine_name": "%s", "category": "suspicious", "result": "suspicious"}`, name, name))
	}
	parts = append(parts,
		`"CleanA": {"method": "blacklist", "engine_name": "CleanA", "category": "harmless", "result": "clean"}`,
		`"CleanB": {"method": "blacklist", "engine_name": "CleanB", "category": "undetected", "result": "unrated"}`,
		`"Slow": {"method": "blacklist", "engine_name": "Slow", "category": "timeout", "result": null}`)
	return "{" + strings.Join(parts, ",") + "}"
}

const vtIPJSON = `{"data": {"id": "198.51.100.23", "type": "ip_address", "links": {"self": "https://www.virustotal.com/api/v3/ip_addresses/198.51.100.23"},
  "attributes": {"as_owner": "EXAMPLE-HOSTING", "asn": 64500, "continent": "EU", "country": "NL", "network": "198.51.100.0/24",
    "regional_internet_registry": "RIPE NCC", "reputation": -12, "tags": [], "total_votes": {"harmless": 0, "malicious": 3},
    "whois": "inetnum: 198.51.100.0 - 198.51.100.255 ...", "whois_date": 1739000000, "last_modification_date": 1740910000,
    "last_analysis_date": 1740900000,
    "last_analysis_stats": {"harmless": 55, "malicious": 4, "suspicious": 1, "undetected": 32, "timeout": 0},
    "last_analysis_results": ENGINES}}}`

func TestVirusTotalIP(t *testing.T) {
	body := strings.Replace(vtIPJSON, "ENGINES", vtEngines(4, 1), 1)
	c, reqs := fakeProviderAs(t, "VirusTotal", "x-apikey", respond(200, body))
	tool := newVirusTotal(c)
	require.Equal(t, "virustotal_lookup", tool.Declaration().Name)

	got, err := tool.Call(context.Background(), map[string]any{"resource_type": "ip", "resource": " 198.51.100.23 "})
	require.NoError(t, err)
	require.Len(t, *reqs, 1)
	r := (*reqs)[0]
	require.Equal(t, http.MethodGet, r.Method)
	require.Equal(t, "/api/v3/ip_addresses/198.51.100.23", r.URL.Path)
	require.Empty(t, r.URL.RawQuery)
	require.Equal(t, testAPIKey, r.Header.Get("x-apikey"))

	out := got.(vtOut)
	require.True(t, out.Found)
	require.Equal(t, "ip", out.ResourceType)
	require.Equal(t, "198.51.100.23", out.Resource)
	require.Equal(t, &vtStats{Malicious: 4, Suspicious: 1, Undetected: 32, Harmless: 55}, out.Stats)
	require.Equal(t, -12, *out.Reputation)
	require.Equal(t, &vtVotes{Malicious: 3}, out.Votes)
	require.Equal(t, "2025-03-02T07:20:00Z", out.LastAnalysisDate)
	require.Equal(t, "NL", out.Country)
	require.Equal(t, "EXAMPLE-HOSTING", out.ASOwner)
	require.Equal(t, int64(64500), out.ASN)
	require.Equal(t, "198.51.100.0/24", out.Network)
	require.Empty(t, out.Note, "nothing was cut")
	require.Equal(t, "https://www.virustotal.com/gui/ip-address/198.51.100.23", out.Link)
	require.Equal(t, []vtFlag{
		{Engine: "Engine00", Category: "malicious", Result: "malware"},
		{Engine: "Engine01", Category: "malicious", Result: "malware"},
		{Engine: "Engine02", Category: "malicious", Result: "malware"},
		{Engine: "Engine03", Category: "malicious", Result: "malware"},
		{Engine: "Susp00", Category: "suspicious", Result: "suspicious"},
	}, out.Flagged)
	require.Zero(t, out.FlaggedByMore)

	b := toJSON(t, got)
	require.NotContains(t, string(b), "whois")
	require.NotContains(t, string(b), "CleanA")
	t.Logf("REPORT virustotal_lookup ip shaped result, %d bytes: %s", len(b), b)
}

func TestVirusTotalIPv6(t *testing.T) {
	c, reqs := fakeProviderAs(t, "VirusTotal", "x-apikey", respond(200, `{"data": {"id": "2001:db8::1", "type": "ip_address", "attributes": {}}}`))
	_, err := newVirusTotal(c).Call(context.Background(), map[string]any{"resource_type": "ip", "resource": "2001:DB8:0::1"})
	require.NoError(t, err)
	require.Equal(t, "/api/v3/ip_addresses/2001:db8::1", (*reqs)[0].URL.Path)
}

func TestVirusTotalDomain(t *testing.T) {
	body := `{"data": {"id": "evil.example.com", "type": "domain", "attributes": {
	  "categories": {"Forcepoint ThreatSeeker": "phishing and other frauds", "Sophos": "phishing", "BitDefender": "phishing", "alphaMountain.ai": "Phishing"},
	  "creation_date": 1738368000, "registrar": "Example Registrar, LLC", "reputation": -5, "tags": ["dga"],
	  "total_votes": {"harmless": 1, "malicious": 7}, "last_analysis_date": 1740900000,
	  "last_dns_records": [{"type": "A", "value": "198.51.100.23", "ttl": 300}],
	  "whois": "Domain Name: EVIL.EXAMPLE.COM ...",
	  "last_analysis_stats": {"harmless": 60, "malicious": 14, "suspicious": 3, "undetected": 17, "timeout": 0},
	  "last_analysis_results": ` + vtEngines(14, 3) + `}}}`
	c, reqs := fakeProviderAs(t, "VirusTotal", "x-apikey", respond(200, body))
	got, err := newVirusTotal(c).Call(context.Background(), map[string]any{"resource_type": "domain", "resource": "Evil.Example.com."})
	require.NoError(t, err)
	require.Equal(t, "/api/v3/domains/evil.example.com", (*reqs)[0].URL.Path)
	require.Equal(t, testAPIKey, (*reqs)[0].Header.Get("x-apikey"))

	out := got.(vtOut)
	require.Equal(t, "evil.example.com", out.Resource)
	require.Equal(t, "Example Registrar, LLC", out.Registrar)
	require.Equal(t, "2025-02-01T00:00:00Z", out.CreationDate)
	require.Equal(t, []string{"phishing", "phishing and other frauds"}, out.Categories)
	require.Equal(t, []string{"dga"}, out.Tags)
	require.Len(t, out.Flagged, vtMaxFlagged)
	require.Equal(t, 7, out.FlaggedByMore, "14 malicious + 3 suspicious, 10 shown")
	for _, f := range out.Flagged {
		require.Equal(t, "malicious", f.Category, "malicious verdicts come first")
	}
	require.Equal(t, "Engine00", out.Flagged[0].Engine)
	require.Equal(t, "https://www.virustotal.com/gui/domain/evil.example.com", out.Link)

	b := toJSON(t, got)
	require.Contains(t, string(b), `"flagged_by_more":7`)
	require.NotContains(t, string(b), "last_dns_records")
	t.Logf("REPORT virustotal_lookup domain (17 engines flagged) shaped result, %d bytes: %s", len(b), b)
}

func TestVirusTotalURL(t *testing.T) {
	const target = "https://evil.example.com/dl?f=??>>"
	// Unpadded URL-safe base64: '-' where standard base64 has '+', no '='.
	const wantID = "aHR0cHM6Ly9ldmlsLmV4YW1wbGUuY29tL2RsP2Y9Pz8-Pg"
	require.Equal(t, wantID, base64.RawURLEncoding.EncodeToString([]byte(target)))
	body := `{"data": {"id": "1db0ad7dbcec0676710ea0eaacd35d5e471d3e11944d53bcbd31f0cbd11bce31", "type": "url", "attributes": {
	  "url": "` + target + `", "last_final_url": "https://evil.example.com/landing", "title": "Download",
	  "categories": {"Sophos": "malware callhome, command and control"}, "reputation": 0, "tags": [],
	  "total_votes": {"harmless": 0, "malicious": 0}, "last_analysis_date": 1740900000, "first_submission_date": 1740800000,
	  "last_http_response_code": 200, "last_http_response_headers": {"server": "nginx"}, "outgoing_links": [],
	  "last_analysis_stats": {"harmless": 70, "malicious": 2, "suspicious": 0, "undetected": 25, "timeout": 0},
	  "last_analysis_results": ` + vtEngines(2, 0) + `}}}`
	c, reqs := fakeProviderAs(t, "VirusTotal", "x-apikey", respond(200, body))
	got, err := newVirusTotal(c).Call(context.Background(), map[string]any{"resource_type": "url", "resource": target})
	require.NoError(t, err)
	r := (*reqs)[0]
	require.Equal(t, "/api/v3/urls/"+wantID, r.URL.EscapedPath())
	require.Equal(t, testAPIKey, r.Header.Get("x-apikey"))

	out := got.(vtOut)
	require.Empty(t, out.URL, "the same as resource: not repeated")
	require.Equal(t, "https://evil.example.com/landing", out.LastFinalURL)
	require.Equal(t, "Download", out.Title)
	require.Equal(t, []string{"malware callhome, command and control"}, out.Categories)
	require.Len(t, out.Flagged, 2)
	require.Equal(t, "https://www.virustotal.com/gui/url/1db0ad7dbcec0676710ea0eaacd35d5e471d3e11944d53bcbd31f0cbd11bce31", out.Link)
	b := toJSON(t, got)
	t.Logf("REPORT virustotal_lookup url shaped result, %d bytes: %s", len(b), b)
}

func TestVirusTotalFile(t *testing.T) {
	const sha = "275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f"
	body := `{"data": {"id": "` + sha + `", "type": "file", "attributes": {
	  "md5": "44d88612fea8a8f36de82e1278abb02f", "sha1": "3395856ce81f2b7382dee72602f798b642f14140", "sha256": "` + sha + `",
	  "meaningful_name": "eicar.com", "type_description": "DOS COM", "size": 68,
	  "names": ["eicar.com", "eicar.com.txt", "EICAR", "test.com", "eicar_com.zip", "sample.exe", "x.bin"],
	  "first_submission_date": 1148301722, "last_analysis_date": 1740900000, "reputation": 3540,
	  "tags": ["via-tor", "attachment", "known-distributor", "spreader", "cve-2000-0001", "t6", "t7", "t8", "t9", "t10", "t11", "t12"],
	  "total_votes": {"harmless": 900, "malicious": 400},
	  "popular_threat_classification": {"suggested_threat_label": "virus.eicar/test", "popular_threat_category": [{"count": 30, "value": "virus"}]},
	  "sandbox_verdicts": {"Zenbox": {"category": "malicious"}}, "pe_info": {"imports": []},
	  "last_analysis_stats": {"harmless": 0, "malicious": 62, "suspicious": 0, "undetected": 12, "timeout": 1, "type-unsupported": 3},
	  "last_analysis_results": ` + vtEngines(62, 0) + `}}}`
	c, reqs := fakeProviderAs(t, "VirusTotal", "x-apikey", respond(200, body))
	got, err := newVirusTotal(c).Call(context.Background(), map[string]any{"resource_type": "file", "resource": strings.ToUpper(sha)})
	require.NoError(t, err)
	require.Equal(t, "/api/v3/files/"+sha, (*reqs)[0].URL.Path)
	require.Equal(t, testAPIKey, (*reqs)[0].Header.Get("x-apikey"))

	out := got.(vtOut)
	require.Equal(t, sha, out.Resource)
	require.Equal(t, sha, out.SHA256)
	require.Equal(t, "eicar.com", out.MeaningfulName)
	require.Equal(t, "DOS COM", out.TypeDescription)
	require.Equal(t, int64(68), out.Size)
	require.Equal(t, []string{"eicar.com", "eicar.com.txt", "EICAR", "test.com", "eicar_com.zip"}, out.Names)
	require.Len(t, out.Tags, vtMaxTags)
	require.Equal(t, "showing 10 of 12 tags, 5 of 7 names; 4 omitted", out.Note)
	require.Equal(t, "2006-05-22T12:42:02Z", out.FirstSubmissionDate)
	require.Equal(t, "virus.eicar/test", out.ThreatLabel)
	require.Equal(t, &vtStats{Malicious: 62, Undetected: 12, Timeout: 1}, out.Stats)
	require.Len(t, out.Flagged, vtMaxFlagged)
	require.Equal(t, 52, out.FlaggedByMore)
	require.Equal(t, "https://www.virustotal.com/gui/file/"+sha, out.Link)

	b := toJSON(t, got)
	require.NotContains(t, string(b), "sandbox_verdicts")
	require.Less(t, len(b), 3000)
	t.Logf("REPORT virustotal_lookup file (62 engines flagged) shaped result, %d bytes: %s", len(b), b)

	// MD5 and SHA-1 are accepted too.
	for _, h := range []string{"44d88612fea8a8f36de82e1278abb02f", "3395856ce81f2b7382dee72602f798b642f14140"} {
		_, err := newVirusTotal(c).Call(context.Background(), map[string]any{"resource_type": "file", "resource": h})
		require.NoError(t, err)
		require.Equal(t, "/api/v3/files/"+h, (*reqs)[len(*reqs)-1].URL.Path)
	}
}

// Long tag and category lists are cut, and the note says what was left out;
// blank and repeated entries do not count.
func TestVirusTotalOmittedCategoriesAndTags(t *testing.T) {
	var cats, tags []string
	for i := range 11 {
		cats = append(cats, fmt.Sprintf(`"Vendor%02d": "category %02d"`, i, i))
	}
	cats = append(cats, `"Dup": "Category 00"`, `"Blank": " "`)
	for i := range 14 {
		tags = append(tags, fmt.Sprintf(`"tag%02d"`, i))
	}
	tags = append(tags, `""`, `"  "`)
	body := `{"data": {"id": "evil.example.com", "type": "domain", "attributes": {
	  "categories": {` + strings.Join(cats, ", ") + `}, "tags": [` + strings.Join(tags, ", ") + `]}}}`
	c, _ := fakeProviderAs(t, "VirusTotal", "x-apikey", respond(200, body))
	got, err := newVirusTotal(c).Call(context.Background(), map[string]any{"resource_type": "domain", "resource": "evil.example.com"})
	require.NoError(t, err)
	out := got.(vtOut)
	require.Len(t, out.Categories, vtMaxCategories)
	require.Equal(t, "category 00", out.Categories[0])
	require.Len(t, out.Tags, vtMaxTags)
	require.Equal(t, "showing 10 of 14 tags, 8 of 11 categories; 7 omitted", out.Note)

	// Exactly at the caps: nothing omitted, no note.
	body = `{"data": {"id": "evil.example.com", "type": "domain", "attributes": {
	  "categories": {` + strings.Join(cats[:vtMaxCategories], ", ") + `}, "tags": [` + strings.Join(tags[:vtMaxTags], ", ") + `]}}}`
	c, _ = fakeProviderAs(t, "VirusTotal", "x-apikey", respond(200, body))
	got, err = newVirusTotal(c).Call(context.Background(), map[string]any{"resource_type": "domain", "resource": "evil.example.com"})
	require.NoError(t, err)
	require.Empty(t, got.(vtOut).Note)
	require.NotContains(t, string(toJSON(t, got)), `"note"`)
}

func TestVirusTotalNotFound(t *testing.T) {
	notFound := respond(404, `{"error": {"code": "NotFoundError", "message": "Resource not found."}}`)
	cases := []struct{ kind, res, note string }{
		{"file", "44d88612fea8a8f36de82e1278abb02f", "VirusTotal has no report for this file hash"},
		{"url", "https://evil.example.com/x", "VirusTotal has no report for this URL"},
		{"domain", "evil.example.com", "VirusTotal has no report for this domain"},
		{"ip", "198.51.100.23", "VirusTotal has no report for this IP address"},
	}
	for _, tc := range cases {
		c, reqs := fakeProviderAs(t, "VirusTotal", "x-apikey", notFound)
		got, err := newVirusTotal(c).Call(context.Background(), map[string]any{"resource_type": tc.kind, "resource": tc.res})
		require.NoError(t, err, tc.kind)
		require.Len(t, *reqs, 1)
		out := got.(vtOut)
		require.False(t, out.Found)
		require.Equal(t, tc.kind, out.ResourceType)
		require.Equal(t, tc.res, out.Resource)
		require.Contains(t, out.Note, tc.note)
		require.Nil(t, out.Stats)
		if tc.kind == "file" {
			b := toJSON(t, got)
			require.Contains(t, string(b), `"found":false`)
			t.Logf("REPORT virustotal_lookup (404) shaped result, %d bytes: %s", len(b), b)
		}
	}
}

func TestVirusTotalBadArguments(t *testing.T) {
	c, reqs := fakeProviderAs(t, "VirusTotal", "x-apikey", respond(200, `{"data": {"attributes": {}}}`))
	tool := newVirusTotal(c)
	cases := []struct {
		kind any
		res  any
		want string
	}{
		{nil, "198.51.100.23", `missing required argument "resource_type"`},
		{"ip", nil, `missing required argument "resource"`},
		{"ip", "", `"resource" must not be empty`},
		{"email", "a@example.com", "resource_type must be ip, domain, url or file"},
		{"ip", "999.1.1.1", "is not an IP address"},
		{"ip", "198.51.100.0/24", "is not an IP address"},
		{"ip", "evil.example.com", "is not an IP address"},
		{"domain", "https://evil.example.com", "is not a bare domain"},
		{"domain", "evil.example.com/login", "is not a bare domain"},
		{"domain", "localhost", "is not a domain name"},
		{"domain", "evil..example.com", "is not a domain name"},
		{"domain", "evil.example.com:8080", "is not a domain name"},
		{"domain", "bad name.example.com", "is not a domain name"},
		{"domain", "198.51.100.23", `use resource_type "ip"`},
		{"url", "evil.example.com/login", "is not an http(s) URL"},
		{"url", "ftp://evil.example.com/a", "is not an http(s) URL"},
		{"url", "https:///nohost", "is not an http(s) URL"},
		{"file", "abc123", "is not an MD5, SHA-1 or SHA-256 hash"},
		{"file", strings.Repeat("a", 63), "is not an MD5, SHA-1 or SHA-256 hash"},
		{"file", strings.Repeat("z", 32), "is not an MD5, SHA-1 or SHA-256 hash"},
		{"file", "../../ip_addresses/1.2.3.4", "is not an MD5, SHA-1 or SHA-256 hash"},
		{"file", 42.0, `"resource" must be a string`},
		{"ip", strings.Repeat("1", 3000), `"resource" is too long`},
	}
	for _, tc := range cases {
		args := map[string]any{}
		if tc.kind != nil {
			args["resource_type"] = tc.kind
		}
		if tc.res != nil {
			args["resource"] = tc.res
		}
		_, err := tool.Call(context.Background(), args)
		assertRejection(t, err, tc.want)
	}
	require.Empty(t, *reqs, "bad arguments must be rejected before any request")
}

func TestVirusTotalErrors(t *testing.T) {
	call := func(h http.HandlerFunc) error {
		c, reqs := fakeProviderAs(t, "VirusTotal", "x-apikey", h)
		_, err := newVirusTotal(c).Call(context.Background(), map[string]any{"resource_type": "domain", "resource": "evil.example.com"})
		require.Len(t, *reqs, 1)
		return err
	}
	assertRateLimited(t, call(respond(429, `{"error": {"code": "QuotaExceededError", "message": "Quota exceeded"}}`, "Retry-After", "7")), 7*time.Second)

	err := call(respond(401, `{"error": {"code": "WrongCredentialsError", "message": "Wrong API key"}}`))
	assertRefused(t, err, upstream.CredentialsRejected, "API key rejected by VirusTotal")
	require.NotContains(t, err.Error(), testAPIKey)
	assertRefused(t, call(respond(403, `{"error": {"code": "ForbiddenError", "message": "Forbidden"}}`)), upstream.CredentialsRejected, "API key rejected by VirusTotal")

	err = call(respond(500, `{"error": {"code": "TransientError", "message": "Try again later"}}`))
	assertRetryable(t, err)
	require.Contains(t, err.Error(), "VirusTotal is unavailable (HTTP 500)")

	err = call(respond(200, `<html>not json</html>`))
	assertRetryable(t, err)

	assertRefused(t, call(respond(400, `{"error": {"code": "InvalidArgumentError", "message": "Domain \"evil.example.com\" is not a valid domain pattern"}}`)), upstream.BadRequest, "not a valid domain pattern")
}
