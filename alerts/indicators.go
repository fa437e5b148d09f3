package alerts

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Indicator kinds, in the order Indicators lists them.
const (
	KindIPv4          = "ipv4"
	KindIPv6          = "ipv6"
	KindDomain        = "domain"
	KindURL           = "url"
	KindEmail         = "email"
	KindMD5           = "md5"
	KindSHA1          = "sha1"
	KindSHA256        = "sha256"
	KindFilePath      = "file_path"
	KindCommandLine   = "command_line"
	KindUser          = "user"
	KindCloudResource = "cloud_resource"
)

// Kinds lists every indicator kind in the order Indicators sorts them.
var Kinds = []string{KindIPv4, KindIPv6, KindDomain, KindURL, KindEmail, KindMD5, KindSHA1, KindSHA256,
	KindFilePath, KindCommandLine, KindUser, KindCloudResource}

// Indicator is one observable found in an alert: its kind, its value exactly
// as the alert writes it (never clipped), and the path of the first place it
// was found, such as "process.parent.commandLine" or "resources[3].arn"
// (keys as the JSON writes them, unescaped; for an indicator in a key, the
// path of that key).
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
// in sorted key order and arrays in order, so the result is deterministic.
// Each (kind, value) pair appears once, with the first path it was found
// at; the list is sorted by kind (in the order of Kinds), then by where it
// was found.
//
// Values are recognised by their shape (see scanText for the rules), and
// for command_line, user and host names also by the field that holds them:
// a string under commandLine, cmdline, processCommandLine... is a command
// line; under userName, principalId, accountName, sAMAccountName,
// principalEmail, accessKeyId, user.name... a user; under hostname,
// computerDnsName, dnsName, fqdn, host... a domain (also a single-label host
// name). A 32/40/64-digit hex value in a field named as an identifier
// (id, findingId, machineId) is not reported as a hash.
func Indicators(data map[string]any) []Indicator {
	c := &collector{seen: map[string]bool{}}
	c.walk(data, "", "", "")
	order := map[string]int{}
	for i, k := range Kinds {
		order[k] = i
	}
	sort.SliceStable(c.out, func(i, j int) bool { return order[c.out[i].Kind] < order[c.out[j].Kind] })
	return c.out
}

type collector struct {
	seen map[string]bool
	out  []Indicator
}

func (c *collector) add(kind, value, path string) {
	k := kind + "\x00" + value
	if value == "" || c.seen[k] {
		return
	}
	c.seen[k] = true
	c.out = append(c.out, Indicator{Kind: kind, Value: value, Path: path})
}

// walk visits v, found at path under the field key, whose object is itself
// under the field parent.
func (c *collector) walk(v any, path, key, parent string) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			p := joinPath(path, k)
			scanText(c, k, p, "")
			c.walk(x[k], p, k, key)
		}
	case []any:
		for i, e := range x {
			c.walk(e, fmt.Sprintf("%s[%d]", path, i), key, parent) // elements keep the field's name
		}
	case string:
		c.field(x, path, key, parent)
		scanText(c, x, path, key)
	}
}

// field reports a string by the name of the field that holds it.
func (c *collector) field(s, path, key, parent string) {
	if placeholder(s) {
		return
	}
	k, p := normKey(key), normKey(parent)
	oneLine := !strings.ContainsAny(s, "\r\n")
	switch {
	case isCommandField(k):
		c.add(KindCommandLine, s, path)
	case oneLine && len(s) <= 512 && isUserField(k, p):
		c.add(KindUser, s, path)
	case oneLine && isHostField(k) && hostName(s, true):
		c.add(KindDomain, s, path)
	case oneLine && isPathField(k) && !strings.Contains(s, "://") && strings.ContainsAny(s, `/\`):
		c.add(KindFilePath, s, path)
	}
}

// normKey lowercases a field name and drops separators, so that userName,
// user_name and User-Name compare equal.
func normKey(k string) string {
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
		"serviceaccountemail", "usersid", "accountsid", "userid", "useremail")
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
