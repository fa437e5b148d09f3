package intel

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/tools"
)

// A URL argument with a ".." path segment, plain or percent-encoded, is
// refused before any request; a URL that merely holds dots is not.
func TestDotDotURLsAreRefused(t *testing.T) {
	bad := []string{
		"https://evil.example.com/../../api/v1/users/me",
		"https://evil.example.com/a/..",
		"https://evil.example.com/%2e%2e/admin",
		"https://evil.example.com/%2E%2e/admin",
		"https://evil.example.com/.%2e/admin",
		"https://evil.example.com/%252e%252e/admin", // encoded twice
		"https://x.example/%25252e%25252e/api",      // three times
		"https://x.example/%2525252e%2525252e/api",  // four times: every decoding is checked
		"https://evil.example.com/a%2f..%2fadmin",
		"https://evil.example.com/a\\..\\admin",
		"https://evil.example.com/..?next=1",
		"https://evil.example.com/%zz/%2e%2e/x", // a bad escape does not stop the decoding
	}
	good := []string{"https://evil.example.com/a..b/file...txt", "https://evil.example.com/login.php?next=/admin", "https://evil.example.com/%2e/x"}
	refuseURLs(t, bad, `has a ".." path segment`, "no request for a URL with a .. segment", nil, good)
}

// A URL giving a password before its host is refused, before any request
// and without quoting it (OTX had it in the path, VirusTotal in base64); a
// bare user@, as phishing lures use, is sent.
func TestURLPasswordsAreRefused(t *testing.T) {
	bad := []string{
		"https://svc-backup:S3cretPassw0rd@files.example.com/export",
		"http://admin:S3cretPassw0rd@evil.example.com",
		"https://u:S3cretPassw0rd@evil.example.com@files.example.com/",
		"https://svc:S3cretPassw0rd@files.example.com/../x", // before the .. refusal quotes it
		"https:svc:S3cretPassw0rd@files.example.com/",
	}
	good := []string{"https://paypal.com@evil.example.com/login", "https://evil.example.com/a?next=b:c@d"}
	refuseURLs(t, bad, "retry with the URL without the password", "no request for a URL with a password",
		func(t *testing.T, err error) { require.NotContains(t, err.Error(), "S3cret") }, good)
}

// refuseURLs calls each tool that takes a URL (urlCalls) with every bad
// URL, refused saying want (and passing check, if given) with no request
// (else failing with noRequest), then with every good one, each sent.
func refuseURLs(t *testing.T, bad []string, want, noRequest string, check func(*testing.T, error), good []string) {
	t.Helper()
	for _, c := range urlCalls {
		t.Run(c.tool, func(t *testing.T) {
			fake, reqs := fakeProvider(t, respond(200, `{}`))
			tool := configuredTool(t, c.cfg(Provider{APIKey: testAPIKey, BaseURL: fake.baseURL}), fake.http, c.tool)
			for _, u := range bad {
				_, err := tool.Call(context.Background(), c.args(u))
				assertRejection(t, err, want)
				if check != nil {
					check(t, err)
				}
			}
			require.Empty(t, *reqs, noRequest)
			for _, u := range good {
				_, err := tool.Call(context.Background(), c.args(u))
				require.NoError(t, err, u)
			}
			require.Len(t, *reqs, len(good))
		})
	}
}

// A refusal quotes its argument clipped: a 200 KiB indicator was quoted
// whole into the tool's error.
func TestRefusalsClipTheirArguments(t *testing.T) {
	big := strings.Repeat("A", 200<<10)
	fake, reqs := fakeProvider(t, respond(200, `{}`))
	p := Provider{APIKey: testAPIKey, BaseURL: fake.baseURL}
	otx := configuredTool(t, Config{OTX: p}, fake.http, "query_otx")
	abuse := configuredTool(t, Config{AbuseIPDB: p}, fake.http, "abuseipdb_check")
	for _, call := range []struct {
		tool tools.Tool
		args map[string]any
	}{
		{otx, map[string]any{"indicator": big, "indicator_type": "domain"}},
		{otx, map[string]any{"indicator": big, "indicator_type": "IPv4"}},
		{otx, map[string]any{"indicator": big, "indicator_type": "file"}},
		{otx, map[string]any{"indicator": "https://" + big, "indicator_type": "url"}},
		{otx, map[string]any{"indicator": "evil.example.com", "indicator_type": big}},
		{otx, map[string]any{"indicator": "evil.example.com", "indicator_type": "domain", "section": big}},
		{abuse, map[string]any{"ip": big}},
	} {
		_, err := call.tool.Call(context.Background(), call.args)
		require.Error(t, err)
		require.Less(t, len(err.Error()), 400, "%.200s", err)
	}
	require.Empty(t, *reqs)
}

// No provider is asked about an address that is not public: private,
// shared (CGNAT), this-network, loopback, link-local, multicast, reserved,
// unique-local, and the IPv6 forms of private IPv4 addresses.
func TestNonPublicAddressesAreRefused(t *testing.T) {
	private := []string{
		"10.1.2.3", "172.16.0.1", "192.168.1.20", "127.0.0.1", "169.254.169.254",
		"100.64.0.1", "100.127.255.254", // CGNAT
		"0.0.0.0", "0.1.2.3", // this network
		"224.0.0.1", "240.0.0.1", "255.255.255.255",
		"::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "fec0::1", "ff02::1",
		"::ffff:10.1.2.3", "::ffff:100.64.0.1", "::ffff:127.0.0.1", // IPv4-mapped
		"::10.1.2.3",        // IPv4-compatible (deprecated)
		"64:ff9b::10.1.2.3", // NAT64 of a private address
		"2002:c0a8:0114::1", // 6to4 of 192.168.1.20
		"2002:6440:0001::1", // 6to4 of 100.64.0.1
		// IANA special-purpose registries, not globally reachable:
		"192.0.0.1", "192.0.0.170", // IETF protocol assignments
		"198.18.0.1", "198.19.255.254", // benchmarking
		"64:ff9b:1::a01:203",                              // local-use IPv4/IPv6 translation
		"2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", // Teredo
		"2001:2::1",                // benchmarking
		"2001:10::1", "2001:20::1", // ORCHID
		"100::1",                      // discard-only
		"5f00::1",                     // SRv6 SIDs
		"4000::1", "::ffff:0:a01:203", // outside global unicast 2000::/3
	}
	public := []string{"198.51.100.23", "8.8.8.8", "100.63.255.255", "100.128.0.0", "1.0.0.1",
		"192.0.1.1", "198.17.255.255", "198.20.0.1",
		"2001:db8::7", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:0808:0808::1",
		"2001:200::1", "2a00:1450::1", "3fff::1"}
	for _, s := range private {
		require.True(t, nonPublic(net.ParseIP(s)), s)
	}
	for _, s := range public {
		require.False(t, nonPublic(net.ParseIP(s)), s)
	}

	// Every tool that takes an IP refuses them before any request.
	calls := []struct {
		tool string
		cfg  func(Provider) Config
		args func(ip string) map[string]any
	}{
		{"abuseipdb_check", func(p Provider) Config { return Config{AbuseIPDB: p} },
			func(ip string) map[string]any { return map[string]any{"ip": ip} }},
		{"virustotal_lookup", func(p Provider) Config { return Config{VirusTotal: p} },
			func(ip string) map[string]any { return map[string]any{"resource_type": "ip", "resource": ip} }},
		{"query_otx", func(p Provider) Config { return Config{OTX: p} },
			func(ip string) map[string]any {
				typ := "IPv6"
				if !strings.Contains(ip, ":") {
					typ = "IPv4"
				}
				return map[string]any{"indicator": ip, "indicator_type": typ}
			}},
	}
	for _, c := range calls {
		t.Run(c.tool, func(t *testing.T) {
			fake, reqs := fakeProvider(t, respond(200, `{}`))
			tool := configuredTool(t, c.cfg(Provider{APIKey: testAPIKey, BaseURL: fake.baseURL}), fake.http, c.tool)
			for _, ip := range []string{"100.64.0.1", "0.0.0.0", "::ffff:10.1.2.3", "fd00::1", "fe80::1"} {
				_, err := tool.Call(context.Background(), c.args(ip))
				assertRejection(t, err, "private, loopback, link-local or multicast")
			}
			require.Empty(t, *reqs)
		})
	}
}

// urlCalls are the tools that take a URL: each with the config that turns
// it on and the arguments that send u.
var urlCalls = []struct {
	tool string
	cfg  func(Provider) Config
	args func(u string) map[string]any
}{
	{"query_otx", func(p Provider) Config { return Config{OTX: p} },
		func(u string) map[string]any { return map[string]any{"indicator": u, "indicator_type": "url"} }},
	{"virustotal_lookup", func(p Provider) Config { return Config{VirusTotal: p} },
		func(u string) map[string]any { return map[string]any{"resource_type": "url", "resource": u} }},
	{"urlscan_search", func(p Provider) Config { return Config{URLScan: p} },
		func(u string) map[string]any { return map[string]any{"query": `task.url:"` + u + `"`} }},
}
