package intel

import (
	"net/netip"
	"regexp"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/tools"
)

// URLScan.io search queries are Elasticsearch query strings: terms, each
// field:value or a bare value, quoted or not, with ranges ([a TO b]),
// comparisons (>=a), wildcards and backslash escapes. rejectInternalQuery
// reads every term in every way it could be meant and refuses the query if
// one names a non-public address (also as CIDR, range, comparison or
// wildcard prefix) or an internal host name, as a value or as a URL's host.

var (
	// usRange is a range term; its endpoints may be quoted or *.
	usRange = regexp.MustCompile(`(?i)(?:([A-Za-z_@][A-Za-z0-9_.@-]*):\s*)?[\[{]\s*"?([^\s"\]}]+)"?\s+TO\s+"?([^\s"\]}]+)"?\s*[\]}]`)
	// usField is a field name before ':' (page.ip, domain, ...).
	usField = regexp.MustCompile(`^[A-Za-z_@][A-Za-z0-9_.@-]*$`)
	// usWildIPv4 is an IPv4 prefix with wildcards (10.20.*).
	usWildIPv4 = regexp.MustCompile(`^[0-9.]*[*?][0-9.*?]*$`)
	// usNameChars are the characters of a host name, with wildcards.
	usNameChars = regexp.MustCompile(`^[a-z0-9_*?-]+(\.[a-z0-9_*?-]*)+$`)
)

// usTerm is one value of a query and the field it was given for ("" for a
// bare term).
type usTerm struct{ field, value string }

// rejectInternalQuery refuses a query naming an internal address or name.
func rejectInternalQuery(q string) error {
	// Full-width digits and dots are read as ASCII; the ideographic full
	// stop, which NFKC keeps, is a label separator to IDNA (hostTarget).
	q = strings.ReplaceAll(norm.NFKC.String(q), "\u3002", ".")
	for _, m := range usRange.FindAllStringSubmatch(q, -1) {
		if rangeHoldsNonPublic(m[1], usUnescape(m[2]), usUnescape(m[3])) {
			return queryRejection(m[0], "covers private or other non-public addresses")
		}
	}
	for _, t := range usTerms(q) {
		if err := checkQueryTerm(t); err != nil {
			return err
		}
	}
	return nil
}

// queryRejection names the term and why it is refused, in one sentence.
func queryRejection(term, why string) error {
	return tools.Reject("the query term %q %s; threat intelligence has no data about those. Investigate them in internal logs instead", clip.String(term, 100), why)
}

// usTerms splits q into terms: quoted strings whole, other text at spaces
// and the query syntax's brackets. A term holding a field prefix is given
// both whole and split, since a value may itself hold colons (IPv6, URLs).
func usTerms(q string) []usTerm {
	var out []usTerm
	field := ""
	var cur strings.Builder
	flush := func() {
		if cur.Len() == 0 {
			return
		}
		raw := cur.String()
		cur.Reset()
		if strings.HasSuffix(raw, ":") && !strings.HasSuffix(raw, `\:`) && usField.MatchString(strings.TrimLeft(raw[:len(raw)-1], "+-!")) {
			field = strings.TrimLeft(raw[:len(raw)-1], "+-!") // page.ip:"..." or page.ip:[...]
			return
		}
		v := usUnescape(raw)
		out = append(out, usTerm{field, v})
		if i := strings.Index(v, ":"); i > 0 && usField.MatchString(strings.TrimLeft(v[:i], "+-!")) {
			out = append(out, usTerm{strings.TrimLeft(v[:i], "+-!"), v[i+1:]})
		}
		field = ""
	}
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\\' && i+1 < len(q):
			cur.WriteByte(c)
			cur.WriteByte(q[i+1])
			i++
		case c == '"':
			flush()
			j := i + 1
			for j < len(q) && q[j] != '"' {
				if q[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, usTerm{field, usUnescape(q[i+1 : min(j, len(q))])})
			field = ""
			i = j
		case strings.IndexByte(" \t\r\n()[]{},", c) >= 0:
			if c == '[' || c == '{' {
				// A range's endpoints keep the field (checked as values too).
				f := field
				flush()
				field = f
				continue
			}
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return out
}

// usUnescape removes the query syntax's backslash escapes (\: \/ \ ).
func usUnescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ipField says a field holds addresses (ip, page.ip, lists.ips), where an
// integer or a short form is read as an address.
func ipField(f string) bool {
	f = strings.ToLower(f[strings.LastIndex(f, ".")+1:])
	return f == "ip" || f == "ips" || strings.HasSuffix(f, "ip")
}

// nameField says a field holds host names, where a single label is an
// internal name.
func nameField(f string) bool {
	switch strings.ToLower(f[strings.LastIndex(f, ".")+1:]) {
	case "domain", "domains", "apexdomain", "hostname", "host", "ptr", "server_name":
		return true
	}
	return false
}

// checkQueryTerm refuses a term naming a non-public address or an internal
// name.
func checkQueryTerm(t usTerm) error {
	v := strings.TrimSpace(t.value)
	if v == "" {
		return nil
	}
	if i := strings.Index(v, "://"); i >= 0 {
		return checkQueryHost(t.value, urlHost(v[i+3:]))
	}
	if len(v) > 2 && v[0] == '/' && v[len(v)-1] == '/' {
		// A regular expression: each literal run in it is checked.
		for _, run := range strings.FieldsFunc(v[1:len(v)-1], func(r rune) bool { return strings.ContainsRune(`*+?()[]{}|^$\/ `, r) }) {
			if err := checkQueryTerm(usTerm{"", strings.Trim(run, ".")}); err != nil { // a run is part of a name: no single-label rule
				return err
			}
		}
		return nil
	}
	op := strings.TrimLeft(v, "+-!")
	if i := strings.IndexAny(op, "^~"); i > 0 {
		op = op[:i] // a boost or fuzziness suffix
	}
	cmp := strings.TrimLeft(op, "<>=")
	if cmp != op {
		// An open range of addresses (>=8.8.8.8) always holds multicast
		// or reserved space above, or this-network space below.
		if _, ok := queryAddr(t.field, cmp); ok {
			return queryRejection(t.value, "is an open range of addresses, which covers non-public ones")
		}
		return nil
	}
	v = strings.Trim(cmp, "[]")
	if addr, mask, ok := strings.Cut(v, "/"); ok && mask != "" && strings.Trim(mask, "0123456789") == "" {
		if p, err := netip.ParsePrefix(addr + "/" + mask); err == nil {
			if overlapsNonPublic(p) {
				return queryRejection(t.value, "covers private or other non-public addresses")
			}
			return nil
		}
		if as, ok := looseIPv4Dotted(addr); ok {
			for _, a := range as {
				if p, err := a.Prefix(atoiSmall(mask)); err == nil && overlapsNonPublic(p) {
					return queryRejection(t.value, "covers private or other non-public addresses")
				}
			}
			return nil
		}
	}
	host, _, _ := strings.Cut(v, "/") // host/path without a scheme
	if as, ok := queryAddr(t.field, host); ok {
		for _, a := range as {
			if err := rejectNonPublicAddr(a); err != nil {
				return err
			}
		}
		return nil
	}
	// host:port: an address, or a name checked without its port
	if i := strings.LastIndex(host, ":"); i > 0 && strings.Trim(host[i+1:], "0123456789") == "" {
		if as, ok := queryAddr(t.field, strings.Trim(host[:i], "[]")); ok {
			for _, a := range as {
				if err := rejectNonPublicAddr(a); err != nil {
					return err
				}
			}
			return nil
		}
		host = host[:i]
	}
	if usWildIPv4.MatchString(host) && (strings.Contains(host, ".") || ipField(t.field)) {
		if overlapsNonPublic(wildcardPrefix(host)) {
			return queryRejection(t.value, "covers private or other non-public addresses")
		}
		return nil
	}
	return checkQueryName(t, strings.ToLower(host))
}

// checkQueryHost checks a URL's host in a query term; wildcards allowed.
func checkQueryHost(term, host string) error {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if strings.ContainsAny(h, "*?") {
		return checkQueryName(usTerm{"host", term}, h)
	}
	if h == "" {
		return nil
	}
	return rejectInternalHost(h)
}

// checkQueryName refuses a host name under an internal top-level domain,
// a reverse name, and a single label given for a host-name field.
func checkQueryName(t usTerm, h string) error {
	h = strings.TrimSuffix(h, ".")
	if !strings.Contains(h, ".") {
		if nameField(t.field) && h != "" && !strings.ContainsAny(h, "*?") {
			return queryRejection(t.value, "is an internal host name (a single label, which only a local network resolves)")
		}
		return nil
	}
	if !usNameChars.MatchString(h) {
		return nil
	}
	tld := strings.Trim(h[strings.LastIndex(h, ".")+1:], "*?") // *.corp.local* too
	if _, ok := internalTLDs[tld]; ok {
		return queryRejection(t.value, "is an internal host name (under ."+tld+", a top-level domain reserved for private networks or special use)")
	}
	return nil
}

// urlHost is the host of a URL's text after "://": up to the path, query
// or fragment, after the last '@', without the port. Lenient on purpose:
// a URL that does not parse still names its host to the provider.
func urlHost(rest string) string {
	if i := strings.IndexAny(rest, "/?#\\"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	if strings.HasPrefix(rest, "[") {
		if i := strings.Index(rest, "]"); i > 0 {
			return rest[:i+1]
		}
		return rest
	}
	host, _, _ := strings.Cut(rest, ":")
	return host
}

// queryAddr reads s as an address: IPv6 in any form, a dotted quad with
// decimal, octal or hex parts, and, in an IP field, also the short and
// integer forms (2130706433, 127.1). Every reading is returned.
func queryAddr(field, s string) ([]netip.Addr, bool) {
	s = strings.Trim(s, "[]")
	if strings.Contains(s, ":") {
		a, err := netip.ParseAddr(s)
		return []netip.Addr{a}, err == nil
	}
	if ipField(field) && s != "" && endsInNumber(strings.ToLower(s)) {
		return looseIPv4(strings.ToLower(strings.TrimSuffix(s, ".")))
	}
	return looseIPv4Dotted(s)
}

// looseIPv4Dotted is looseIPv4 for four parts only (a bare 200 or 1.2 in
// a query is a status or a version, not an address).
func looseIPv4Dotted(s string) ([]netip.Addr, bool) {
	if strings.Count(s, ".") != 3 {
		return nil, false
	}
	return looseIPv4(strings.ToLower(s))
}

// wildcardPrefix is the IPv4 prefix of the whole octets before the first
// wildcard (10.20.* is 10.20.0.0/16, 1* is 0.0.0.0/0).
func wildcardPrefix(s string) netip.Prefix {
	var b [4]byte
	n := 0
	for _, p := range strings.Split(s, ".") {
		if n == 4 || strings.ContainsAny(p, "*?") {
			break
		}
		v := atoiSmall(p)
		if v > 255 {
			break
		}
		b[n] = byte(v)
		n++
	}
	return netip.PrefixFrom(netip.AddrFrom4(b), 8*n)
}

// rangeHoldsNonPublic says a range [lo TO hi] of addresses (either end may
// be *) holds a non-public one; a range of anything else holds none.
// Integer endpoints are addresses only in an IP field ([200 TO 299] is a
// status range).
func rangeHoldsNonPublic(field, lo, hi string) bool {
	la, lok := rangeEnd(field, lo)
	ha, hok := rangeEnd(field, hi)
	if !lok && !hok {
		return false
	}
	if !lok || !hok {
		return true // open at one end: see checkQueryTerm's comparisons
	}
	if la.Is4() != ha.Is4() {
		return true
	}
	refused := nonPublicV4
	if la.Is6() {
		refused = append(prefixes("::/3", "4000::/2", "8000::/1", "2002::/16"), nonPublicV6...)
	}
	for _, p := range refused {
		if p.Addr().Compare(ha) <= 0 && lastAddr(p).Compare(la) >= 0 {
			return true
		}
	}
	return false
}

// rangeEnd reads a range endpoint as an address; * is not one.
func rangeEnd(field, s string) (netip.Addr, bool) {
	if as, ok := queryAddr(field, s); ok {
		return as[0].Unmap(), true
	}
	return netip.Addr{}, false
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// atoiSmall reads a short decimal number; anything else is 1<<20.
func atoiSmall(s string) int {
	if s == "" || len(s) > 4 {
		return 1 << 20
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 1 << 20
		}
		n = n*10 + int(c-'0')
	}
	return n
}
