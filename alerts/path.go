package alerts

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/secops-agent/investigator/internal/clip"
)

// maxPathBytes bounds a path written into an error, an indicator or the
// field guide. Paths are written only when one is needed, never per value,
// and a path's prefixes are written once for all the values under it: an
// alert of 1 MiB can hold 20 levels of 1,500-byte keys, and a path per
// value of such an alert would take gigabytes.
const maxPathBytes = 200

// pathSeg is one step of a path inside an alert: a key, or (index >= 0) an
// array element.
type pathSeg struct {
	key   string
	index int
}

// jsonPath is the path of the value a walk is at, as a stack: push before
// visiting a child, pop after.
type jsonPath struct {
	segs []pathSeg
	// memo[i] is the searchable form of segs[:i+1], kept while those
	// segments stay on the stack.
	memo []pathText
}

// pathText is a path written out: at most maxPathBytes of it, and the
// length of the whole.
type pathText struct {
	text  string
	total int
}

func (p *jsonPath) pushKey(k string) { p.push(pathSeg{key: k, index: -1}) }
func (p *jsonPath) pushIndex(i int)  { p.push(pathSeg{index: i}) }

func (p *jsonPath) push(s pathSeg) {
	p.memo = p.memo[:min(len(p.memo), len(p.segs))]
	p.segs = append(p.segs, s)
}

func (p *jsonPath) pop() {
	p.segs = p.segs[:len(p.segs)-1]
	p.memo = p.memo[:min(len(p.memo), len(p.segs))]
}

// depth is the number of segments: 0 at the alert object.
func (p *jsonPath) depth() int { return len(p.segs) }

// names returns the name of the field that holds the value at the path and
// the name of the field that holds its object: an array element takes the
// name of its array ("" when there is none).
func (p *jsonPath) names() (key, parent string) {
	i := p.lastKey(len(p.segs) - 1)
	if i < 0 {
		return "", ""
	}
	if j := p.lastKey(i - 1); j >= 0 {
		parent = p.segs[j].key
	}
	return p.segs[i].key, parent
}

// lastKey is the index of the last key segment at or before i, or -1.
func (p *jsonPath) lastKey(i int) int {
	for ; i >= 0; i-- {
		if p.segs[i].index < 0 {
			return i
		}
	}
	return -1
}

// searchable writes the path as search_alerts and get_alert read it:
// "a.b[2].`c.d`", a key holding a dot or a backtick between backticks.
func (p *jsonPath) searchable() string {
	for i := len(p.memo); i < len(p.segs); i++ {
		var prev pathText
		if i > 0 {
			prev = p.memo[i-1]
		}
		p.memo = append(p.memo, prev.extend(p.segs[i], i == 0, true))
	}
	if len(p.segs) == 0 {
		return ""
	}
	return p.memo[len(p.segs)-1].String()
}

// raw writes the path with keys as the JSON has them, as error messages
// name places.
func (p *jsonPath) raw() string {
	var t pathText
	for i, s := range p.segs {
		t = t.extend(s, i == 0, false)
	}
	return t.String()
}

// extend is t followed by one more segment.
func (t pathText) extend(s pathSeg, first, quote bool) pathText {
	var seg string
	switch {
	case s.index >= 0:
		seg = "[" + strconv.Itoa(s.index) + "]"
	case quote:
		seg = pathSegment(s.key)
	default:
		seg = s.key
	}
	if !first && s.index < 0 {
		seg = "." + seg
	}
	t.total += len(seg)
	if room := maxPathBytes - len(t.text); room > 0 {
		t.text += seg[:min(len(seg), room)]
	}
	return t
}

// String is the path, or when it is longer than maxPathBytes its beginning
// with clip's mark, which counts every byte left out.
func (t pathText) String() string {
	if t.total <= maxPathBytes {
		return t.text
	}
	kept := t.text[:maxPathBytes-32] // room for the mark
	for !utf8.ValidString(kept) {    // a rune cut in two
		kept = kept[:len(kept)-1]
	}
	return kept + clip.Marker + strconv.Itoa(t.total-len(kept)) + " bytes]"
}

// where names the place at path for an error message.
func (p *jsonPath) where() string {
	if len(p.segs) == 0 {
		return "the top level"
	}
	return strconv.Quote(p.raw())
}

// under names the object at path for an error about one of its keys.
func (p *jsonPath) under() string {
	if len(p.segs) == 0 {
		return "at the top level"
	}
	return "under " + strconv.Quote(p.raw())
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
