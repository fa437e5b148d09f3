package intel

import (
	"encoding/json"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/secops-agent/investigator/internal/clip"
)

// Helpers shared by the URLScan.io and VirusTotal tools.

// usvtLooseString decodes a JSON string, number or boolean as text (providers
// are not consistent: an HTTP status may be "200" or 200).
type usvtLooseString string

func (s *usvtLooseString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = ""
		return nil
	}
	var str string
	if json.Unmarshal(b, &str) == nil {
		*s = usvtLooseString(str)
		return nil
	}
	*s = usvtLooseString(strings.Trim(string(b), `"`))
	return nil
}

// usvtList is a capped list with the full count.
type usvtList[T any] struct {
	Total int `json:"total"`
	Items []T `json:"items"`
}

// usvtCap keeps at most n items, each clipped to width bytes; nil when empty.
func usvtCap(items []string, n, width int) *usvtList[string] {
	if len(items) == 0 {
		return nil
	}
	l := &usvtList[string]{Total: len(items)}
	for _, s := range items[:min(n, len(items))] {
		l.Items = append(l.Items, clip.String(s, width))
	}
	return l
}

// usvtNames reads a list whose elements are strings or objects with a
// name-like field, returning at most n distinct, sorted-by-appearance names.
func usvtNames(raw []json.RawMessage, n int) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range raw {
		var name string
		if json.Unmarshal(r, &name) != nil {
			var o map[string]any
			if json.Unmarshal(r, &o) != nil {
				continue
			}
			for _, k := range []string{"name", "engine", "label", "key", "category"} {
				if v, ok := o[k].(string); ok && v != "" {
					name = v
					break
				}
			}
		}
		name = clip.String(strings.TrimSpace(name), 60)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, name)
		if len(out) == n {
			break
		}
	}
	return out
}

// usvtUnix formats Unix seconds as RFC 3339 UTC; empty for zero.
func usvtUnix(sec int64) string {
	if sec <= 0 {
		return ""
	}
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}

// usvtSortedValues returns the distinct values of m (ignoring case, in lower
// case), sorted, at most n, and the count of distinct values.
func usvtSortedValues(m map[string]string, n int) ([]string, int) {
	seen := map[string]bool{}
	var out []string
	for _, v := range m {
		v = strings.ToLower(strings.TrimSpace(v))
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, clip.String(v, 60))
		}
	}
	sort.Strings(out)
	return out[:min(n, len(out))], len(out)
}

// usvtClipAll keeps at most n non-empty strings, each clipped to width
// bytes, and returns the count of non-empty strings too.
func usvtClipAll(items []string, n, width int) ([]string, int) {
	var out []string
	total := 0
	for _, s := range items {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if total++; len(out) < n {
			out = append(out, clip.String(s, width))
		}
	}
	return out, total
}

// Bounds of provider strings by kind: the 16 KiB cap on a whole result
// does not keep one field from filling it.
const (
	maxDomain    = 253 // the longest DNS name
	maxCountry   = 8   // a country code, with room for "EU" or "N/A"
	maxTimestamp = 40  // RFC 3339 with fractions and a zone
	maxStatus    = 8   // an HTTP status
	maxASN       = 20  // "AS4294967295"
	maxNetwork   = 50  // an IPv6 CIDR
	maxWord      = 40  // a provider's short label (redirected: "off-domain")
)

// providerIP is s when it is an IP address (as written canonically), else
// "": an address field carries an address or nothing.
func providerIP(s string) string {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return ""
	}
	return a.String()
}

// fits is s when it fits in n bytes, else "": a code or a date that long
// is not one, and a clip note would not fit in its bound.
func fits(s string, n int) string {
	if len(s) > n {
		return ""
	}
	return s
}

// oneOf is s when it is one of allowed, else "".
func oneOf(s string, allowed ...string) string {
	if slices.Contains(allowed, s) {
		return s
	}
	return ""
}
