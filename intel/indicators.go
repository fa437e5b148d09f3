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
// URL that climbs out of its API path. Hosts inside URLs and domains are
// checked in hosts.go, URLScan queries in urlscan_query.go.

// The ranges no provider is asked about are the entries of IANA's IPv4 and
// IPv6 Special-Purpose Address Registries whose "Globally Reachable" is
// False (https://www.iana.org/assignments/iana-ipv4-special-registry,
// https://www.iana.org/assignments/iana-ipv6-special-registry), plus IPv4
// multicast and, for IPv6, everything outside global unicast 2000::/3
// (IANA's IPv6 Address Space registry: the rest is reserved, unique-local,
// link-local, site-local or multicast). Left allowed on purpose: the
// documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
// 2001:db8::/32, 3fff::/20), which name no real network and which examples
// and tests use, and the few globally reachable anycast entries (AS112,
// AMT). A few globally reachable addresses inside 192.0.0.0/24 and
// 2001::/23 (PCP and TURN anycast, ORCHIDv2) are refused with their block:
// no provider has intelligence about them.
var (
	nonPublicV4 = prefixes(
		"0.0.0.0/8",      // this network (RFC 791)
		"10.0.0.0/8",     // private (RFC 1918)
		"100.64.0.0/10",  // shared address space, CGNAT (RFC 6598)
		"127.0.0.0/8",    // loopback (RFC 1122)
		"169.254.0.0/16", // link-local (RFC 3927)
		"172.16.0.0/12",  // private (RFC 1918)
		"192.0.0.0/24",   // IETF protocol assignments, DS-Lite, NAT64 discovery (RFC 6890, 6333, 7050)
		"192.168.0.0/16", // private (RFC 1918)
		"198.18.0.0/15",  // benchmarking (RFC 2544)
		"224.0.0.0/4",    // multicast (RFC 5771)
		"240.0.0.0/4",    // reserved and limited broadcast (RFC 1112, 919)
	)
	globalUnicastV6 = netip.MustParsePrefix("2000::/3")
	nonPublicV6     = prefixes(
		"2001::/23", // IETF protocol assignments: Teredo 2001::/32, benchmarking 2001:2::/48, ORCHID (RFC 2928, 4380, 5180, 7343)
	)
	// IPv6 forms that carry an IPv4 address: NAT64 (last 32 bits) and 6to4
	// (bits 16-47), checked as that IPv4 address. IPv4-mapped ::ffff:a.b.c.d
	// is unmapped first. Local-use NAT64 64:ff9b:1::/48 (RFC 8215) is
	// outside 2000::/3, so refused.
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
	return !ok || nonPublicAddr(a)
}

// nonPublicAddr is nonPublic for a netip.Addr; a zone is ignored.
func nonPublicAddr(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return nonPublicAddr(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(a):
			return nonPublicAddr(netip.AddrFrom4([4]byte(b[2:6])))
		case !globalUnicastV6.Contains(a):
			return true
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

// overlapsNonPublic reports whether any address of p is non-public (a
// CIDR value in a search query).
func overlapsNonPublic(p netip.Prefix) bool {
	p = p.Masked()
	if p.Addr().Is4In6() {
		return true // a mapped prefix is refused rather than unmapped bit by bit
	}
	if p.Addr().Is6() {
		if !globalUnicastV6.Contains(p.Addr()) || p.Bits() < globalUnicastV6.Bits() || p.Overlaps(nat64) || p.Overlaps(sixToFour) {
			return true // 6to4 and NAT64 prefixes carry IPv4 ranges: refused whole
		}
	}
	ranges := nonPublicV6
	if p.Addr().Is4() {
		ranges = nonPublicV4
	}
	for _, r := range ranges {
		if p.Overlaps(r) {
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
		return nil, tools.Reject("%q is not an IP address (expected something like \"198.51.100.23\" or \"2001:db8::7\")", clip.String(s, 80))
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

// rejectPassword refuses text (a URL, or a query holding URLs) whose URL
// gives a password before its host (https://user:password@host/): it would
// go to a third party, and into any error quoting the text. A bare user@
// stays allowed, as phishing lures use it. The text is not quoted.
func rejectPassword(what, provider, s string) error {
	if urlPassword(s) {
		return tools.Reject("the %s has a URL with a password (user:password@ before the host), which is not sent to %s; "+
			"retry with the URL without the password (user@host or host alone)", what, provider)
	}
	return nil
}

// urlPassword says s holds a URL authority with a password: after every
// "//", and after a special scheme written without slashes
// (http:user:pw@host, which URL parsers read as http://user:pw@host),
// the text up to the next / ? # backslash, quote or space has a ':' before its '@'.
func urlPassword(s string) bool {
	var starts []int
	for i := 0; ; {
		j := strings.Index(s[i:], "//")
		if j < 0 {
			break
		}
		i += j + 2
		starts = append(starts, i)
	}
	low := strings.ToLower(s)
	for _, scheme := range []string{"http:", "https:", "ftp:", "ws:", "wss:"} {
		for i := 0; ; {
			j := strings.Index(low[i:], scheme)
			if j < 0 {
				break
			}
			i += j + len(scheme)
			starts = append(starts, i)
		}
	}
	for _, st := range starts {
		auth := s[st:]
		if k := strings.IndexAny(auth, "/?#\\\" \t\r\n"); k >= 0 {
			auth = auth[:k]
		}
		if at := strings.LastIndex(auth, "@"); at > 0 && strings.Contains(auth[:at], ":") {
			return true
		}
	}
	return false
}
