package alerts

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// The shapes scanText looks for. Each match is checked further in code
// (boundaries, octets, TLDs) because RE2 has no look-around.
var (
	reARN     = regexp.MustCompile(`arn:aws[a-z\-]*:[^\s"'<>\x60]+`)
	reGCPFull = regexp.MustCompile(`//[a-z0-9.\-]+\.googleapis\.com/[^\s"'<>\x60?#]+`)
	reGCPRel  = regexp.MustCompile(`(?:projects|organizations|folders|billingAccounts)/[A-Za-z0-9._:@\-]+(?:/[A-Za-z0-9._:@\-]+)*`)
	reAzure   = regexp.MustCompile(`(?i)/subscriptions/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?:/[^\s"'<>\x60?#]*)?`)
	reBucket  = regexp.MustCompile(`(?i)\b(?:s3|s3a|s3n|gs|gcs)://[^\s"'<>\x60]+`)
	reURL     = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.\-]{1,31}://[^\s"'\x60` + cjkPunct + `]+`)
	reEmail   = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@` + hostPattern)
	reIPv6    = regexp.MustCompile(`(?i)[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}(?:\.\d{1,3}){0,3}(?:%[0-9a-z_.\-]+)?`)
)

// cjkPunct are the CJK punctuation and full-width forms (。，：） and the
// like) that end a URL or a path written in Chinese or Japanese text.
const cjkPunct = `\x{3000}-\x{303F}\x{FF00}-\x{FFEF}`

const hostPattern = `[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?)+`

// spans are byte ranges of s already claimed by an indicator that hides
// others inside it (a hex ID inside an ARN is no hash).
type spans [][2]int

func (m spans) covers(lo, hi int) bool {
	for _, sp := range m {
		if lo < sp[1] && sp[0] < hi {
			return true
		}
	}
	return false
}

// scanText reports the indicators written in s (a value, or a key), found at
// path under the field key. The rules:
//   - cloud_resource: AWS ARNs (arn:aws...), GCP full resource names
//     (//x.googleapis.com/...) and relative ones (projects/..., organizations/...,
//     folders/..., billingAccounts/...), Azure IDs (/subscriptions/<uuid>/...),
//     buckets (s3://, gs://) and AWS resource IDs (i-, vol-, sg-, eni-, vpc-,
//     subnet-, ami-, snap-... with 8 or 17 hex digits);
//   - url: scheme://..., up to white space, a quote or CJK punctuation, so
//     & and <> stay in;
//     its host is reported too (ipv4, ipv6 or domain, whatever its TLD);
//   - email: local@domain with a letters-only TLD; its domain is reported too;
//   - md5, sha1, sha256: a run of exactly 32, 40 or 64 hex digits (with at
//     least one letter) not touching other letters, digits or '_', and not
//     in a URL's query or fragment (there it is a token, a session or a
//     signature);
//   - ipv4: a valid dotted quad not inside a longer dotted number (so
//     1.2.3.4.5 and 10.0.19041.1 are not IPs, 1.2.3.4:22 and 1.2.3.4/24 are);
//   - ipv6: anything net/netip reads as IPv6 (compressed, with a zone,
//     IPv4-mapped), except "::";
//   - domain: dotted names whose TLD is in knownTLDs (see there: common file
//     extensions such as .sh and .py and field-name words such as .name and
//     .id are left out), not touching '_', '/' or '\' (so dataset.table names
//     such as security_logs.auth_events and path parts are not domains);
//   - file_path: a whole value that is a Windows (C:\..., \\server\..., %VAR%\...)
//     or POSIX (/a/b, ~/a) path, spaces allowed as long as its last segment has
//     none (else it is a command line); inside text, quoted Windows paths, and
//     unquoted ones up to white space;
//   - user: DOMAIN\user written alone;
//   - ipv4_masked: an address with some octets anonymised (XXX.XXX.7.82,
//     10.x.x.1, 203.0.113.***): at least one octet shown and one masked by
//     x, X or *, reported as written and never as an IP.
//
// A match that ends with sentence punctuation (.,;:!?) or an unbalanced
// closing bracket loses it, unless the match is the whole value. In text
// escaped twice (holding \r\n or \" as written characters, as an HTTP
// request copied out of a JSON log is), those escapes separate values.
func scanText(c *collector, s, key string) {
	if len(s) < 3 {
		return
	}
	if strings.Contains(s, `\r\n`) || strings.Contains(s, `\"`) {
		s = blankEscapes(s)
	}
	t := strings.TrimSpace(s)
	start := strings.Index(s, t)
	tidy := func(lo, hi int) (int, int) {
		if lo == start && hi == start+len(t) {
			return lo, hi // the whole value: never trimmed
		}
		return lo, lo + len(trimTrail(s[lo:hi]))
	}
	var cloud, urls, queries, emails spans
	addAll := func(re *regexp.Regexp, kind string, m *spans, group int) {
		for _, loc := range re.FindAllStringSubmatchIndex(s, -1) {
			lo, hi := tidy(loc[2*group], loc[2*group+1])
			c.add(kind, s[lo:hi])
			*m = append(*m, [2]int{lo, hi})
		}
	}
	if strings.Contains(s, "arn:aws") {
		addAll(reARN, KindCloudResource, &cloud, 0)
	}
	if strings.Contains(s, ".googleapis.com/") {
		addAll(reGCPFull, KindCloudResource, &cloud, 0)
	}
	if strings.Contains(s, "://") {
		addAll(reBucket, KindCloudResource, &cloud, 0)
	}
	if strings.Contains(s, "/subscriptions/") || strings.Contains(s, "/SUBSCRIPTIONS/") {
		addAll(reAzure, KindCloudResource, &cloud, 0)
	}
	if strings.Contains(s, "s/") {
		for _, loc := range reGCPRel.FindAllStringIndex(s, -1) {
			if (loc[0] == 0 || !isWordByte(s[loc[0]-1]) && s[loc[0]-1] != '/') && !cloud.covers(loc[0], loc[1]) {
				lo, hi := tidy(loc[0], loc[1])
				c.add(KindCloudResource, s[lo:hi])
				cloud = append(cloud, [2]int{lo, hi})
			}
		}
	}
	if strings.Contains(s, "-") {
		cloud = scanAWSIDs(c, s, cloud)
	}
	if strings.Contains(s, "://") {
		for _, loc := range reURL.FindAllStringIndex(s, -1) {
			if cloud.covers(loc[0], loc[1]) {
				continue
			}
			lo, hi := tidy(loc[0], loc[1])
			c.add(KindURL, s[lo:hi])
			urls = append(urls, [2]int{lo, hi})
			if q := strings.IndexAny(s[lo:hi], "?#"); q >= 0 {
				queries = append(queries, [2]int{lo + q, hi})
			}
			addHost(c, urlHost(s[lo:hi]))
		}
	}
	if strings.Contains(s, "@") {
		for _, loc := range reEmail.FindAllStringIndex(s, -1) {
			lo, hi := loc[0], loc[1]
			at := strings.LastIndexByte(s[lo:hi], '@')
			if !letterTLD(s[lo+at+1:hi]) || hi < len(s) && (isWordByte(s[hi]) || s[hi] == '@') {
				continue
			}
			c.add(KindEmail, s[lo:hi])
			emails = append(emails, [2]int{lo, hi})
			c.add(KindDomain, s[lo+at+1:hi])
		}
	}
	if !idField(key) {
		scanHashes(c, s, append(cloud, queries...))
	}
	if strings.Count(s, ".") >= 3 {
		scanRuns(s, isIPv4Byte, func(lo, hi int) {
			if hi < len(s) && isWordByte(s[hi]) || lo > 0 && isWordByte(s[lo-1]) {
				return
			}
			if ip := strings.TrimSuffix(s[lo:hi], "."); strings.Count(ip, ".") == 3 {
				if a, err := netip.ParseAddr(ip); err == nil && a.Is4() {
					c.add(KindIPv4, ip)
				}
			}
		})
	}
	if strings.Count(s, ".") >= 3 && strings.ContainsAny(s, "xX*") {
		scanRuns(s, isMaskedIPv4Byte, func(lo, hi int) {
			if lo > 0 && isWordByte(s[lo-1]) || hi < len(s) && isWordByte(s[hi]) {
				return
			}
			if v := strings.TrimSuffix(s[lo:hi], "."); MaskedIPv4(v) {
				c.add(KindIPv4Masked, v)
			}
		})
	}
	if strings.Count(s, ":") >= 2 {
		for _, loc := range reIPv6.FindAllStringIndex(s, -1) {
			lo, hi := loc[0], loc[1]
			if lo > 0 && (isWordByte(s[lo-1]) || s[lo-1] == ':' || s[lo-1] == '.') || hi < len(s) && (isWordByte(s[hi]) || s[hi] == ':') {
				continue
			}
			if a, err := netip.ParseAddr(s[lo:hi]); err == nil && a.Is6() && s[lo:hi] != "::" {
				c.add(KindIPv6, s[lo:hi])
			}
		}
	}
	if strings.Contains(s, ".") {
		scanRuns(s, isHostByte, func(lo, hi int) {
			name := strings.TrimSuffix(s[lo:hi], ".")
			hi = lo + len(name)
			if lo > 0 && strings.IndexByte("_/\\@", s[lo-1]) >= 0 || hi < len(s) && strings.IndexByte("_(@", s[hi]) >= 0 ||
				cloud.covers(lo, hi) || urls.covers(lo, hi) || emails.covers(lo, hi) ||
				!hostName(name, false) || strings.Contains(name, "_") || !knownTLD(name[strings.LastIndexByte(name, '.')+1:]) {
				return
			}
			c.add(KindDomain, name)
		})
	}
	paths := scanPaths(c, s, t, tidy, append(cloud, urls...))
	if strings.Contains(s, `\`) {
		for _, loc := range reDomUser.FindAllStringSubmatchIndex(s, -1) {
			if !paths.covers(loc[2], loc[3]) {
				c.add(KindUser, s[loc[2]:loc[3]])
			}
		}
	}
}

// blankEscapes returns s with the escapes \r, \n and the backslash of \"
// written as spaces (the same length, so offsets stay), reading \\ as one
// escaped backslash.
func blankEscapes(s string) string {
	b := []byte(s)
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		switch b[i+1] {
		case 'r', 'n':
			b[i], b[i+1] = ' ', ' '
		case '"':
			b[i] = ' '
		}
		i++ // the escaped character
	}
	return string(b)
}

// MaskedIPv4 says s is an IPv4 address with some octets anonymised: four
// dot-separated parts, each a number up to 255 or one to three of x, X and
// *, with at least one of each.
func MaskedIPv4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	shown, masked := 0, 0
	for _, p := range parts {
		switch {
		case maskToken(p):
			masked++
		case len(p) >= 1 && len(p) <= 3 && strings.Trim(p, "0123456789") == "":
			if n, _ := strconv.Atoi(p); n > 255 {
				return false
			}
			shown++
		default:
			return false
		}
	}
	return shown > 0 && masked > 0
}

func maskToken(p string) bool {
	return len(p) >= 1 && len(p) <= 3 && strings.Trim(p, "xX*") == ""
}

// scanRuns calls f with the bounds of every maximal run of bytes for which
// in is true.
func scanRuns(s string, in func(byte) bool, f func(lo, hi int)) {
	for i := 0; i < len(s); {
		if !in(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && in(s[j]) {
			j++
		}
		f(i, j)
		i = j
	}
}

// awsIDPrefixes are the AWS resource IDs reported, as in i-0abc1234def567890.
var awsIDPrefixes = map[string]bool{"i": true, "eni": true, "sg": true, "subnet": true, "vpc": true, "ami": true,
	"vol": true, "snap": true, "igw": true, "nat": true, "rtb": true, "acl": true, "eipalloc": true, "tgw": true,
	"pcx": true, "vpce": true, "lt": true, "fs": true}

// scanAWSIDs reports prefix-<8 or 17 lower-case hex digits> as whole words
// and returns masked with their spans added.
func scanAWSIDs(c *collector, s string, masked spans) spans {
	for i := strings.IndexByte(s, '-'); i >= 0 && i < len(s); {
		lo := i
		for lo > 0 && s[lo-1] >= 'a' && s[lo-1] <= 'z' {
			lo--
		}
		hi := i + 1
		for hi < len(s) && (isDigit(s[hi]) || s[hi] >= 'a' && s[hi] <= 'f') {
			hi++
		}
		n := hi - i - 1
		if awsIDPrefixes[s[lo:i]] && (n == 8 || n == 17) && (lo == 0 || !isWordByte(s[lo-1])) && (hi == len(s) || !isWordByte(s[hi])) {
			c.add(KindCloudResource, s[lo:hi])
			masked = append(masked, [2]int{lo, hi})
		}
		next := strings.IndexByte(s[i+1:], '-')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return masked
}

// scanHashes reports runs of exactly 32, 40 or 64 hex digits with at least
// one letter, bounded by characters that are not letters, digits or '_'.
func scanHashes(c *collector, s string, masked spans) {
	for i := 0; i < len(s); {
		if !isHex(s[i]) || i > 0 && isWordByte(s[i-1]) {
			i++
			continue
		}
		j, letter := i, false
		for j < len(s) && isHex(s[j]) {
			letter = letter || s[j] > '9'
			j++
		}
		if (j == len(s) || !isWordByte(s[j])) && letter && !masked.covers(i, j) {
			switch j - i {
			case 32:
				c.add(KindMD5, s[i:j])
			case 40:
				c.add(KindSHA1, s[i:j])
			case 64:
				c.add(KindSHA256, s[i:j])
			}
		}
		i = j + 1
	}
}

// addHost reports a URL's host: an IP, or a DNS name whatever its TLD.
func addHost(c *collector, host string) {
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is4() {
			c.add(KindIPv4, host)
		} else {
			c.add(KindIPv6, host)
		}
		return
	}
	if hostName(host, false) {
		c.add(KindDomain, host)
	}
}

// urlHost returns the host of scheme://[user@]host[:port]/..., without the
// brackets of an IPv6 literal.
func urlHost(u string) string {
	rest := u[strings.Index(u, "://")+3:]
	if end := strings.IndexAny(rest, `/?#\`); end >= 0 {
		rest = rest[:end]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	if strings.HasPrefix(rest, "[") {
		if j := strings.IndexByte(rest, ']'); j > 0 {
			return rest[1:j]
		}
		return ""
	}
	if j := strings.LastIndexByte(rest, ':'); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// hostName says s is a DNS name: labels of letters, digits, '-' and '_'
// (1-63 characters, at most 253 in all) and, with more than one label, a
// letters-only TLD. single allows a single-label host name.
func hostName(s string, single bool) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	s = strings.TrimSuffix(s, ".")
	labels := strings.Split(s, ".")
	if len(labels) == 1 && !single {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if !isWordByte(l[i]) && l[i] != '-' {
				return false
			}
		}
	}
	return len(labels) == 1 || letterTLD(s)
}

// letterTLD says the last label of a dotted name is 2-24 letters.
func letterTLD(name string) bool {
	tld := name[strings.LastIndexByte(name, '.')+1:]
	if len(tld) < 2 || len(tld) > 24 || !strings.Contains(name, ".") {
		return false
	}
	for i := 0; i < len(tld); i++ {
		if !isLetter(tld[i]) {
			return false
		}
	}
	return true
}

// trimTrail drops sentence punctuation and unbalanced closing brackets from
// the end of a match found inside text.
func trimTrail(m string) string {
	for m != "" {
		last := m[len(m)-1]
		if strings.IndexByte(".,;:!?", last) >= 0 {
			m = m[:len(m)-1]
			continue
		}
		if open := strings.IndexByte(")]}>", last); open >= 0 && strings.Count(m, string("([{<"[open])) < strings.Count(m, string(last)) {
			m = m[:len(m)-1]
			continue
		}
		return m
	}
	return m
}

func isDigit(b byte) bool    { return b >= '0' && b <= '9' }
func isIPv4Byte(b byte) bool { return isDigit(b) || b == '.' }
func isMaskedIPv4Byte(b byte) bool {
	return isDigit(b) || b == '.' || b == 'x' || b == 'X' || b == '*'
}
func isHostByte(b byte) bool { return isDigit(b) || isLetter(b) || b == '-' || b == '.' || b == '_' }
func isLetter(b byte) bool   { return b|0x20 >= 'a' && b|0x20 <= 'z' }
func isHex(b byte) bool      { return isDigit(b) || b|0x20 >= 'a' && b|0x20 <= 'f' }
func isWordByte(b byte) bool { return isDigit(b) || isLetter(b) || b == '_' }
