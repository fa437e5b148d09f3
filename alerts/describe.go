package alerts

import (
	"bytes"
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

	fields := leafFields(a.Data)
	if len(fields) == 0 {
		b.WriteString("\nThe alert has no data fields.")
		return b.String()
	}
	sort.Slice(fields, func(i, j int) bool {
		if fields[i].depth != fields[j].depth {
			return fields[i].depth < fields[j].depth
		}
		return fields[i].path < fields[j].path
	})
	shown := min(max(maxFields, 0), len(fields))
	fmt.Fprintf(&b, "\nFields under data (%d in all, shallow first):", len(fields))
	for _, f := range fields[:shown] {
		fmt.Fprintf(&b, "\n- %s (%s)", f.path, f.kind)
		if f.example != "" {
			b.WriteString(" = " + f.example)
		}
	}
	if rest := len(fields) - shown; rest > 0 {
		fmt.Fprintf(&b, "\n... and %d more fields", rest)
	}
	return b.String()
}

type leafField struct {
	path    string
	depth   int
	kind    string
	example string
}

// leafFields lists the leaves of data with their dotted paths.
func leafFields(data map[string]any) []leafField {
	var out []leafField
	var walk func(m map[string]any, prefix string, depth int)
	walk = func(m map[string]any, prefix string, depth int) {
		for k, v := range m {
			p := pathSegment(k)
			if prefix != "" {
				p = prefix + "." + p
			}
			switch x := v.(type) {
			case map[string]any:
				if len(x) > 0 {
					walk(x, p, depth+1)
					continue
				}
				out = append(out, leafField{path: p, depth: depth, kind: "object", example: "{}"})
			case []any:
				out = append(out, leafField{path: p, depth: depth, kind: fmt.Sprintf("array(%d)", len(x)), example: example(jsonText(x))})
			case string:
				out = append(out, leafField{path: p, depth: depth, kind: "string", example: example(jsonText(x))})
			case float64, int64:
				out = append(out, leafField{path: p, depth: depth, kind: "number", example: jsonText(x)})
			case bool:
				out = append(out, leafField{path: p, depth: depth, kind: "boolean", example: jsonText(x)})
			case nil:
				out = append(out, leafField{path: p, depth: depth, kind: "null", example: "null"})
			default: // not produced by encoding/json, but keep going
				out = append(out, leafField{path: p, depth: depth, kind: fmt.Sprintf("%T", x), example: example(fmt.Sprint(x))})
			}
		}
	}
	walk(data, "", 1)
	return out
}

// pathSegment writes one key of a dotted path, between backticks when it
// contains a dot or a backtick (with ` and \ escaped by a backslash).
func pathSegment(k string) string {
	if !strings.ContainsAny(k, ".`") {
		return k
	}
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`")
	return "`" + r.Replace(k) + "`"
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
