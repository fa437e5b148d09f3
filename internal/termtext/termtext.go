// Package termtext makes untrusted text (alert fields, tool output, model
// answers) safe to print on a terminal: nothing in it can move the cursor,
// clear the screen, set the window title, plant a hyperlink, ring the bell
// or reorder what the analyst reads; and in Markdown the Temporal Web UI
// renders, nothing is a link or emphasis (markdown.go).
package termtext

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Clean returns s without what a terminal would act on instead of showing:
// escape sequences whole (CSI such as ESC [2J, OSC such as the ESC ]8;;URL
// ESC \ hyperlink, DCS/APC/PM/SOS strings, two-byte escapes), the other C0
// controls but newline and tab (a CRLF becomes a newline, and a bare CR,
// which would let text overwrite the line, one too), DEL,
// the C1 controls U+0080-U+009F, and the bidirectional overrides and
// isolates U+202A-U+202E and U+2066-U+2069. Bytes that are not UTF-8 become
// U+FFFD (a terminal may read a lone 0x9B as CSI). Newlines and tabs stay, so
// Markdown keeps its shape. An escape string left unterminated loses only
// its introducer, so the text after it stays visible.
func Clean(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b:
			n, _ := escapeLen(s[i:])
			i += n
			continue
		case r == '\r':
			if !strings.HasPrefix(s[i+1:], "\n") {
				b.WriteByte('\n') // a bare CR starts a new line instead of overwriting this one
			}
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case !unsafe(r):
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Line is Clean for a one-line field (a table cell, a title): newlines and
// tabs become spaces too.
func Line(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		return r
	}, Clean(s))
}

// JSON makes JSON text safe to print without changing what it means:
// inside strings, the characters Clean would drop and encoding/json leaves
// raw (DEL, C1 controls, bidirectional overrides), and those that do not
// show (see Reveal), become \u escapes. The JSON encoder already escapes
// the other controls.
func JSON(b []byte) []byte {
	return []byte(Reveal(string(b)))
}

// Reveal shows JSON text (an action's arguments, which the analyst
// approves) as it is: inside its strings, every character that does not
// show itself becomes its \u escape, which JSON reads as the same
// character, so a value that looks like another cannot be approved for it.
// Those are the controls, format characters (Unicode Cf: zero-width space
// U+200B, word joiner U+2060, BOM U+FEFF, bidirectional controls, tag
// characters), spaces other than U+0020, line and paragraph separators,
// variation selectors and the other default-ignorable code points (U+3164
// Hangul filler), private-use, surrogate and unassigned code points, and
// bytes that are not UTF-8 (as U+FFFD). Newlines and tabs between tokens
// stay, so indented JSON keeps its shape.
func Reveal(s string) string {
	if shown(s) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out.WriteString(`\ufffd`)
		case hidden(r):
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(&out, `\u%04x\u%04x`, hi, lo)
			} else {
				fmt.Fprintf(&out, `\u%04x`, r)
			}
		default:
			out.WriteString(s[i : i+size])
		}
		i += size
	}
	return out.String()
}

// hidden says r does not show itself, or is one a terminal acts on.
func hidden(r rune) bool {
	switch {
	case r == ' ' || r == '\n' || r == '\t':
		return false
	case unsafe(r), !unicode.IsGraphic(r): // controls, Cf, Co, Cs, Cn, Zl, Zp
		return true
	}
	return unicode.In(r, unicode.Zs, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// shown is Reveal's fast path: s has nothing it would change.
func shown(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 {
			for j, r := range s[i:] {
				if hidden(r) || r == utf8.RuneError && !strings.HasPrefix(s[i+j:], "\ufffd") {
					return false
				}
			}
			return true
		}
	}
	return true
}

// unsafe says r is a control or bidirectional formatting character.
func unsafe(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// clean is the fast path: s has nothing Clean would change.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 {
			for _, r := range s[i:] {
				if r == 0x1b || r == utf8.RuneError || unsafe(r) {
					return false
				}
			}
			return true
		}
	}
	return true
}

// escapeLen is the length of the escape sequence at the start of s (which
// starts with ESC): the whole sequence when it is well formed, else ESC and
// its introducer only. complete says the sequence ended within s.
func escapeLen(s string) (n int, complete bool) {
	if len(s) < 2 {
		return len(s), false
	}
	switch c := s[1]; {
	case c == '[': // CSI: parameters and intermediates, then a final byte
		j := 2
		for j < len(s) && s[j] >= 0x20 && s[j] <= 0x3f {
			j++
		}
		if j < len(s) && s[j] >= 0x40 && s[j] <= 0x7e {
			return j + 1, true
		}
		return j, j < len(s)
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_': // strings ended by ST (or BEL for OSC)
		for j := 2; j < len(s); j++ {
			switch {
			case s[j] == 0x07 && c == ']':
				return j + 1, true
			case s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\':
				return j + 2, true
			case s[j] == 0xc2 && j+1 < len(s) && s[j+1] == 0x9c: // U+009C, ST
				return j + 2, true
			}
		}
		return 2, false
	case c >= 0x20 && c <= 0x2f: // intermediates, then a final byte
		j := 2
		for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
			j++
		}
		if j < len(s) && s[j] >= 0x30 && s[j] <= 0x7e {
			return j + 1, true
		}
		return j, j < len(s)
	case c >= 0x30 && c <= 0x7e: // a two-byte escape such as ESC c
		return 2, true
	}
	return 1, true
}

// NewWriter returns a writer that writes everything through Clean to w. A
// UTF-8 sequence, an escape sequence (up to maxHeld bytes) or a CRLF split
// between two writes is held until it is complete, so that it is removed
// whole; what is still held when writing stops is dropped.
func NewWriter(w io.Writer) io.Writer { return &writer{w: w} }

type writer struct {
	w       io.Writer
	pending []byte
}

func (w *writer) Write(p []byte) (int, error) {
	buf := append(w.pending, p...)
	cut := len(buf) - max(partialRune(buf), partialEscape(buf))
	if cut > 0 && buf[cut-1] == '\r' {
		cut-- // the next write says whether it is a CRLF
	}
	w.pending = append([]byte(nil), buf[cut:]...)
	if _, err := io.WriteString(w.w, Clean(string(buf[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// partialRune is the length of an incomplete UTF-8 sequence ending b.
func partialRune(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return len(b) - i
			}
			return 0
		}
	}
	return 0
}

// maxHeld bounds how much of an unterminated escape string is held back.
const maxHeld = 4096

// partialEscape is the length of an escape sequence that ends b unfinished.
func partialEscape(b []byte) int {
	i := bytes.LastIndexByte(b, 0x1b)
	if i < 0 || len(b)-i > maxHeld {
		return 0
	}
	if _, complete := escapeLen(string(b[i:])); complete {
		return 0
	}
	return len(b) - i
}
