package alerts

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// maxExampleBytes is the longest example value Describe shows; a longer
// one is named by its size, never cut (the prompt lists the alert's
// indicators whole beside the guide).
const maxExampleBytes = 80

// example is v when it is short, else its size.
func example(v string) string {
	if len(v) <= maxExampleBytes {
		return v
	}
	return fmt.Sprintf("(%d bytes: not shown here)", len(v))
}

// Describe returns a short text description of the alert for a prompt: a
// header line (ID, source, type, severity, title, observed time) and a guide
// to at most maxFields of the fields under data, one line each, such as
// `- service.action.actionType (string) = "NETWORK_CONNECTION"`.
//
// Fields are the leaves of the JSON object: strings, numbers, booleans, nulls,
// arrays (shown whole, as array(n)) and empty objects. They are listed
// shallow first, then by path, and the guide ends with "... and N more
// fields" when maxFields cuts it short. A path segment that contains a dot or
// a backtick is written between backticks, as Search expects it. Example
// values longer than maxExampleBytes are named by their size, never cut.
func Describe(a Alert, maxFields int) string {
	var b strings.Builder
	observed := "unknown"
	if !a.ObservedAt.IsZero() {
		observed = a.ObservedAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(&b, "Alert %s | source: %s | type: %s | severity: %s | title: %s | observed: %s",
		a.ID, a.Source, jsonText(a.Type), a.Severity, jsonText(a.Title), observed)

	counts := leafCounts(a.Data)
	total := 0
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		b.WriteString("\nThe alert has no data fields.")
		return b.String()
	}
	shown := min(max(maxFields, 0), total)
	fields := shallowest(a.Data, counts, shown)
	fmt.Fprintf(&b, "\nFields under data (%d in all, shallow first):", total)
	for _, f := range fields {
		kind, ex := describeValue(f.value)
		fmt.Fprintf(&b, "\n- %s (%s)", f.path, kind)
		if ex != "" {
			b.WriteString(" = " + ex)
		}
	}
	if rest := total - shown; rest > 0 {
		fmt.Fprintf(&b, "\n... and %d more fields", rest)
	}
	return b.String()
}

// A leaf is a field of the guide: a string, number, boolean, null, array
// (shown whole) or empty object.
func isLeaf(v any) bool {
	m, ok := v.(map[string]any)
	return !ok || len(m) == 0
}

// leafCounts counts the leaves of data at each depth (index 0 is depth 1,
// the alert's top-level fields), without writing a path.
func leafCounts(data map[string]any) []int {
	var counts []int
	var walk func(m map[string]any, depth int)
	walk = func(m map[string]any, depth int) {
		for _, v := range m {
			if !isLeaf(v) {
				walk(v.(map[string]any), depth+1)
				continue
			}
			for len(counts) < depth {
				counts = append(counts, 0)
			}
			counts[depth-1]++
		}
	}
	walk(data, 1)
	return counts
}

type leafField struct {
	path  string
	depth int
	value any
}

// shallowest returns the n leaves of data that come first by depth, then by
// path. Paths are written only for leaves at the depths that can be shown,
// and at the last such depth a heap keeps only the first ones, so the work
// stays linear and the memory small however many fields the alert has.
func shallowest(data map[string]any, counts []int, n int) []leafField {
	if n <= 0 {
		return nil
	}
	last, before := 0, 0 // the deepest depth shown; leaves shallower than it
	for last < len(counts) && before+counts[last] < n {
		before += counts[last]
		last++
	}
	last++ // as a depth (1-based)
	keep := &fieldHeap{}
	var path jsonPath
	var walk func(m map[string]any)
	walk = func(m map[string]any) {
		for k, v := range m {
			path.pushKey(k)
			depth := path.depth()
			switch {
			case !isLeaf(v):
				if depth < last {
					walk(v.(map[string]any))
				}
			case depth < last:
				keep.all = append(keep.all, leafField{path: path.searchable(), depth: depth, value: v})
			case depth == last:
				f := leafField{path: path.searchable(), depth: depth, value: v}
				if len(keep.last) < n-before {
					heap.Push(keep, f)
				} else if f.path < keep.last[0].path {
					keep.last[0] = f
					heap.Fix(keep, 0)
				}
			}
			path.pop()
		}
	}
	walk(data)
	out := append(keep.all, keep.last...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].depth != out[j].depth {
			return out[i].depth < out[j].depth
		}
		return out[i].path < out[j].path
	})
	return out
}

// fieldHeap holds every leaf above the last depth shown (all) and a
// max-heap by path of the first ones at that depth (last).
type fieldHeap struct {
	all, last []leafField
}

func (h *fieldHeap) Len() int           { return len(h.last) }
func (h *fieldHeap) Less(i, j int) bool { return h.last[i].path > h.last[j].path }
func (h *fieldHeap) Swap(i, j int)      { h.last[i], h.last[j] = h.last[j], h.last[i] }
func (h *fieldHeap) Push(x any)         { h.last = append(h.last, x.(leafField)) }
func (h *fieldHeap) Pop() any {
	f := h.last[len(h.last)-1]
	h.last = h.last[:len(h.last)-1]
	return f
}

// describeValue names a leaf's kind and gives an example of it.
func describeValue(v any) (kind, ex string) {
	switch x := v.(type) {
	case map[string]any:
		return "object", "{}"
	case []any:
		return fmt.Sprintf("array(%d)", len(x)), example(jsonText(x))
	case string:
		return "string", example(jsonText(x))
	case float64, int64:
		return "number", jsonText(x)
	case bool:
		return "boolean", jsonText(x)
	case nil:
		return "null", "null"
	default: // not produced by encoding/json, but keep going
		return fmt.Sprintf("%T", x), example(fmt.Sprint(x))
	}
}

// jsonText encodes v as compact JSON without HTML escaping.
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
