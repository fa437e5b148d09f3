package alerts

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Indicator kinds, in the order Indicators ranks them.
const (
	KindIPv4          = "ipv4"
	KindIPv6          = "ipv6"
	KindDomain        = "domain"
	KindSHA256        = "sha256"
	KindSHA1          = "sha1"
	KindMD5           = "md5"
	KindUser          = "user"
	KindEmail         = "email"
	KindCloudResource = "cloud_resource"
	KindURL           = "url"
	KindIPv4Masked    = "ipv4_masked" // an anonymised address such as XXX.XXX.7.82: not an IP to look up
	KindFilePath      = "file_path"
	KindCommandLine   = "command_line"
)

// Kinds lists every indicator kind, most useful first: the order in which
// Indicators ranks them. Addresses and names come first because they are
// what intelligence tools, log queries and past alerts are searched by;
// hashes next (exact, but only about files); then who (users, e-mail) and
// which cloud resource; then URLs, whose host is listed already as an
// address or domain; then anonymised addresses (only a partial match is
// possible); file paths and command lines last, because they are long and
// the alert's own text says the most about them.
var Kinds = []string{KindIPv4, KindIPv6, KindDomain, KindSHA256, KindSHA1, KindMD5, KindUser, KindEmail,
	KindCloudResource, KindURL, KindIPv4Masked, KindFilePath, KindCommandLine}

// Indicator is one observable found in an alert: its kind, its value exactly
// as the alert writes it (never clipped), and the path of the first place it
// was found, such as "process.parent.commandLine" or "resources[3].arn",
// written as get_alert and search_alerts read paths (a key holding a dot
// between backticks; for an indicator in a key, the path of that key; for
// one inside a string that holds a JSON document, the path continues into
// that document). A path longer than 200 bytes is clipped with the mark.
type Indicator struct {
	Kind, Value, Path string
}

// String writes the indicator on one line: kind, value and path, each
// quoted only when it holds a control or invisible character.
func (in Indicator) String() string {
	return fmt.Sprintf("%s %s (at %s)", in.Kind, quoteIfOdd(in.Value), quoteIfOdd(in.Path))
}

func quoteIfOdd(s string) string {
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Indicators lists every indicator found anywhere in an alert's data: in
// string values and in keys (a key can be an IP or a hash), walking objects
// in sorted key order and arrays in order, and inside strings that hold a
// JSON object or array (values escaped twice, as SIEM exports write a raw
// event). Each (kind, value) pair appears once, with the first path it was
// found at. The list is ranked, most useful first: by kind in the order of
// Kinds, public addresses before private, loopback and link-local ones, then
// by where they were found.
//
// Values are recognised by their shape (see scanText for the rules), and
// for command_line, user and host names also by the field that holds them:
// a string under commandLine, cmdline, processCommandLine... is a command
// line; under userName, principalId, accountName, sAMAccountName,
// principalEmail, accessKeyId, user.name... a user; under hostname,
// computerDnsName, dnsName, fqdn, host... a domain (also a single-label host
// name). A 32/40/64-digit hex value in a field named as an identifier
// (id, findingId, machineId) is not reported as a hash.
//
// At most MaxPerKind indicators of one kind are listed (the first found);
// ScanIndicators says how many more there were. The work is linear in the
// size of the data, and paths are written only for the indicators listed.
func Indicators(data map[string]any) []Indicator {
	found, _ := ScanIndicators(data)
	return found
}

// MaxPerKind is the most indicators of one kind that Indicators lists: far
// more than a prompt or a search uses, and it bounds the memory an alert
// crafted to hold tens of thousands of addresses can take.
const MaxPerKind = 2000

// ScanIndicators is Indicators, also returning how many distinct
// indicators were left out of the list by MaxPerKind.
func ScanIndicators(data map[string]any) (found []Indicator, omitted int) {
	c := &collector{seen: map[seenKey]struct{}{}, perKind: map[string]int{}}
	c.walk(data)
	order := map[string]int{}
	for i, k := range Kinds {
		order[k] = 2 * i
	}
	ranks := make([]int, len(c.out))
	for i, in := range c.out {
		ranks[i] = order[in.Kind]
		if (in.Kind == KindIPv4 || in.Kind == KindIPv6) && !publicAddr(in.Value) {
			ranks[i]++
		}
	}
	idx := make([]int, len(c.out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return ranks[idx[i]] < ranks[idx[j]] })
	found = make([]Indicator, len(idx))
	for i, j := range idx {
		found[i] = c.out[j]
	}
	return found, c.omitted
}

// publicAddr says an address is neither private, loopback, link-local,
// multicast nor unspecified (documentation ranges count as public: alerts
// and tests use them for the outside world).
func publicAddr(s string) bool {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return false
	}
	a = a.Unmap()
	return !(a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsMulticast() || a.IsUnspecified() || a.Is4() && a.As4()[0] == 100 && a.As4()[1]&0xc0 == 64) // 100.64/10, carrier-grade NAT
}

// maxEmbeddedDepth bounds how deep walks go through JSON held in strings:
// each level of such nesting is escaped once more, so real exports have one
// or two, and the bound keeps a crafted alert from costing more.
const maxEmbeddedDepth = 2 * maxDepth

type seenKey struct{ kind, value string }

type collector struct {
	seen    map[seenKey]struct{}
	perKind map[string]int
	omitted int
	out     []Indicator
	path    jsonPath
	// at is the path string of the value being scanned, written on its
	// first indicator and reused for the others.
	at string
}

func (c *collector) add(kind, value string) {
	k := seenKey{kind, value}
	if value == "" {
		return
	}
	if _, dup := c.seen[k]; dup {
		return
	}
	c.seen[k] = struct{}{}
	if c.perKind[kind] >= MaxPerKind {
		c.omitted++
		return
	}
	c.perKind[kind]++
	if c.at == "" {
		c.at = c.path.searchable()
	}
	c.out = append(c.out, Indicator{Kind: kind, Value: value, Path: c.at})
}

// walk visits v, found at c.path.
func (c *collector) walk(v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			c.path.pushKey(k)
			c.at = ""
			scanText(c, k, "")
			c.walk(x[k])
			c.path.pop()
		}
	case []any:
		for i, e := range x {
			c.path.pushIndex(i)
			c.walk(e)
			c.path.pop()
		}
	case string:
		c.at = ""
		if doc, ok := embeddedJSON(x, c.path.depth()); ok {
			c.walk(doc)
			return
		}
		key, parent := c.path.names()
		c.field(x, key, parent)
		scanText(c, x, key)
	}
}

// embeddedJSON decodes a string that holds a JSON object or array (a raw
// event that an export escaped a second time), unless it lies deeper than
// maxEmbeddedDepth.
func embeddedJSON(s string, depth int) (any, bool) {
	t := strings.TrimSpace(s)
	if len(t) < 2 || !(t[0] == '{' && t[len(t)-1] == '}' || t[0] == '[' && t[len(t)-1] == ']') ||
		tooDeep([]byte(t), maxEmbeddedDepth-depth) || !json.Valid([]byte(t)) {
		return nil, false
	}
	v, err := DecodeJSON([]byte(t))
	if err != nil {
		return nil, false
	}
	return v, true
}

// field reports a string by the name of the field that holds it.
func (c *collector) field(s, key, parent string) {
	if placeholder(s) {
		return
	}
	k, p := normKey(key), normKey(parent)
	oneLine := !strings.ContainsAny(s, "\r\n")
	switch {
	case isCommandField(k):
		c.add(KindCommandLine, s)
	case oneLine && len(s) <= 512 && isUserField(k, p):
		c.add(KindUser, s)
	case oneLine && isHostField(k) && hostName(s, true):
		c.add(KindDomain, s)
	case oneLine && isPathField(k) && !strings.Contains(s, "://") && strings.ContainsAny(s, `/\`):
		c.add(KindFilePath, s)
	}
}

// normKey lowercases a field name and drops separators, so that userName,
// user_name and User-Name compare equal. A name longer than any the rules
// know is "" (it is read once per value under it, so the cost stays small).
func normKey(k string) string {
	if len(k) > 64 {
		return ""
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', ' ', '.':
			return -1
		}
		return unicode.ToLower(r)
	}, k)
}

func placeholder(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "-", "n/a", "na", "none", "null", "nil", "unknown", "undefined":
		return true
	}
	return false
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

// isCommandField says a field named k holds a whole command line; the
// elements of an argument array (args) are single arguments, not one.
func isCommandField(k string) bool {
	switch k {
	case "command", "cmd", "processarguments", "scriptblocktext":
		return true
	}
	return strings.Contains(k, "commandline") || strings.Contains(k, "cmdline")
}

// isUserField says a field named k, in an object named parent, holds a
// user or principal name.
func isUserField(k, parent string) bool {
	switch k {
	case "user", "principal", "login", "actor", "caller", "upn", "sid", "owner":
		return true
	case "name", "id", "email":
		if hasAnySuffix(parent, "user", "principal", "actor", "identity", "caller", "owner") {
			return true
		}
	}
	return hasAnySuffix(k, "username", "accountname", "principalname", "principalid", "principalemail",
		"userprincipalname", "accountupn", "samaccountname", "loginname", "accesskeyid", "serviceaccount",
		"serviceaccountemail", "usersid", "accountsid", "userid", "useremail",
		"用户", "用户名", "账号", "帐号", "账户", "登录名")
}

func isHostField(k string) bool {
	return k == "host" || hasAnySuffix(k, "hostname", "dnsname", "fqdn", "domain", "domainname", "computername", "devicename", "servername")
}

func isPathField(k string) bool {
	if strings.Contains(k, "url") || strings.Contains(k, "uri") || strings.Contains(k, "resource") {
		return false
	}
	switch k {
	case "file", "executable", "exe", "image", "imagefile", "binary", "directory", "folder":
		return true
	}
	return hasAnySuffix(k, "path", "filename", "filepath", "folderpath", "directory")
}

// idField says a field named k holds an identifier, not a hash, even when
// it looks like one (GuardDuty finding and detector IDs are 32 hex digits).
func idField(k string) bool {
	k = normKey(k)
	if strings.Contains(k, "hash") || strings.Contains(k, "md5") || strings.Contains(k, "sha") {
		return false
	}
	return strings.HasSuffix(k, "id") || strings.HasSuffix(k, "ids") || strings.HasSuffix(k, "uuid") || strings.HasSuffix(k, "guid")
}
