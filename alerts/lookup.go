package alerts

import (
	"fmt"
	"strconv"
	"strings"
)

// maxKeysNamed is how many of an object's keys a Lookup error names.
const maxKeysNamed = 20

// Lookup returns the value at path in an alert's data. The path is written
// as Describe, Indicators and Search write paths: keys joined by dots, a
// key holding a dot or a backtick between backticks (backslash escapes),
// array elements as [n] (or a number as a key); a string that holds a JSON
// object or array is read into, as Indicators does. An error names the
// part of the path that is missing and what is there instead.
func Lookup(data map[string]any, path string) (any, error) {
	segs, err := parseLookupPath(path)
	if err != nil {
		return nil, err
	}
	var at jsonPath
	var v any = data
	for _, s := range segs {
		if str, ok := v.(string); ok {
			if doc, ok := embeddedJSON(str, at.depth()); ok {
				v = doc
			}
		}
		switch x := v.(type) {
		case map[string]any:
			if s.index >= 0 {
				return nil, fmt.Errorf("%s is an object, not an array: %s", at.named(), fieldNames(x))
			}
			next, ok := x[s.key]
			if !ok {
				return nil, fmt.Errorf("no field %q in %s: %s", s.key, at.named(), fieldNames(x))
			}
			at.pushKey(s.key)
			v = next
		case []any:
			i := s.index
			if i < 0 {
				n, err := strconv.Atoi(s.key)
				if err != nil {
					return nil, fmt.Errorf("%s is an array of %d elements: give an index such as [0], not %q", at.named(), len(x), s.key)
				}
				i = n
			}
			if i < 0 || i >= len(x) {
				return nil, fmt.Errorf("%s has %d elements: [%d] is past its end", at.named(), len(x), i)
			}
			at.pushIndex(i)
			v = x[i]
		default:
			return nil, fmt.Errorf("%s is %s, which has no fields", at.named(), kindName(v))
		}
	}
	return v, nil
}

// named names the value at the path in a Lookup error.
func (p *jsonPath) named() string {
	if p.depth() == 0 {
		return "the alert's data"
	}
	return strconv.Quote(p.searchable())
}

func fieldNames(m map[string]any) string {
	keys := sortedKeys(m)
	if len(keys) == 0 {
		return "it has no fields"
	}
	quoted := make([]string, 0, min(len(keys), maxKeysNamed))
	for _, k := range keys[:min(len(keys), maxKeysNamed)] {
		quoted = append(quoted, pathSegment(k))
	}
	more := ""
	if len(keys) > maxKeysNamed {
		more = fmt.Sprintf(" and %d more", len(keys)-maxKeysNamed)
	}
	return "its fields are " + strings.Join(quoted, ", ") + more
}

func kindName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}

// parseLookupPath splits a path into keys and [n] indices.
func parseLookupPath(path string) ([]pathSeg, error) {
	path = strings.TrimSpace(path)
	if path == "" {
		return nil, fmt.Errorf("the path is empty")
	}
	var segs []pathSeg
	var cur strings.Builder
	quoted, hasKey := false, false
	endKey := func() error {
		if !hasKey {
			return fmt.Errorf("the path %q has an empty segment", path)
		}
		segs = append(segs, pathSeg{key: cur.String(), index: -1})
		cur.Reset()
		hasKey = false
		return nil
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case quoted && c == '\\' && i+1 < len(path):
			i++
			cur.WriteByte(path[i])
		case c == '`':
			quoted, hasKey = !quoted, true
		case quoted:
			cur.WriteByte(c)
		case c == '.':
			if err := endKey(); err != nil {
				return nil, err
			}
		case c == '[':
			if hasKey {
				if err := endKey(); err != nil {
					return nil, err
				}
			}
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("the path %q has an unclosed [", path)
			}
			n, err := strconv.Atoi(path[i+1 : i+j])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("the path %q has %s where an array index such as [0] belongs", path, path[i:i+j+1])
			}
			segs = append(segs, pathSeg{index: n})
			i += j
			if i+1 < len(path) && path[i+1] == '.' {
				i++
				if i+1 == len(path) {
					return nil, fmt.Errorf("the path %q has an empty segment", path)
				}
			}
		default:
			cur.WriteByte(c)
			hasKey = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("the path %q has an unclosed backtick", path)
	}
	if hasKey {
		segs = append(segs, pathSeg{key: cur.String(), index: -1})
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("the path %q names no field", path)
	}
	return segs, nil
}
