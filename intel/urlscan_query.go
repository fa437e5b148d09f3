package intel

import (
	"maps"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/tools"
)

// URLScan.io search queries are Elasticsearch query strings: terms, each
// field:value or a bare value, quoted or not, with ranges ([a TO b]),
// comparisons (>=a), wildcards, /regular expressions/ and backslash
// escapes. rejectInternalQuery reads every term in every way it could be
// meant and refuses the query if one names a non-public address (also as
// CIDR, range, comparison or wildcard prefix) or an internal host name: as
// a value, as a URL's host after any "//", or as any run of host-name
// characters in it, percent-encoded or not. A regular expression is
// allowed only on text fields (textField).

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
	for _, t := range usRegexes(q) {
		if !textField(t.field) {
			return tools.Reject("the query term %q is a regular expression on a field that may hold hosts (a URL, domain or address, or every field): "+
				"which hosts it matches cannot be checked, so it is not sent; use a wildcard term instead, such as page.url:*example.com*", clip.String(t.value, 100))
		}
	}
	return nil
}

// usRegexes are q's regular expressions: /.../ at a term's start, maybe
// after field: and +-!, with their field ("" for a bare one, which
// searches every field). An unclosed one runs to the end.
func usRegexes(q string) []usTerm {
	var out []usTerm
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case '\\':
			i++
		case '"':
			for i++; i < len(q) && q[i] != '"'; i++ {
				if q[i] == '\\' {
					i++
				}
			}
		case '/':
			field, ok := regexStart(q[:i])
			if !ok {
				continue
			}
			j := i + 1
			for j < len(q) && q[j] != '/' {
				if q[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, usTerm{field, q[i:min(j+1, len(q))]})
			i = j
		}
	}
	return out
}

// regexStart says a '/' after before starts a regular expression: it
// begins a term, maybe after field: and +-!; field is that field.
func regexStart(before string) (field string, ok bool) {
	b := strings.TrimRight(before, "+-!")
	if b == "" || strings.ContainsRune(" \t\r\n(){}[],", rune(b[len(b)-1])) {
		return "", true
	}
	if b[len(b)-1] != ':' {
		return "", false
	}
	b = b[:len(b)-1]
	k := strings.LastIndexAny(b, " \t\r\n(){}[],") + 1
	return strings.TrimLeft(b[k:], "+-!"), true
}

// textField says a field holds text, not hosts (a page's title, a server
// header, a file name): the only fields a regular expression may search.
func textField(f string) bool {
	switch strings.ToLower(f[strings.LastIndex(f, ".")+1:]) {
	case "title", "server", "filename", "mimetype", "asnname", "tags":
		return true
	}
	return false
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
	op := strings.TrimLeft(v, "+-!")
	if i := strings.IndexAny(op, "^~"); i > 0 {
		op = op[:i] // a boost or fuzziness suffix (the text after is a run below)
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
	c := strings.Trim(cmp, "[]")
	if addr, mask, ok := strings.Cut(c, "/"); ok && mask != "" && strings.Trim(mask, "0123456789") == "" {
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
	// Any text may name a host: a URL's host after "//" or "@", a path or
	// parameter, a run of name characters inside wildcards or a regular
	// expression; percent-encoded too. Every one is checked.
	for s := v; ; {
		if err := checkQueryText(t, s); err != nil {
			return err
		}
		d := percentDecode(s)
		if d == s {
			return nil
		}
		s = d
	}
}

// usDelims separate the parts of a URL or text that may each be a host
// (with a port), as written: not '.', ':' or brackets, which hosts hold.
const usDelims = "/\\?#@&=;,|\"'<>(){}^~ \t\r\n"

// checkQueryText checks each part of s between usDelims as a host, and
// each run of host-name characters in it as an address or a name.
func checkQueryText(t usTerm, s string) error {
	for _, run := range usRun.FindAllString(s, -1) {
		if err := checkHostPattern(usTerm{"", t.value}, strings.Trim(run, "."), false); err != nil {
			return err
		}
	}
	var after byte // the delimiter before the part
	prev := byte(0)
	authority := false // between "//" and the path
	for len(s) > 0 {
		i := strings.IndexAny(s, usDelims)
		part := s
		if i >= 0 {
			part = s[:i]
		}
		// After "//", or after an '@' there, is a URL's host, where a URL
		// parser reads an integer or hex form as an address too.
		slashes := (after == '/' || after == '\\') && (prev == '/' || prev == '\\')
		if slashes {
			authority = true
		} else if after != '@' {
			authority = false
		}
		// ... unless an '@' follows: then it is the user (admin@host).
		hostPos := (slashes || after == '@' && authority) && (i < 0 || s[i] != '@')
		if part != "" {
			if err := checkQueryHost(t, part, hostPos); err != nil {
				return err
			}
		}
		if i < 0 {
			break
		}
		if part != "" {
			prev = 0
		} else {
			prev = after
		}
		after = s[i]
		s = s[i+1:]
	}
	return nil
}

// usRun is a run of the characters of a host name or an IPv4 address,
// with wildcards, holding a dot: wherever it stands, it may be one.
var usRun = regexp.MustCompile(`[A-Za-z0-9_*?-]*\.[A-Za-z0-9_.*?-]*`)

// checkQueryHost checks one part of a term as a host, with or without a
// port: an address in any form (brackets and wildcards around it removed),
// a wildcard pattern of addresses, or a name.
func checkQueryHost(t usTerm, host string, hostPos bool) error {
	if host == "" {
		return nil
	}
	// host:port, the port maybe a wildcard (10.0.0.1:80*): the host is
	// checked without it; an unbracketed IPv6 address ends so too, and is
	// checked whole as well.
	if i := strings.LastIndex(host, ":"); i > 0 && strings.Trim(host[i+1:], "0123456789*?") == "" {
		h := host[:i]
		if err := checkHostPattern(t, h, hostPos && !strings.Contains(h, ":")); err != nil {
			return err
		}
		hostPos = false // the whole is read leniently: IPv6 (fd00:*) or not
	}
	return checkHostPattern(t, host, hostPos)
}

// checkHostPattern refuses a host, maybe with wildcards, that is or may be
// a non-public address or an internal name.
func checkHostPattern(t usTerm, host string, hostPos bool) error {
	h := strings.ToLower(strings.TrimSpace(host))
	if h == "" {
		return nil
	}
	bare := strings.Trim(h, "[]*?")
	if hostPos && !strings.ContainsAny(h, "*?") {
		// A URL's host as written: read as a URL parser does (2130706433,
		// 0x7f.1, a single label), as for URL arguments.
		return rejectInternalHost(h)
	}
	field := t.field
	if hostPos {
		field = "ip" // with wildcards, its address readings still count
	}
	if as, ok := queryAddr(field, bare); ok {
		for _, a := range as {
			if err := rejectNonPublicAddr(a); err != nil {
				return err
			}
		}
	}
	if strings.ContainsAny(h, "*?") {
		if p, ok := wildIPv6Prefix(strings.Trim(h, "[]")); ok {
			if overlapsNonPublic(p) {
				return queryRejection(t.value, "covers private or other non-public addresses")
			}
			return nil
		}
	}
	if usWildIPv4.MatchString(h) && (strings.Contains(h, ".") || ipField(t.field)) {
		if overlapsNonPublic(wildcardPrefix(h)) {
			return queryRejection(t.value, "covers private or other non-public addresses")
		}
		return nil
	}
	return checkQueryName(t, strings.Trim(h, "."))
}

// wildIPv6Prefix is the IPv6 prefix of the whole groups before the first
// wildcard of an IPv6 pattern (fd00:* is fd00::/16; * alone is ::/0);
// groups after "::" are not counted, so the prefix is never narrower than
// the pattern.
func wildIPv6Prefix(h string) (netip.Prefix, bool) {
	if strings.Trim(h, "0123456789abcdef:.*?") != "" || !strings.Contains(h, ":") {
		return netip.Prefix{}, false
	}
	if strings.Count(h, ":") == 1 && strings.Contains(h[:strings.Index(h, ":")], ".") {
		return netip.Prefix{}, false // an IPv4 address with a port
	}
	lit := h[:strings.IndexAny(h, "*?")]
	if i := strings.Index(lit, "::"); i >= 0 {
		lit = lit[:i+1]
	}
	lit = lit[:strings.LastIndex(lit, ":")+1] // whole groups only
	groups := strings.FieldsFunc(lit, func(r rune) bool { return r == ':' })
	if len(groups) > 7 {
		groups = groups[:7]
	}
	a, err := netip.ParseAddr(strings.Join(groups, ":") + "::")
	if err != nil {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0), true // unreadable: as wide as can be
	}
	return netip.PrefixFrom(a, 16*len(groups)), true
}

// checkQueryName refuses a host name under an internal top-level domain
// (also a wildcard one that matches one: *.intern*), a reverse name, and
// a single label given for a host-name field.
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
	// Labels of wildcards only at the end (dc01.corp.local.*) stand for
	// any top-level domain: the label before is checked as one too.
	labels := strings.Split(h, ".")
	for len(labels) > 1 && strings.Trim(labels[len(labels)-1], "*?") == "" {
		labels = labels[:len(labels)-1]
	}
	if len(labels) < 2 {
		return nil // any top-level domain (paypal.*) names no internal one
	}
	tld := labels[len(labels)-1]
	for _, name := range slices.Sorted(maps.Keys(internalTLDs)) {
		// "*.corp.local*" ends in local*, "x.intern*" may be .internal
		if ok, _ := path.Match(tld, name); ok {
			return queryRejection(t.value, "is an internal host name (under ."+name+", a top-level domain reserved for private networks or special use)")
		}
	}
	return nil
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
