package intel

import (
	"net"
	"net/netip"
	"strings"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/tools"
)

// Checks of the indicators a model passes to a provider: the provider must
// never be asked about an internal address (that would tell it what the
// network looks like, and it knows nothing about it anyway), nor be sent a
// URL that climbs out of its API path.

// nonPublicV4 and nonPublicV6 are the ranges no provider is asked about:
// this network, private, shared (CGNAT), loopback, link-local, multicast and
// reserved, site-local, unique-local. The documentation ranges
// (198.51.100.0/24, 2001:db8::/32, ...) stay allowed: examples use them.
var (
	nonPublicV4 = prefixes("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4")
	nonPublicV6 = prefixes("::/96", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8")
	// IPv6 forms that carry an IPv4 address: NAT64 (last 32 bits) and 6to4
	// (bits 16-47). IPv4-mapped ::ffff:a.b.c.d is unmapped first.
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// nonPublic reports whether ip is in a range no provider is asked about,
// also when written as an IPv6 form of such an IPv4 address.
func nonPublic(ip net.IP) bool {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return true
	}
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return nonPublic(net.IP(b[12:16]))
		case sixToFour.Contains(a):
			return nonPublic(net.IP(b[2:6]))
		}
	}
	ranges := nonPublicV6
	if a.Is4() {
		ranges = nonPublicV4
	}
	for _, p := range ranges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// rejectNonPublic refuses an address no provider is asked about.
func rejectNonPublic(ip net.IP) error {
	if nonPublic(ip) {
		return tools.Reject("%s is a private, loopback, link-local or multicast address (or another range not routed on the Internet, such as shared CGNAT space); "+
			"threat intelligence has no data about it. Investigate it in internal logs instead", ip)
	}
	return nil
}

// parseLookupIP parses an IP for a threat-intelligence lookup, refusing
// addresses no provider can know anything about.
func parseLookupIP(s string) (net.IP, error) {
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, tools.Reject("%q is not an IP address (expected something like \"198.51.100.23\" or \"2001:db8::7\")", s)
	}
	return ip, rejectNonPublic(ip)
}

// rejectDotDot refuses text (a URL, or a query holding URLs) with a ".."
// path segment, written plainly or percent-encoded any number of times
// (%2e%2e, %252e%252e, ...): a provider, or a proxy before it, that decodes
// it could resolve it to another API path, sent with the API key. Every
// decoding is checked until one no longer changes the text; each change
// shortens it, so this ends.
func rejectDotDot(what, orig string) error {
	for s := orig; ; {
		if hasDotDotSegment(s) {
			return tools.Reject("%s %q has a \"..\" path segment (plain or percent-encoded); give it without one", what, clip.String(orig, 200))
		}
		d := percentDecode(s)
		if d == s {
			return nil
		}
		s = d
	}
}

// hasDotDotSegment reports whether s has ".." between separators of a path,
// a query or the query language around a URL.
func hasDotDotSegment(s string) bool {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune("/\\?#&=;:,\"'()[]{} \t\r\n", r) }) {
		if f == ".." {
			return true
		}
	}
	return false
}

// percentDecode decodes each valid %XX escape and keeps anything else as it
// is (url.PathUnescape gives up on the whole string at one bad escape).
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// refang undoes the usual defanging of indicators: 198.51.100[.]23, hxxp://.
func refang(s string) string {
	s = strings.TrimSpace(s)
	s = strings.NewReplacer("[.]", ".", "(.)", ".", "{.}", ".", "[dot]", ".", "[:]", ":", "[://]", "://").Replace(s)
	lower := strings.ToLower(s)
	for _, p := range []string{"hxxps://", "hxxp://"} {
		if strings.HasPrefix(lower, p) {
			s = "http" + s[4:]
			break
		}
	}
	return s
}

// canonicalEnum matches v case-insensitively against allowed.
func canonicalEnum(v string, allowed []string) (string, bool) {
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return a, true
		}
	}
	return "", false
}
