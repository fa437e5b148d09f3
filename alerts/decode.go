package alerts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DecodeJSON decodes one JSON value exactly: objects become map[string]any,
// arrays []any, and numbers follow Number. Unlike json.Unmarshal it refuses
// an object that has the same key twice (which value counts would differ
// between readers), naming the key and where it is, and a value nested more
// than maxDepth levels (the value itself is level 1), as soon as the decoder
// reaches the level too many: nothing is built for it or below it. The
// input must be valid JSON (check it first, as Parse does, for an error with
// line and column).
func DecodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	d := decoder{dec: dec}
	return d.value()
}

// decoder reads one value from a token stream. path is the stack of keys
// and indices down to the current value; it is written out only for an
// error, so decoding does no work per level beyond a push and a pop.
type decoder struct {
	dec  *json.Decoder
	path jsonPath
}

// value reads the value that starts at the decoder's next token.
func (d *decoder) value() (any, error) {
	tok, err := d.dec.Token()
	if err != nil {
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		if n, ok := tok.(json.Number); ok {
			return Number(string(n)), nil
		}
		return tok, nil // string, bool, nil
	}
	if d.path.depth() >= maxDepth {
		return nil, depthError(&d.path)
	}
	switch delim {
	case '{':
		obj := map[string]any{}
		for d.dec.More() {
			kt, err := d.dec.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("expected an object key at %s", d.path.where())
			}
			if _, dup := obj[k]; dup {
				return nil, fmt.Errorf("the alert has the key %q twice at %s", k, d.path.where())
			}
			d.path.pushKey(k)
			v, err := d.value()
			d.path.pop()
			if err != nil {
				return nil, err
			}
			obj[k] = v
		}
		_, err := d.dec.Token() // '}'
		return obj, err
	case '[':
		arr := []any{}
		for d.dec.More() {
			d.path.pushIndex(len(arr))
			v, err := d.value()
			d.path.pop()
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := d.dec.Token() // ']'
		return arr, err
	}
	return nil, fmt.Errorf("unexpected %q at %s", rune(delim), d.path.where())
}

// depthError is the error for an object or array at path, one level deeper
// than maxDepth allows.
func depthError(path *jsonPath) error {
	return fmt.Errorf("the alert is nested more than %d levels deep at %s, which Firestore cannot store", maxDepth, path.where())
}

// tooDeep reports whether raw, read as JSON, opens an object or array more
// than limit levels deep. It counts brackets outside strings in one pass
// and allocates nothing, so it can run before any decoding; it does not
// check the syntax.
func tooDeep(raw []byte, limit int) bool {
	depth, inString := 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > limit {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// Number converts a JSON number literal to the value an alert keeps:
//   - a whole number that fits int64 becomes int64 (42, 1e3, 1.0), so IDs,
//     account numbers and epoch nanoseconds keep every digit, and a value
//     has the same type after a round trip through canonical JSON;
//   - any other literal becomes float64 when the float's shortest form is
//     exactly the literal's decimal value (0.1, 2.5e-300, 1e20);
//   - otherwise (12345678901234567890123, 1e999, 0.1000000000000000000001)
//     the literal's text is kept as a string.
//
// Firestore has no decimal type, and rounding would silently change an
// identifier that the model is meant to search for or quote, so text is the
// only exact form that stores; search such a value as a string. Zero
// written with a fraction or a minus sign (0.0, -0) stays the float it
// always decoded to, so alert IDs do not move.
func Number(lit string) any {
	if !strings.ContainsAny(lit, ".eE") {
		if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
			if i == 0 && strings.HasPrefix(lit, "-") {
				return math.Copysign(0, -1)
			}
			return i
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return lit
	}
	if !sameDecimal(strconv.FormatFloat(f, 'g', -1, 64), lit) {
		return lit
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 && f != 0 {
		return int64(f) // 1e3 and 1.0 are whole: the same type as 1000 and 1
	}
	return f
}

// ErrNotFinite is returned by ParseNumber for NaN, infinities and literals
// too large for a float64.
var ErrNotFinite = errors.New("not a finite number")

// ErrInexact is returned by ParseNumber for a number that no int64 or
// float64 holds exactly.
var ErrInexact = errors.New("not exactly representable as a number")

// ParseNumber reads a number given as text (a JSON number, optionally with
// a leading "+") for a comparison with stored alerts: int64 or float64 as
// Number decodes it. It refuses what is not a JSON number, non-finite values
// (ErrNotFinite) and values Number would keep as text (ErrInexact).
func ParseNumber(s string) (any, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "+")
	if f, err := strconv.ParseFloat(s, 64); (err == nil || errors.Is(err, strconv.ErrRange)) && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return nil, ErrNotFinite
	}
	if s == "" || !strings.ContainsAny(s[:1], "-0123456789") || !json.Valid([]byte(s)) {
		return nil, errors.New("not a number")
	}
	v := Number(s)
	if _, ok := v.(string); ok {
		return nil, ErrInexact
	}
	return v, nil
}

// sameDecimal says two decimal literals (as JSON or strconv write them)
// denote the same value. It compares their significant digits and the
// position of the decimal point, so it never builds a big number from an
// exponent such as 1e999999999.
func sameDecimal(a, b string) bool {
	na, da, ea, oka := normDecimal(a)
	nb, db, eb, okb := normDecimal(b)
	if !oka || !okb {
		return false
	}
	if da == "" || db == "" { // zero, whatever its sign
		return da == db
	}
	return na == nb && da == db && ea == eb
}

// normDecimal writes a decimal literal as sign, significant digits (no
// leading or trailing zeros; "" for zero) and exponent e, so that the value
// is 0.digits × 10^e. ok is false when the exponent does not fit an int.
func normDecimal(s string) (neg bool, digits string, exp int, ok bool) {
	neg = strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	all := intPart + frac
	point := len(intPart)
	trimmed := strings.TrimLeft(all, "0")
	point -= len(all) - len(trimmed)
	digits = strings.TrimRight(trimmed, "0")
	if digits == "" {
		return neg, "", 0, true
	}
	if hasExp {
		e, err := strconv.Atoi(expText)
		if err != nil || e > 1<<30 || e < -(1<<30) {
			return neg, digits, 0, false
		}
		point += e
	}
	return neg, digits, point, true
}
