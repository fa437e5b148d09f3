package standin

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/secops-agent/investigator/alerts"
)

// Names of the data blocks activities/alert.go puts an alert in: the whole
// data, or (for a large alert) its indicators, one per line.
const (
	alertBlock      = "alert"
	indicatorsBlock = "alert indicators"
)

// alertInfo is what the script needs of an alert, read from its data.
type alertInfo struct {
	ID, Type, Title, Severity string
	// Source is the address the activity came from (an IP in a field named
	// remote, source, src, client or caller), when the alert names one.
	Source, SourcePath string
	// Key is the address to look for in earlier alerts: Source, or else the
	// first public IP; Field and Op are the search_alerts condition for it.
	Key, Field, Op string
	Host, Instance string
	First, Last    time.Time
	Count          int
	Users, Files   []string
	Hashes, Cmds   []string
}

// alertFromPage reads the alert of a prompt: its ID from the label line,
// the rest from the "alert" data block, or from "alert indicators".
func alertFromPage(p page) alertInfo {
	id := p.alertID()
	if raw, ok := p.block(alertBlock); ok {
		if al, err := alerts.Parse([]byte(raw)); err == nil {
			info := alertFromData(al.Data)
			info.ID, info.Type, info.Title, info.Severity = id, al.Type, al.Title, al.Severity
			if info.First.IsZero() {
				info.First = al.ObservedAt
			}
			return info
		}
	}
	info := alertInfo{ID: id}
	if lines, ok := p.block(indicatorsBlock); ok {
		var found []alerts.Indicator
		for _, l := range strings.Split(lines, "\n") {
			if in, ok := parseIndicator(l); ok {
				found = append(found, in)
			}
		}
		info.fromIndicators(found, true)
	}
	return info
}

// alertFromResult reads a get_alert result: {id, type, severity, title,
// observed_at, data}.
func alertFromResult(res map[string]any) alertInfo {
	data, _ := res["data"].(map[string]any)
	info := alertFromData(data)
	info.ID, info.Type, info.Title, info.Severity = str(res["id"]), str(res["type"]), str(res["title"]), str(res["severity"])
	if info.First.IsZero() {
		info.First, _ = time.Parse(time.RFC3339, str(res["observed_at"]))
	}
	return info
}

// parseIndicator reads "<kind> <value> (at <path>)", as
// alerts.Indicator.String writes it (values with odd characters, which it
// quotes, are skipped).
func parseIndicator(line string) (alerts.Indicator, bool) {
	kind, rest, ok := strings.Cut(line, " ")
	if !ok || !strings.HasSuffix(rest, ")") {
		return alerts.Indicator{}, false
	}
	i := strings.LastIndex(rest, " (at ")
	if i < 0 {
		return alerts.Indicator{}, false
	}
	return alerts.Indicator{Kind: kind, Value: rest[:i], Path: strings.TrimSuffix(rest[i+len(" (at "):], ")")}, true
}

func alertFromData(data map[string]any) alertInfo {
	var info alertInfo
	if data == nil {
		return info
	}
	w := &walker{}
	w.walk(data, "", "")
	// Addresses by the field that holds them whole (an indicator's path is
	// where it first appears, often a description).
	for _, a := range w.addresses {
		info.addAddress(a[0], a[1])
	}
	info.fromIndicators(alerts.Indicators(data), false)
	info.Host, info.Instance, info.Count = w.host(), w.instance, w.count
	info.First, info.Last = w.first, w.last
	return info
}

// sourceWords mark a field that holds where the activity came from, as a
// word of its name or of its parent's (remoteIpDetails.ipAddressV4,
// client_ip, srcIp).
var sourceWords = []string{"remote", "source", "src", "client", "caller", "attacker"}

// addAddress considers a public IP held by the field at path: the first one
// in a source field is the source, and the address to search earlier alerts
// for is the source, else the first public address that can be searched.
func (info *alertInfo) addAddress(path, value string) {
	addr, err := netip.ParseAddr(value)
	if err != nil || addr.IsPrivate() || addr.IsLoopback() || addr.IsLinkLocalUnicast() || addr.IsUnspecified() {
		return
	}
	field, op, searchable := searchCondition(path)
	source := info.Source == "" && namesSource(path)
	if source {
		info.Source, info.SourcePath = value, path
	}
	if searchable && (source || info.Key == "") {
		info.Key, info.Field, info.Op = value, field, op
	}
}

// namesSource says whether the last two names of path hold a source word.
func namesSource(path string) bool {
	segs := strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' || r == ']' })
	if len(segs) > 2 {
		segs = segs[len(segs)-2:]
	}
	for _, s := range segs {
		for _, w := range words(s) {
			if slices.Contains(sourceWords, w) {
				return true
			}
		}
	}
	return false
}

// words splits a field name into lower-case words at underscores, dashes,
// digits and camelCase humps.
func words(name string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = nil
		}
	}
	for _, r := range name {
		switch {
		case unicode.IsUpper(r):
			flush()
			cur = append(cur, r)
		case unicode.IsLetter(r):
			cur = append(cur, r)
		default:
			flush()
		}
	}
	flush()
	return out
}

// fromIndicators takes users, files, hashes, command lines and instance IDs
// from the indicators, and addresses too when the alert's fields are not at
// hand (an indicator's path is where it first appears, maybe a description).
func (info *alertInfo) fromIndicators(found []alerts.Indicator, addresses bool) {
	for _, in := range found {
		switch in.Kind {
		case alerts.KindIPv4, alerts.KindIPv6:
			if addresses {
				info.addAddress(in.Path, in.Value)
			}
		case alerts.KindUser:
			info.Users = appendNew(info.Users, in.Value)
		case alerts.KindFilePath:
			info.Files = appendNew(info.Files, in.Value)
		case alerts.KindSHA256, alerts.KindSHA1, alerts.KindMD5:
			info.Hashes = appendNew(info.Hashes, in.Value)
		case alerts.KindCommandLine:
			info.Cmds = appendNew(info.Cmds, in.Value)
		case alerts.KindCloudResource:
			if info.Instance == "" && strings.HasPrefix(in.Value, "i-") {
				info.Instance = in.Value
			}
		}
	}
}

// searchCondition turns an indicator's path into a search_alerts
// condition: a plain field is compared with ==, the element of an array of
// values with array-contains; other paths inside arrays cannot be searched.
func searchCondition(path string) (field, op string, ok bool) {
	i := strings.IndexByte(path, '[')
	switch {
	case i < 0:
		return path, "==", true
	case i > 0 && strings.IndexByte(path[i+1:], '[') < 0 && strings.HasSuffix(path, "]"):
		if _, err := strconv.Atoi(path[i+1 : len(path)-1]); err == nil {
			return path[:i], "array-contains", true
		}
	}
	return "", "", false
}

func appendNew(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// walker collects host, instance, time window and count from an alert's
// fields, in sorted key order so the result is deterministic.
type walker struct {
	tagName, hostname, display string
	instance                   string
	first, last                time.Time
	count                      int
	addresses                  [][2]string // path, value of fields holding an IP
}

func (w *walker) host() string {
	for _, h := range []string{w.tagName, w.hostname, w.display} {
		if h != "" {
			return h
		}
	}
	return ""
}

func (w *walker) walk(v any, path, key string) {
	switch x := v.(type) {
	case map[string]any:
		// A tag {"key": "Name", "value": "web-server-prod-01"} names the host.
		if k, _ := field(x, "key").(string); strings.EqualFold(k, "name") && w.tagName == "" {
			w.tagName, _ = field(x, "value").(string)
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			w.walk(x[k], joinPath(path, k), k)
		}
	case []any:
		for i, e := range x {
			w.walk(e, path+"["+strconv.Itoa(i)+"]", key)
		}
	case string:
		if _, err := netip.ParseAddr(x); err == nil {
			w.addresses = append(w.addresses, [2]string{path, x})
		}
		w.leaf(strings.ToLower(strings.ReplaceAll(key, "_", "")), x)
	default:
		if strings.EqualFold(key, "count") && w.count == 0 {
			if n, err := strconv.Atoi(strings.TrimSpace(str(x))); err == nil {
				w.count = n
			}
		}
	}
}

func (w *walker) leaf(key, s string) {
	set := func(dst *string) {
		if *dst == "" {
			*dst = s
		}
	}
	switch key {
	case "hostname", "host", "computername", "devicename", "computerdnsname":
		set(&w.hostname)
	case "displayname", "instancedisplayname", "instancename":
		set(&w.display)
	case "instanceid":
		set(&w.instance)
	case "eventfirstseen", "firstseen", "starttime":
		if t, err := time.Parse(time.RFC3339, s); err == nil && w.first.IsZero() {
			w.first = t.UTC()
		}
	case "eventlastseen", "lastseen", "endtime":
		if t, err := time.Parse(time.RFC3339, s); err == nil && w.last.IsZero() {
			w.last = t.UTC()
		}
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// field reads a key in either case ("key" or "Key").
func field(m map[string]any, name string) any {
	if v, ok := m[name]; ok {
		return v
	}
	return m[strings.ToUpper(name[:1])+name[1:]]
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		raw, _ := json.Marshal(x)
		return string(raw)
	}
}
