package intel

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// noData is in every refusal of an internal address or name.
const noData = "threat intelligence has no data about"

// internalURLs hold an internal address or name as their host, in the
// forms URL parsers and resolvers accept.
var internalURLs = []string{
	"http://10.20.30.40/admin",
	"http://169.254.169.254/latest/meta-data/",
	"https://192.168.1.20:8443/login",
	"http://user:pw@10.0.0.1/",          // userinfo before an internal host
	"http://evil.example.com@10.0.0.1/", // the host is the part after the last @
	"http://2130706433/",                // 127.0.0.1 as one decimal integer
	"http://0x7f000001/",                // ... in hex
	"http://017700000001/",              // ... in octal
	"http://0x7f.1/",                    // two parts, hex
	"http://127.1/",                     // two parts
	"http://10.1.2/",                    // three parts
	"http://0177.0.0.01/",               // octal parts
	"http://10.0.0.1./",                 // trailing dot
	"http://[::1]/",                     // IPv6 loopback
	"http://[fd00::1]:8080/",            // unique-local
	"http://[fe80::1%25eth0]/",          // link-local with a zone
	"http://[::ffff:10.0.0.1]/",         // IPv4-mapped
	"http://[::ffff:a00:1]/",            // IPv4-mapped, hex
	"http://[64:ff9b::a00:1]/",          // NAT64 of 10.0.0.1
	"http://１０．０．０．１/",                  // full-width digits and dots (IDNA maps them)
	"http://198.18.0.1/",                // benchmarking
	"http://0/",                         // 0.0.0.0
	"http://dc01.corp.local/share",
	"http://intranet/",                 // a single label
	"http://localhost:8080/",           // a single label
	"http://app.localhost/",            // RFC 6761
	"http://wiki.internal/",            // ICANN's private-use TLD
	"http://fileserver.corp/",          // de-facto internal
	"http://nas.home/",                 // de-facto internal
	"http://router.home.arpa/",         // RFC 8375
	"http://printer.lan/",              // de-facto internal
	"http://portal.intranet/",          // de-facto internal
	"http://vault.private/",            // de-facto internal
	"http://20.30.20.10.in-addr.arpa/", // a reverse name carries an internal IP
	"http://staging.test/",             // RFC 6761
	"http://x.invalid/",                // RFC 6761
	"http://DC01.CORP.LOCAL./",         // upper case, trailing dot
	"http://host.localdomain/",         // de-facto internal
	"http://999.1.1.1/",                // ends in a number but is no IPv4 address
}

// publicURLs are sent.
var publicURLs = []string{
	"https://evil.example.com/login.php",
	"http://198.51.100.23/x",
	"http://134744072/", // 8.8.8.8 as one integer: public, asked about
	"http://[2606:4700::1111]/",
	"https://xn--80ak6aa92e.com/", // punycode
	"https://пример.рф/",          // IDN
	"https://login.microsoftonline.com.evil.example/a?b=c",
	"http://a_b.example.com/",
}

// No URL whose host is an internal address or name reaches a provider; it
// was sent with the API key (VirusTotal /api/v3/urls/<b64 of
// http://10.20.30.40/admin>, OTX /indicators/url/http:%2F%2F169.254...).
func TestInternalHostsInURLsAreRefused(t *testing.T) {
	for _, c := range urlCalls {
		t.Run(c.tool, func(t *testing.T) {
			fake, reqs := fakeProvider(t, respond(200, `{}`))
			tool := configuredTool(t, c.cfg(Provider{APIKey: testAPIKey, BaseURL: fake.baseURL}), fake.http, c.tool)
			for _, u := range internalURLs {
				_, err := tool.Call(context.Background(), c.args(u))
				assertRejection(t, err, "")
				require.Empty(t, *reqs, "sent %s", u)
			}
			for _, u := range publicURLs {
				_, err := tool.Call(context.Background(), c.args(u))
				require.NoError(t, err, u)
			}
			require.Len(t, *reqs, len(publicURLs))
		})
	}
}

// The refusal says why, in one sentence the model can act on.
func TestInternalHostRefusalsSayWhy(t *testing.T) {
	fake, reqs := fakeProvider(t, respond(200, `{}`))
	tool := configuredTool(t, Config{VirusTotal: Provider{APIKey: testAPIKey, BaseURL: fake.baseURL}}, fake.http, "virustotal_lookup")
	_, err := tool.Call(context.Background(), map[string]any{"resource_type": "url", "resource": "http://0x7f000001/"})
	assertRejection(t, err, "127.0.0.1 is a private, loopback, link-local or multicast address")
	assertRejection(t, err, noData)
	_, err = tool.Call(context.Background(), map[string]any{"resource_type": "url", "resource": "http://dc01.corp.local/"})
	assertRejection(t, err, `"dc01.corp.local" is an internal host name`)
	assertRejection(t, err, noData)
	require.Empty(t, *reqs)
}

// Internal names given as a domain or hostname are refused too: they passed
// the syntax checks (dc01.corp.local is well-formed).
func TestInternalHostNamesAreRefused(t *testing.T) {
	names := []string{"dc01.corp.local", "wiki.internal", "app.localhost", "nas.home", "router.home.arpa",
		"printer.lan", "portal.intranet", "vault.private", "staging.test", "x.invalid", "fileserver.corp",
		"1.20.168.192.in-addr.arpa", "host.localdomain", "DC01.CORP.LOCAL.",
		"127.1", "10.1.2", "0x7f.1"} // numeric last labels are addresses, never domains
	calls := []struct {
		tool string
		cfg  func(Provider) Config
		args func(d string) map[string]any
	}{
		{"query_otx", func(p Provider) Config { return Config{OTX: p} },
			func(d string) map[string]any { return map[string]any{"indicator": d, "indicator_type": "domain"} }},
		{"query_otx", func(p Provider) Config { return Config{OTX: p} },
			func(d string) map[string]any { return map[string]any{"indicator": d, "indicator_type": "hostname"} }},
		{"virustotal_lookup", func(p Provider) Config { return Config{VirusTotal: p} },
			func(d string) map[string]any { return map[string]any{"resource_type": "domain", "resource": d} }},
	}
	for _, c := range calls {
		t.Run(c.tool, func(t *testing.T) {
			fake, reqs := fakeProvider(t, respond(200, `{}`))
			tool := configuredTool(t, c.cfg(Provider{APIKey: testAPIKey, BaseURL: fake.baseURL}), fake.http, c.tool)
			for _, d := range names {
				_, err := tool.Call(context.Background(), c.args(d))
				assertRejection(t, err, "")
				require.Empty(t, *reqs, "sent %s", d)
			}
			for _, d := range []string{"evil.example.com", "xn--80ak6aa92e.com", "a-b.co.uk"} {
				_, err := tool.Call(context.Background(), c.args(d))
				require.NoError(t, err, d)
			}
			require.Len(t, *reqs, 3)
		})
	}
}

// A URLScan search naming an internal address or name in any term is
// refused; page.ip:192.168.1.20 was sent.
func TestURLScanQueriesNamingInternalAddressesAreRefused(t *testing.T) {
	bad := []string{
		"page.ip:192.168.1.20",
		"ip:10.20.30.40",
		`ip:"10.20.30.40"`,
		`page.ip:"169.254.169.254"`,
		"10.20.30.40",                          // a bare term
		"domain:evil.example.com OR 10.1.2.3",  // one term of several
		"(page.ip:8.8.8.8 AND ip:172.16.5.4)",  // inside parentheses
		"page.ip:10.0.0.0/8",                   // CIDR
		`ip:"10.20.30.0/24"`,                   // quoted CIDR
		`page.ip:10.20.30.0\/24`,               // escaped CIDR
		"ip:0.0.0.0/0",                         // a CIDR holding private ranges
		"ip:8.0.0.0/6",                         // 8.0.0.0-11.255.255.255 holds 10/8
		"page.ip:[10.0.0.0 TO 10.255.255.255]", // a range
		"page.ip:[9.0.0.0 TO 11.0.0.0]",        // a range holding 10/8
		"page.ip:>=8.8.8.8",                    // an open range
		"page.ip:10.20.*",                      // a wildcard in 10/8
		"ip:fd00\\:\\:1",                       // IPv6, escaped
		`ip:"fe80::1"`,                         // IPv6, quoted
		"ip:[::ffff:10.0.0.1]",                 // IPv4-mapped
		"page.ip:2130706433",                   // an integer in an IP field
		"domain:dc01.corp.local",               // internal names
		"page.domain:wiki.internal",            //
		`page.domain:"printer.lan"`,            //
		"domain:*.corp.local",                  // wildcard, internal TLD
		"domain:intranet",                      // single label in a domain field
		"dc01.corp.local",                      // bare
		"server:nginx AND hostname:nas.home",   //
		`task.url:"http://10.0.0.1/admin"`,     // a URL's host
		`page.url:"https://dc01.corp.local/x"`, //
		"foo.corp:8080",                        // a name with a port
		"page.domain:dc01.internal:443",        //
		`page.url:"vault.lan:8200/ui"`,         // host:port/path without a scheme
		"foo\u3002corp",                        // an ideographic full stop
		"page.url:foo\u3002corp/x",             //
		`page.url:http\://169.254.169.254/`,    // escaped, unquoted URL
		"page.ip:10.0.0.1:8080",                // with a port
		"ip:010.000.000.001",                   // leading zeros
		"page.ptr:20.30.20.10.in-addr.arpa",    // a reverse name
		"domain:router.home.arpa",              //
		"ip:１０.０.０.１",                          // full-width digits
		"ip:198.18.0.1",                        // benchmarking
		"page.ip:10.0.0.1^2",                   // boosted
		"domain:dc01.corp.local~",              // fuzzy
		"page.url:*dc01.corp.local*",           // wildcards around a name
		"page.url:*10.0.0.1*",                  // wildcards around an address
		`domain:/.*\.corp\.local/`,             // a regular expression
		`page.ip:/10\.0\.0\.1/`,                // a regular expression
		"page.ip:[167772160 TO 167772170]",     // integers in an IP field
		`"10.0.0.1"`,                           // quoted, bare
		"-ip:10.0.0.1",                         // negated: still names it
	}
	good := []string{
		"domain:evil.example.com",
		"page.ip:198.51.100.23",
		`page.ip:"8.8.8.0/24"`,
		"page.ip:[8.8.8.0 TO 8.8.8.255]",
		"page.status:200 AND page.server:nginx",
		"hash:" + "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12",
		`task.url:"https://evil.example.com/login.php"`,
		"page.asn:AS15169 AND date:>now-7d",
		"domain:paypal.* AND NOT page.domain:paypal.com",
		"verdicts.malicious:true",
		"filename:setup.exe",
		"page.title:\"Sign in\"",
		"page.status:[200 TO 299]",
		"date:[now-7d TO *]",
		"page.title:/sign.?in/", // a regular expression on a text field
	}
	fake, reqs := fakeProvider(t, respond(200, `{"results": [], "total": 0}`))
	tool := configuredTool(t, Config{URLScan: Provider{APIKey: testAPIKey, BaseURL: fake.baseURL}}, fake.http, "urlscan_search")
	for _, q := range bad {
		_, err := tool.Call(context.Background(), map[string]any{"query": q})
		assertRejection(t, err, noData)
		require.Empty(t, *reqs, "sent %s", q)
	}
	for _, q := range good {
		_, err := tool.Call(context.Background(), map[string]any{"query": q})
		require.NoError(t, err, q)
	}
	require.Len(t, *reqs, len(good))
	require.Equal(t, good[0], (*reqs)[0].URL.Query().Get("q"))
}

// A host is read wherever a query term can name one, and wildcards,
// ports, escapes and percent-encoding around it do not hide it: each of
// these was sent to urlscan.io. A regular expression is searched only in
// text fields: which hosts it matches cannot be checked.
func TestURLScanQueriesHideNoInternalHost(t *testing.T) {
	bad := []string{
		`page.url:"http://10.0.0.1*"`,               // an address with a wildcard after "://"
		`page.url:*//169.254.169.254/*`,             // after "//" with no scheme
		`page.url:*//metadata.google.internal/*`,    //
		`page.url:*10.0.0.1:8080*`,                  // a port with a wildcard
		`page.url:/https?:\/\/10\.0\.0\.1.*/`,       // a regular expression's host
		`task.url:*//2130706433/*`,                  // an integer host after "//"
		`page.url:*//0x7f000001*`,                   // hex, with a wildcard
		`page.url:*//user@10.0.0.1*`,                // after userinfo
		`task.url:*//intranet/*`,                    // a single label as a URL's host
		`page.url:*//[fd00::1]*`,                    // IPv6 in brackets
		`page.url:*example.com/go?to=10.0.0.1*`,     // in a parameter
		`page.url:*%2F%2F10.0.0.1*`,                 // percent-encoded
		`page.url:*%2F%2Fmetadata.google.internal*`, //
		`page.url:*metadata.google.intern*`,         // a wildcard top-level domain matching .internal
		`page.domain:dc01.corp.local.*`,             // an internal name before any top-level domain
		`page.ip:fd00:*`,                            // an IPv6 wildcard
		`lists.ips:fe80\:\:*`,                       //
		`page.url:http\:\/\/10.0.0.1\/`,             // escaped
		`page.url:*.corp.local*`,                    //
	}
	regexes := []string{
		"domain:/.*paypal.*/", "/evil/", "page.url:/.*/", "-page.url:/x/", "page.url:(/x/)", "page.ip:/1.*/", `task.url:/https?:\/\/[a-z]+\.corp\.local\/.*/`,
	}
	good := []string{
		"page.url:*example.com*",
		`page.url:"https://evil.example.com:8443/login"`,
		"task.url:*//evil.example.com/*",
		"page.url:*example.com/page/1*",
		"page.url:*example.com/v1.2.3/*",
		"page.url:*example.com/?u=mailto:a@example.com*",
		"page.domain:paypal.*",
		`task.url:"http://admin@evil.example.com/"`, // a user before the host
		"page.ip:2a00:*",
		`filename:/setup.*\.exe/`,
		"page.title:/sign.?in/ AND page.url:*example.com*",
	}
	fake, reqs := fakeProvider(t, respond(200, `{"results": [], "total": 0}`))
	tool := configuredTool(t, Config{URLScan: Provider{APIKey: testAPIKey, BaseURL: fake.baseURL}}, fake.http, "urlscan_search")
	for _, q := range bad {
		_, err := tool.Call(context.Background(), map[string]any{"query": q})
		assertRejection(t, err, noData)
	}
	for _, q := range regexes {
		_, err := tool.Call(context.Background(), map[string]any{"query": q})
		assertRejection(t, err, "") // some name a host too, and say so first
	}
	_, err := tool.Call(context.Background(), map[string]any{"query": "domain:/.*paypal.*/"})
	assertRejection(t, err, "a regular expression on a field that may hold hosts")
	require.Empty(t, *reqs)
	for _, q := range good {
		_, err := tool.Call(context.Background(), map[string]any{"query": q})
		require.NoError(t, err, q)
	}
	require.Len(t, *reqs, len(good))
}
