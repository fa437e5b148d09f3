package alerts

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// Indicator keys: the normalised "type:value" strings an alert is stored
// with (its Indicators field) and searched by, so that the same address,
// name or hash is found whatever the source and the field that holds it.
//
//	ip:<address>         canonical (netip): 198.51.100.23, 2001:db8::1; an
//	                     IPv4-mapped IPv6 address as its IPv4, no zone
//	ipmask:<pattern>     an anonymised IPv4, masked octets as *: *.*.7.82
//	domain:<name>        lower case, no trailing dot (host names too)
//	hash:<hex>           MD5, SHA-1 or SHA-256, lower case
//	user:<name>          lower case; DOMAIN\user also as user:<user>
//	email:<address>      lower case
//	resource:<name>      a cloud resource (ARN, GCP or Azure name, bucket,
//	                     AWS resource ID) as written
//
// URLs, file paths and command lines are not keys: they are long, rarely
// equal across sources, and their hosts are keys already.
const (
	KeyIP       = "ip"
	KeyIPMask   = "ipmask"
	KeyDomain   = "domain"
	KeyHash     = "hash"
	KeyUser     = "user"
	KeyEmail    = "email"
	KeyResource = "resource"
)

// KeyTypes are the indicator types a search may name, in the order the
// search_alerts declaration lists them.
var KeyTypes = []string{KeyIP, KeyDomain, KeyHash, KeyUser, KeyEmail, KeyResource, KeyIPMask}

const (
	// MaxKeys is the most indicator keys stored with one alert (the first
	// in rank order): a Firestore document indexes at most 40,000 entries,
	// and the data has its own.
	MaxKeys = 500
	// MaxIndicatorBytes is the longest indicator value a key is made of,
	// and the longest a search accepts: Firestore compares only the first
	// 1,500 bytes of an indexed string.
	MaxIndicatorBytes = 1024
)

// IndexKeys returns the keys of an alert's indicators (as Indicators ranks
// them), each once, at most MaxKeys.
func IndexKeys(found []Indicator) []string {
	keys := []string{}
	seen := map[string]bool{}
	for _, in := range found {
		for _, k := range keysOf(in.Kind, in.Value) {
			if len(keys) == MaxKeys {
				return keys
			}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// keysOf is the keys of one indicator of an Indicators kind (none for the
// kinds that are not keys, or a value over MaxIndicatorBytes).
func keysOf(kind, value string) []string {
	v := strings.TrimSpace(value)
	if v == "" || len(v) > MaxIndicatorBytes {
		return nil
	}
	switch kind {
	case KindIPv4, KindIPv6:
		if ip, ok := canonicalIP(v); ok {
			return []string{KeyIP + ":" + ip}
		}
	case KindIPv4Masked:
		if m, ok := maskPattern(v); ok {
			return []string{KeyIPMask + ":" + m}
		}
	case KindDomain:
		return []string{KeyDomain + ":" + strings.TrimSuffix(strings.ToLower(v), ".")}
	case KindMD5, KindSHA1, KindSHA256:
		return []string{KeyHash + ":" + strings.ToLower(v)}
	case KindEmail:
		return []string{KeyEmail + ":" + strings.ToLower(v)}
	case KindUser:
		return userKeys(v)
	case KindCloudResource:
		return []string{KeyResource + ":" + v}
	}
	return nil
}

// userKeys is user:<name> in lower case and, for DOMAIN\user, user:<user>
// too, so that an EDR's CORP\alice and a cloud log's alice meet.
func userKeys(v string) []string {
	v = strings.ToLower(v)
	keys := []string{KeyUser + ":" + v}
	if i := strings.LastIndexByte(v, '\\'); i > 0 && i < len(v)-1 {
		keys = append(keys, KeyUser+":"+v[i+1:])
	}
	return keys
}

// canonicalIP writes an address as netip does, IPv4-mapped IPv6 as IPv4,
// without a zone.
func canonicalIP(s string) (string, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", false
	}
	return a.WithZone("").Unmap().String(), true
}

// maskPattern writes an anonymised IPv4 with each masked octet as * and
// each shown one without leading zeros: XXX.xx.007.82 is *.*.7.82.
func maskPattern(s string) (string, bool) {
	if !MaskedIPv4(s) {
		return "", false
	}
	parts := strings.Split(s, ".")
	for i, p := range parts {
		if maskToken(p) {
			parts[i] = "*"
		} else {
			n, _ := strconv.Atoi(p)
			parts[i] = strconv.Itoa(n)
		}
	}
	return strings.Join(parts, "."), true
}

// ErrBadIndicator is wrapped by SearchKeys when a value is not an
// indicator of the type asked for.
var ErrBadIndicator = errors.New("not an indicator of that type")

// SearchKeys returns the keys to look up for one indicator value of the
// given type (one of KeyTypes; "" guesses it from the value's shape). An
// IPv4 address also matches the anonymised forms it could be (each way of
// masking some of its octets, as *.*.7.82 for 203.0.7.82); the keys of
// a DOMAIN\user include the bare user; an e-mail address is looked up as a
// user name too.
func SearchKeys(typ, value string) ([]string, error) {
	v := strings.TrimSpace(value)
	switch {
	case v == "":
		return nil, errors.New("the indicator is empty")
	case len(v) > MaxIndicatorBytes:
		return nil, errors.New("the indicator is longer than " + strconv.Itoa(MaxIndicatorBytes) + " bytes")
	}
	if typ == "" {
		typ = guessType(v)
	}
	bad := func() ([]string, error) { return nil, errBad(typ, v) }
	switch typ {
	case KeyIP:
		ip, ok := canonicalIP(v)
		if !ok {
			return bad()
		}
		keys := []string{KeyIP + ":" + ip}
		if a, _ := netip.ParseAddr(ip); a.Is4() {
			keys = append(keys, maskedForms(a.As4())...)
		}
		return keys, nil
	case KeyIPMask:
		m, ok := maskPattern(v)
		if !ok {
			return bad()
		}
		return []string{KeyIPMask + ":" + m}, nil
	case KeyDomain:
		d := strings.TrimSuffix(strings.ToLower(v), ".")
		if !hostName(d, true) {
			return bad()
		}
		return []string{KeyDomain + ":" + d}, nil
	case KeyHash:
		h := strings.ToLower(v)
		if n := len(h); n != 32 && n != 40 && n != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			return bad()
		}
		return []string{KeyHash + ":" + h}, nil
	case KeyEmail:
		e := strings.ToLower(v)
		if !strings.Contains(e, "@") || strings.ContainsAny(e, " \t\r\n") {
			return bad()
		}
		return []string{KeyEmail + ":" + e, KeyUser + ":" + e}, nil
	case KeyUser:
		if strings.ContainsAny(v, "\r\n") {
			return bad()
		}
		return userKeys(v), nil
	case KeyResource:
		if strings.ContainsAny(v, " \t\r\n") {
			return bad()
		}
		return []string{KeyResource + ":" + v}, nil
	}
	return nil, errors.New("unknown indicator type " + strconv.Quote(typ) + ": use one of " + strings.Join(KeyTypes, ", "))
}

func errBad(typ, v string) error {
	return errors.Join(ErrBadIndicator, errors.New(strconv.Quote(v)+" is not "+article(typ)))
}

func article(typ string) string {
	switch typ {
	case KeyIP:
		return "an IP address"
	case KeyIPMask:
		return "an anonymised IPv4 address such as XXX.XXX.7.82"
	case KeyDomain:
		return "a domain or host name"
	case KeyHash:
		return "an MD5, SHA-1 or SHA-256 hash"
	case KeyEmail:
		return "an e-mail address"
	case KeyUser:
		return "a user name on one line"
	}
	return "a cloud resource name without spaces"
}

// guessType names the indicator type a value looks like.
func guessType(v string) string {
	if _, ok := canonicalIP(v); ok {
		return KeyIP
	}
	if MaskedIPv4(v) {
		return KeyIPMask
	}
	h := strings.ToLower(v)
	if n := len(h); (n == 32 || n == 40 || n == 64) && strings.Trim(h, "0123456789abcdef") == "" {
		return KeyHash
	}
	c := &collector{seen: map[seenKey]struct{}{}, perKind: map[string]int{}}
	scanText(c, v, "")
	for _, in := range c.out {
		if in.Value != v {
			continue
		}
		switch in.Kind {
		case KindCloudResource:
			return KeyResource
		case KindEmail:
			return KeyEmail
		case KindDomain:
			return KeyDomain
		}
	}
	if strings.Contains(v, "@") {
		return KeyEmail
	}
	return KeyUser
}

// maskedForms are the ipmask keys an IPv4 address could have been
// anonymised to: every way of masking one to three of its octets.
func maskedForms(b [4]byte) []string {
	var out []string
	for mask := 1; mask < 15; mask++ { // bit i set: octet i masked; not none, not all
		parts := make([]string, 4)
		for i := range 4 {
			if mask&(1<<i) != 0 {
				parts[i] = "*"
			} else {
				parts[i] = strconv.Itoa(int(b[i]))
			}
		}
		out = append(out, KeyIPMask+":"+strings.Join(parts, "."))
	}
	return out
}
