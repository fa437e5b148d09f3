package intake

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"unicode"
)

// Kinds of principal indicator, the prefixes of a grouping key.
const (
	KeyIP       = "ip"       // a source address: where the activity came from
	KeyUser     = "user"     // a user or principal
	KeyResource = "resource" // the resource acted on: instance, host, cloud resource
)

// Bounds of Keys: how deep and wide it looks, how long a value may be and
// how many keys one alert gives.
const (
	maxKeyDepth   = 12
	maxKeyArray   = 100
	maxKeyValue   = 256
	MaxAlertKeys  = 8
	maxKeysWalked = 10000
)

// A key is a kind, ":" and a value of at most maxKeyValue bytes once
// normalised (add refuses longer ones), so it always fits MaxKeyBytes: this
// constant overflows, and the package does not build, if the bounds drift.
const _ = uint(MaxKeyBytes - len(KeyResource) - 1 - maxKeyValue)

// Parts of a field's name (lower case, without separators) that say an
// address is where the activity came from, and parts that say it is not:
// "remoteIpDetails", "src_ip", "srcaddr", "sourceIPAddress", "callerIp",
// "client.ip" are sources; "localIpDetails", "dst_ip", "destination.ip"
// are not.
var (
	sourceParts = []string{"remote", "source", "src", "client", "caller", "attacker", "origin", "actor", "peer", "from"}
	targetParts = []string{"local", "dest", "dst", "target", "victim", "server", "resource"}
	// bareAddress names a field that holds the alert's one address: at the
	// top of an alert (or of its finding), it is where the activity came from.
	bareAddress = []string{"ip", "ipaddress", "ipaddr", "ipv4", "ipv6", "addr", "address"}
)

// reporterParts name the parts of an alert's pipeline: the SIEM's
// collector or device (CEF's dvc), ECS's observer and agent, Chronicle
// UDM's intermediary, a sensor or forwarder. What sits under them (their
// host, address, account) is who reported the alert, not its asset or
// actor, and would group unrelated alerts from one collector, so no key is
// taken from under them; a key left out only groups less.
var reporterParts = []string{"device", "observer", "collector", "sensor", "forwarder", "agent", "intermediary", "reporter", "logsource", "shipper", "relay"}

// userFields and resourceFields name the fields (lower case, without _ or
// -) that hold a user or principal, and the resource acted on.
var (
	userFields = []string{"username", "user", "principal", "principalid", "principalemail", "accountname",
		"samaccountname", "userprincipalname", "upn", "callerusername", "login"}
	resourceFields = []string{"instanceid", "resourcename", "resourceid", "resource", "hostname", "host",
		"computerdnsname", "computername", "devicename", "dbinstanceidentifier", "assetname"}
)

// Keys returns the alert's principal indicators as grouping keys, such as
// "ip:198.51.100.23", "user:alice", "resource:i-0abc": the addresses the
// activity came from (an IP under a field whose path says remote, source,
// src, client, caller or attacker, and not local or destination), users and
// principals, and the resources acted on (instance IDs, hosts, assets,
// resource names), never from under the pipeline that reported the alert
// (reported). It reads the finding inside an envelope (with an SCC
// notification's resource beside it), and the JSON object a raw-log field
// holds (embeddedObject). The result is the alert's own keys sorted
// (addresses, then users, then resources), then its raw log's the same
// way in the slots left, each key once, at most MaxAlertKeys.
func Keys(data map[string]any) []string {
	f, res := finding(data)
	w := &keyWalker{seen: map[string]bool{}, seenRaw: map[string]bool{}}
	w.walk(f, nil, 0)
	if res != nil {
		w.walk(res, []string{"resource"}, 1)
	}
	order := map[string]int{KeyIP: 0, KeyUser: 1, KeyResource: 2}
	byKind := func(a, b string) int {
		ka, _, _ := strings.Cut(a, ":")
		kb, _, _ := strings.Cut(b, ":")
		if order[ka] != order[kb] {
			return order[ka] - order[kb]
		}
		return strings.Compare(a, b)
	}
	slices.SortStableFunc(w.keys, byKind)
	slices.SortStableFunc(w.raw, byKind)
	keys := w.keys[:min(len(w.keys), MaxAlertKeys)]
	// A raw log's keys only fill the slots the alert's own fields left:
	// however many it holds, they never push out the alert's own.
	for _, k := range w.raw {
		if len(keys) >= MaxAlertKeys {
			break
		}
		if !w.seen[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

type keyWalker struct {
	keys     []string // from the alert's own fields
	raw      []string // from a raw log it holds (rawLogFields)
	seen     map[string]bool
	seenRaw  map[string]bool
	nodes    int
	embedded bool // walking a JSON object held in a raw-log string (embeddedObject)
}

func (w *keyWalker) walk(v any, path []string, depth int) {
	w.nodes++
	if depth > maxKeyDepth || w.nodes > maxKeysWalked {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			w.walk(x[k], append(path[:len(path):len(path)], k), depth+1)
		}
	case []any:
		for i, e := range x {
			if i >= maxKeyArray {
				break
			}
			w.walk(e, path, depth+1)
		}
	case string:
		if m := w.embeddedObject(path, x); m != nil {
			w.embedded = true
			w.walk(m, path, depth+1)
			w.embedded = false
			return
		}
		w.leaf(path, x)
	}
}

// maxEmbedded bounds a JSON object held in a string that Keys reads.
const maxEmbedded = 64 << 10

// rawLogFields name (lower case, without separators) the fields in which
// a source puts the raw event it alerted on as a string: a SIEM's
// raw_log, ECS's event.original. Only these are read as JSON: any other
// string (a request URI, a user agent, a command line) may be the
// attacker's own text, and read as fields it would choose the keys.
var rawLogFields = []string{"rawlog", "rawevent", "rawdata", "rawmessage", "event.original"}

// isRawLogField reports whether the field at path is one of rawLogFields:
// "original" counts only under "event" (ECS's url.original and
// user_agent.original are the client's own text).
func isRawLogField(path []string) bool {
	name := squash(path[len(path)-1])
	if len(path) > 1 {
		if slices.Contains(rawLogFields, squash(path[len(path)-2])+"."+name) {
			return true
		}
	}
	return slices.Contains(rawLogFields, name)
}

// embeddedObject is the JSON object a raw-log field holds (rawLogFields),
// such as a SIEM's raw_log ({"src_ip": "203.0.113.45", ...}), read like the
// alert's own fields (its keys only fill slots the alert's own left: Keys);
// nil for any other field, a string over maxEmbedded, or one inside
// another: together they parse at most the alert's own bytes.
func (w *keyWalker) embeddedObject(path []string, s string) map[string]any {
	s = strings.TrimSpace(s)
	if w.embedded || len(path) == 0 || !isRawLogField(path) ||
		len(s) > maxEmbedded || !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return nil
	}
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return m
}

// leaf classifies one string value by the field path that holds it.
func (w *keyWalker) leaf(path []string, value string) {
	value = strings.TrimSpace(value)
	if value == "" || len(value) > maxKeyValue || len(path) == 0 || placeholder(value) || reported(path) {
		return
	}
	name := squash(path[len(path)-1])
	parent := ""
	if len(path) > 1 {
		parent = squash(path[len(path)-2])
	}
	if addr, err := netip.ParseAddr(value); err == nil {
		if addr.IsLoopback() || addr.IsUnspecified() || addr.IsMulticast() || !fromSource(path) {
			return
		}
		w.add(KeyIP, addr.Unmap().String())
		return
	}
	switch {
	case slices.Contains(userFields, name) || (parent == "user" && (name == "name" || name == "email" || name == "id")):
		w.add(KeyUser, strings.ToLower(value))
	case slices.Contains(resourceFields, name) || (parent == "resource" && (name == "name" || name == "id")) ||
		((parent == "host" || parent == "asset") && name == "name"):
		w.add(KeyResource, value)
	}
}

// add keeps kind:value once. The value's length is checked here, after it
// was normalised: lower case can make it longer ("Ⱥ" is 2 bytes, "ⱥ" 3),
// and one over-long key would have the admission workflow refuse the
// whole batch its alert came in.
func (w *keyWalker) add(kind, value string) {
	if len(value) > maxKeyValue {
		return
	}
	key := kind + ":" + value
	switch {
	case w.embedded && !w.seenRaw[key]:
		w.seenRaw[key] = true
		w.raw = append(w.raw, key)
	case !w.embedded && !w.seen[key]:
		w.seen[key] = true
		w.keys = append(w.keys, key)
	}
}

// reported says whether a field lies under a part of the alert's pipeline
// (reporterParts): an object whose name is or ends with one, such as
// "device", "observer", "siem_collector".
func reported(path []string) bool {
	for _, p := range path[:len(path)-1] {
		name := squash(p)
		for _, r := range reporterParts {
			if strings.HasSuffix(name, r) {
				return true
			}
		}
	}
	return false
}

// fromSource says whether the last three elements of a field's path name
// where the activity came from (remoteIpDetails.ipAddressV4, src_ip,
// access.callerIp, source.ip) and none names where it went; a field named
// ip or address at the top of the alert counts as its source too.
func fromSource(path []string) bool {
	source := false
	for _, p := range path[max(0, len(path)-3):] {
		name := squash(p)
		for _, t := range targetParts {
			if strings.Contains(name, t) {
				return false
			}
		}
		for _, s := range sourceParts {
			source = source || strings.Contains(name, s)
		}
	}
	return source || (len(path) == 1 && slices.Contains(bareAddress, squash(path[0])))
}

// squash is a field name in lower case without separators: "user_name",
// "userName" and "User-Name" are all "username".
func squash(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == ' ' || r == '.' {
			return -1
		}
		return unicode.ToLower(r)
	}, s)
}

// placeholder says a value names nobody: "unknown", "-", "n/a".
func placeholder(v string) bool {
	switch strings.ToLower(v) {
	case "-", "n/a", "na", "none", "null", "unknown", "undefined", "":
		return true
	}
	return false
}
