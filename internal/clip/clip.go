// Package clip shortens text to a byte budget. It is the project's only
// clipping helper, so every shortened value, in a prompt, a progress line, an
// activity summary or a tool result, carries the same mark and says how much
// was left out: nothing is cut silently.
package clip

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Marker begins the note that ends every clipped string: " …[cut N bytes]".
const Marker = " …[cut "

// String returns s when it fits in n bytes. Otherwise it returns the longest
// prefix of s, cut on a rune boundary, that fits in n bytes together with the
// note " …[cut N bytes]" naming how many bytes of s were left out. When n is
// too small even for the note, the note alone is returned.
func String(s string, n int) string { return StringAt(s, n, nil) }

// StringAt is String cutting only where cuttable(s, i) also allows a cut
// before s[i] (nil allows any): escaped text is not cut inside an escape
// ("&am"), which would be neither the text nor its escape.
func StringAt(s string, n int, cuttable func(s string, i int) bool) string {
	if len(s) <= n {
		return s
	}
	keep := max(n-len(note(len(s))), 0)
	for keep > 0 && (!utf8.RuneStart(s[keep]) || cuttable != nil && !cuttable(s, keep)) {
		keep--
	}
	return s[:keep] + note(len(s)-keep)
}

// Clipped reports whether s ends with a clip note.
func Clipped(s string) bool {
	i := strings.LastIndex(s, Marker)
	return i >= 0 && len(s) > i && s[len(s)-1] == ']'
}

func note(cut int) string { return Marker + strconv.Itoa(cut) + " bytes]" }
