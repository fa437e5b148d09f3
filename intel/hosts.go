package intel

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/tools"
)

// Hosts a provider is asked about, inside a URL or as a domain: an address
// in any form a URL parser or resolver reads must be public, and a name must
// end in a public-looking top-level domain. Structural, so that no
// spelling of an internal address or name gets through.

// internalTLDs are the last labels of names no provider is asked about:
// special-use names and the zones private networks use. The reasons are the
// values. Left allowed: .example (RFC 6761 documentation names, like the
// documentation address ranges; they name no network, and examples and
// tests use them) and .onion (Tor services, which providers do index).
var internalTLDs = map[string]string{
	"localhost":   "RFC 6761: loopback",
	"local":       "RFC 6762: multicast DNS on the local link",
	"test":        "RFC 6761: testing; often local development",
	"invalid":     "RFC 6761: never resolves",
	"arpa":        "home.arpa (RFC 8375) is a home network; in-addr.arpa and ip6.arpa names carry addresses",
	"internal":    "ICANN (2024): reserved for private use",
	"alt":         "RFC 9476: names outside the DNS",
	"corp":        "ICANN name collision: never delegated because private networks use it (SAC062)",
	"home":        "ICANN name collision: never delegated because private networks use it (SAC062)",
	"mail":        "ICANN name collision: never delegated because private networks use it (SAC062)",
	"lan":         "a private-network zone, not delegated in the root",
	"intranet":    "a private-network zone, not delegated in the root",
	"private":     "a private-network zone, not delegated in the root",
	"localdomain": "a private-network zone (default of many resolvers), not delegated in the root",
	"intra":       "a private-network zone, not delegated in the root",
	"priv":        "a private-network zone, not delegated in the root",
}

// rejectInternalHost refuses a URL's host (as url.URL.Hostname gives it)
// that is a non-public address, in any form, or an internal name.
func rejectInternalHost(host string) error {
	_, _, err := hostTarget(host)
	return err
}

// rejectInternalDomain refuses a domain argument that is an internal name,
// or an address in a numeric form (127.1, 0x7f.1), naming useType as the
// resource type to use for an address.
func rejectInternalDomain(d, useType string) error {
	a, isAddr, err := hostTarget(d)
	if err != nil {
		return err
	}
	if isAddr {
		return tools.Reject("%q is the IP address %s: use %s", clip.String(d, 80), a, useType)
	}
	return nil
}

// hostTarget reads host as a URL parser does: an IPv6 literal, an IPv4
// address in any of the forms the URL standard and inet_aton accept (when
// the last label is a number), or a name, mapped by IDNA when not ASCII.
// It refuses non-public addresses, hosts that are no valid address, and
// internal names.
func hostTarget(host string) (netip.Addr, bool, error) {
	h := strings.ToLower(strings.TrimSpace(host))
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil {
			return netip.Addr{}, false, tools.Reject("%q is neither a host name nor an IP address", clip.String(host, 80))
		}
		return a, true, rejectNonPublicAddr(a)
	}
	if !isASCII(h) {
		// What browsers and resolvers do: full-width digits and dots become
		// ASCII (１０．０．０．１ is 10.0.0.1), names become punycode.
		m, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return netip.Addr{}, false, tools.Reject("%q is not a valid host name", clip.String(host, 80))
		}
		h = m
	}
	h = strings.TrimSuffix(h, ".")
	if endsInNumber(h) {
		addrs, ok := looseIPv4(h)
		if !ok {
			return netip.Addr{}, false, tools.Reject("%q is neither a host name nor an IP address", clip.String(host, 80))
		}
		for _, a := range addrs {
			if err := rejectNonPublicAddr(a); err != nil {
				return a, true, err
			}
		}
		return addrs[0], true, nil
	}
	if why := internalName(h); why != "" {
		return netip.Addr{}, false, tools.Reject("%q %s; threat intelligence has no data about it. Investigate it in internal logs instead", clip.String(host, 80), why)
	}
	return netip.Addr{}, false, nil
}

// rejectNonPublicAddr is rejectNonPublic for a netip.Addr, naming the
// address as read (0x7f000001 is named 127.0.0.1).
func rejectNonPublicAddr(a netip.Addr) error {
	if nonPublicAddr(a) {
		return tools.Reject("%s is a private, loopback, link-local or multicast address (or another range not routed on the Internet, such as shared CGNAT space); "+
			"threat intelligence has no data about it. Investigate it in internal logs instead", a.WithZone(""))
	}
	return nil
}

// internalName says why the name h (lower case, ASCII, no trailing dot) is
// not asked about, or "" when it looks public: at least two labels, and a
// last label of letters (or punycode) that is not in internalTLDs.
func internalName(h string) string {
	labels := strings.Split(h, ".")
	if len(labels) < 2 {
		return "is an internal host name (a single label, which only a local network resolves)"
	}
	tld := labels[len(labels)-1]
	if _, ok := internalTLDs[tld]; ok {
		return "is an internal host name (under ." + tld + ", a top-level domain reserved for private networks or special use)"
	}
	if !publicTLDShape(tld) {
		return "is an internal host name (its last label is not a top-level domain)"
	}
	return ""
}

// publicTLDShape: 2-63 letters, or an IDN's punycode (xn--...).
func publicTLDShape(tld string) bool {
	if strings.HasPrefix(tld, "xn--") && len(tld) > 4 && len(tld) <= 63 {
		return strings.Trim(tld[4:], "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
	}
	return len(tld) >= 2 && len(tld) <= 63 && strings.Trim(tld, "abcdefghijklmnopqrstuvwxyz") == ""
}

// endsInNumber is the URL standard's test for a host to be parsed as IPv4:
// its last label (after one trailing dot) is decimal digits or 0x-hex.
func endsInNumber(h string) bool {
	last := h[strings.LastIndex(h, ".")+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := ipv4Number(last)
	return ok
}

// looseIPv4 parses 1 to 4 dot-separated numbers, each decimal, 0x-hex or
// 0-octal, the last filling the remaining bytes (127.1, 0x7f000001,
// 0177.0.0.1), as the URL standard and inet_aton do. A part with a leading
// zero is also read as decimal, as some parsers do; every reading is
// returned, so that a caller refuses if any is non-public.
func looseIPv4(h string) ([]netip.Addr, bool) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return nil, false
	}
	var out []netip.Addr
	for _, decimalZeros := range []bool{false, true} {
		var v uint64
		for i, p := range parts {
			n, ok := ipv4Number(p)
			if decimalZeros && ok && len(p) > 1 && p[0] == '0' && p[1] != 'x' {
				n, ok = decimalNumber(p)
			}
			if !ok {
				return nil, false
			}
			if i < len(parts)-1 {
				if n > 255 {
					return nil, false
				}
				v = v<<8 | n
				continue
			}
			rest := uint(8 * (5 - len(parts)))
			if n >= 1<<rest {
				return nil, false
			}
			v = v<<rest | n
		}
		a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		if len(out) == 0 || out[0] != a {
			out = append(out, a)
		}
	}
	return out, true
}

// ipv4Number reads one part of a loose IPv4 address.
func ipv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
		p, base = p[2:], 16
		if p == "" {
			return 0, true // "0x" is 0 in the URL standard
		}
	case len(p) > 1 && p[0] == '0':
		p, base = p[1:], 8
	}
	n, err := strconv.ParseUint(p, base, 32)
	return n, err == nil
}

func decimalNumber(p string) (uint64, bool) {
	n, err := strconv.ParseUint(p, 10, 32)
	return n, err == nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
