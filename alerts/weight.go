package alerts

import "math/bits"

// maxDecodedBytes bounds the memory an alert's decoded data (Alert.Data)
// may take, as decodedBytes estimates it. A 1 MiB alert of real findings
// or log lines decodes to 1 to 5 MiB; one of nothing but tiny objects
// ({"a":[{"b":[{},{},…]}]}) decoded to 21 MiB, and held that through its
// Firestore write with up to --max-outstanding others (design/intake.md,
// step 2).
const maxDecodedBytes = 8 << 20

// The heap the decoder's values take on a 64-bit Go (1.24 and later,
// whose maps are Swiss tables), measured by TestDecodedBytesEstimate: a map
// header, one group of 8 slots of a string key and an any value (and its
// control word), an interface's boxed string header or number, a slice
// header boxed in an interface, an element of []any.
const (
	mapHeaderBytes   = 48
	mapGroupBytes    = 8 + 8*(16+16)
	mapTableBytes    = 64
	boxedStringBytes = 16
	boxedNumberBytes = 8
	sliceHeaderBytes = 24
	elementBytes     = 16
)

// decodedBytes estimates, from valid JSON nested at most maxDepth levels,
// the heap DecodeJSON's tree of it takes, and counts its values. It scans
// the bytes once, keeping one counter a level, and allocates nothing, so
// a disproportionate alert is refused before it is decoded. The estimate
// errs high: it counts the room append and map growth may leave unused.
func decodedBytes(valid []byte) (total, values int) {
	type level struct {
		object bool
		n      int // entries or elements so far
	}
	var stack [maxDepth + 1]level
	depth := 0
	expectKey := false
	element := func() {
		values++
		if depth > 0 && !stack[depth-1].object {
			stack[depth-1].n++
		}
	}
	for i := 0; i < len(valid); {
		switch c := valid[i]; c {
		case ' ', '\t', '\n', '\r', ':':
			i++
		case ',':
			expectKey = depth > 0 && stack[depth-1].object
			i++
		case '{', '[':
			element()
			if depth == len(stack) { // deeper than Parse lets through: refuse
				return 1 << 62, values
			}
			stack[depth] = level{object: c == '{'}
			depth++
			expectKey = c == '{'
			i++
		case '}', ']':
			if depth == 0 {
				return total, values
			}
			depth--
			if l := stack[depth]; l.object {
				total += mapBytes(l.n)
			} else {
				total += sliceBytes(l.n)
			}
			i++
		case '"':
			j := i + 1
			for j < len(valid) && valid[j] != '"' {
				if valid[j] == '\\' {
					j++
				}
				j++
			}
			n := roundUp8(j - i - 1) // the escaped length: at least the string's
			if expectKey {
				stack[depth-1].n++
				values++
				total += n // its header is in the map's slot
				expectKey = false
			} else {
				element()
				total += boxedStringBytes + n
			}
			i = j + 1
		default: // a number, true, false or null
			j := i
			for j < len(valid) && !isJSONDelim(valid[j]) {
				j++
			}
			element()
			switch n := j - i; {
			case c == 't' || c == 'f' || c == 'n':
			case n > 15: // may be kept as its text (Number)
				total += boxedStringBytes + roundUp8(n)
			default:
				total += boxedNumberBytes
			}
			i = j
		}
	}
	return total, values
}

func isJSONDelim(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r', ':':
		return true
	}
	return false
}

func roundUp8(n int) int { return (n + 7) &^ 7 }

// mapBytes is a map[string]any of n entries: a header, then one group up
// to 8 entries, then tables of groups at most 7/8 full.
func mapBytes(n int) int {
	switch {
	case n == 0:
		return mapHeaderBytes
	case n <= 8:
		return mapHeaderBytes + mapGroupBytes
	}
	slots := 1 << bits.Len(uint(n*8/7))
	return mapHeaderBytes + slots/8*mapGroupBytes + (slots/1024+1)*mapTableBytes
}

// sliceBytes is a []any of n elements in an interface, with the room
// append's doubling (to 256 elements, then about 1.25×) may leave.
func sliceBytes(n int) int {
	switch {
	case n == 0:
		return sliceHeaderBytes
	case n <= 256:
		return sliceHeaderBytes + elementBytes<<bits.Len(uint(n-1))
	}
	return sliceHeaderBytes + elementBytes*(n+n/4+192)
}
