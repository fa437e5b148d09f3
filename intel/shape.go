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

// usvtList is a capped list with the full count.
type usvtList[T any] struct {
	Total int `json:"total"`
	Items []T `json:"items"`
}

// usvtCap keeps at most n items, each clipped to width bytes; nil when empty.
func usvtCap(items list[string, upTo100], n, width int) *usvtList[string] {
	if items.Total == 0 {
		return nil
	}
	l := &usvtList[string]{Total: items.Total}
	for _, s := range items.Items[:min(n, len(items.Items))] {
		l.Items = append(l.Items, clip.String(s, width))
	}
	return l
}

// usvtName decodes a string, or an object's first name-like field (name,
// engine, label, key, category), as a list element may be either.
type usvtName string

func (n *usvtName) UnmarshalJSON(b []byte) error {
	*n = ""
	var s string
	if json.Unmarshal(b, &s) == nil {
		*n = usvtName(s)
		return nil
	}
	var o struct {
		Name     scalar `json:"name"`
		Engine   scalar `json:"engine"`
		Label    scalar `json:"label"`
		Key      scalar `json:"key"`
		Category scalar `json:"category"`
	}
	if json.Unmarshal(b, &o) == nil {
		for _, v := range []scalar{o.Name, o.Engine, o.Label, o.Key, o.Category} {
			if v != "" {
				*n = usvtName(v)
				break
			}
		}
	}
	return nil
}

// usvtNames returns at most n distinct names of a list, in order.
func usvtNames(raw list[usvtName, upTo100], n int) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range raw.Items {
		name := clip.String(strings.TrimSpace(string(r)), 60)
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
// bytes, and returns the count of non-empty strings too (and of those not
// decoded, beyond the list's cap).
func usvtClipAll(items list[string, upTo100], n, width int) ([]string, int) {
	var out []string
	total := items.Total - len(items.Items)
	for _, s := range items.Items {
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
