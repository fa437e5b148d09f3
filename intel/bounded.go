package intel

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"github.com/secops-agent/investigator/internal/redact"
)

// Bounded decoding. A provider's answer (up to maxBody) is decoded straight
// into the typed fields a tool keeps, and every list or map among them keeps
// at most a fixed number of items, counting the rest without decoding them:
// three bytes of answer ("{},") never become a struct, a map or a string
// header in memory beyond those caps. A field OTX types loosely is read as a
// scalar (scalar, num), never as map[string]any.

// limit is a list's or map's cap, as a type (a Go type parameter carries no
// number).
type limit interface{ n() int }

type (
	upTo10   struct{}
	upTo100  struct{}
	upTo1000 struct{}
)

func (upTo10) n() int   { return 10 }
func (upTo100) n() int  { return 100 }
func (upTo1000) n() int { return 1000 }

// list decodes a JSON array into its first L items, with the array's full
// length in Total. An item of another shape than T is counted, not kept; a
// value that is no array (null included) is an empty list.
type list[T any, L limit] struct {
	Items []T
	Total int
}

func (l *list[T, L]) UnmarshalJSON(b []byte) error {
	*l = list[T, L]{}
	var lim L
	eachElement(b, func(e []byte) {
		l.Total++
		if len(l.Items) < lim.n() {
			var v T
			if json.Unmarshal(e, &v) == nil {
				l.Items = append(l.Items, v)
			}
		}
	})
	return nil
}

// dict decodes a JSON object into its first L members (in the answer's
// order), with the object's full member count in Total. A member of
// another shape than V is neither kept nor counted; a value that is no
// object is an empty dict.
type dict[V any, L limit] struct {
	Items map[string]V
	Total int
}

func (d *dict[V, L]) UnmarshalJSON(b []byte) error {
	var lim L
	d.Items, d.Total = keepMembers[V](b, lim.n(), nil)
	return nil
}

// keepMembers decodes the JSON object b (nothing when b is no object)
// member by member: the first n members, in the answer's order, whose
// value decodes as V and that keep accepts (nil accepts all), with the
// count of all it accepts. Past n, a member is decoded only for a keep that
// must see it, and then dropped.
func keepMembers[V any](b []byte, n int, keep func(key string, v V) bool) (items map[string]V, total int) {
	eachMember(b, func(k, e []byte) {
		if keep == nil && len(items) >= n {
			total++
			return
		}
		var key string
		var v V
		if json.Unmarshal(k, &key) != nil || json.Unmarshal(e, &v) != nil || (keep != nil && !keep(key, v)) {
			return
		}
		if total++; len(items) < n {
			if items == nil {
				items = map[string]V{}
			}
			items[key] = v
		}
	})
	return items, total
}

// scalar decodes a JSON string, number or boolean as trimmed text; an
// object, an array or null leaves it empty (providers are not consistent:
// an HTTP status may be "200" or 200).
type scalar string

func (s *scalar) UnmarshalJSON(b []byte) error {
	*s = ""
	switch {
	case len(b) == 0 || b[0] == '{' || b[0] == '[' || string(b) == "null":
	case b[0] == '"':
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		*s = scalar(strings.TrimSpace(str))
	default:
		*s = scalar(b)
	}
	return nil
}

// num decodes a JSON number or a short numeric string; anything else
// leaves it unset: a score or a count is no object or text.
type num struct {
	v  float64
	ok bool
}

func (n *num) UnmarshalJSON(b []byte) error {
	*n = num{}
	if len(b) == 0 || len(b) > 26 { // no number, and no copy of an object's bytes
		return nil
	}
	s := string(b)
	if b[0] == '"' && json.Unmarshal(b, &s) != nil {
		return nil
	}
	if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
		*n = num{v: f, ok: true}
	}
	return nil
}

// value is the number, or nil when unset (an omitempty field is left out).
func (n num) value() any {
	if !n.ok {
		return nil
	}
	return n.v
}

// present is true for a non-empty JSON array or object, whose contents are
// not decoded.
type present bool

func (p *present) UnmarshalJSON(b []byte) error {
	*p = false
	found := func([]byte) { *p = true }
	eachElement(b, found)
	eachMember(b, func(_, e []byte) { found(e) })
	return nil
}

// ---- a scanner of valid JSON (json.Unmarshal checked it) ----

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value that starts at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = skipString(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth <= 0 {
				if depth == 0 {
					return i + 1
				}
				return i // the end of a scalar's container
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// eachElement calls f with each element of the array b; nothing when b is
// no array.
func eachElement(b []byte, f func(elem []byte)) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] != ']'; {
		j := skipValue(b, i)
		if j <= i {
			return
		}
		f(b[i:j])
		if i = skipSpace(b, j); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
}

// eachMember calls f with each member's key (a JSON string) and value of
// the object b; nothing when b is no object.
func eachMember(b []byte, f func(key, value []byte)) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] == '"'; {
		k := skipString(b, i)
		key := b[i:k]
		if i = skipSpace(b, k); i >= len(b) || b[i] != ':' {
			return
		}
		i = skipSpace(b, i+1)
		j := skipValue(b, i)
		if j <= i {
			return
		}
		f(key, b[i:j])
		if i = skipSpace(b, j); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
}

// ---- redaction of what was decoded ----

// redactAll replaces the secrets in every string v reaches (map keys
// included): the decoded strings, with JSON escapes undone, so a key hidden
// behind "\u0074" is found. v is a pointer to what was decoded.
func redactAll(r *redact.Redactor, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(r.String(v.String()))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			redactAll(r, v.Elem())
		}
	case reflect.Interface:
		if !v.IsNil() && v.CanSet() {
			c := reflect.New(v.Elem().Type()).Elem()
			c.Set(v.Elem())
			redactAll(r, c)
			v.Set(c)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				redactAll(r, v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes: no decoded type here holds text as bytes
		}
		for i := range v.Len() {
			redactAll(r, v.Index(i))
		}
	case reflect.Map:
		keys := v.MapKeys()
		for _, k := range keys {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			redactAll(r, e)
			nk := reflect.New(k.Type()).Elem()
			nk.Set(k)
			redactAll(r, nk)
			v.SetMapIndex(k, reflect.Value{})
			v.SetMapIndex(nk, e)
		}
	}
}
