package termtext

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hostile is alert text written to take over a terminal: a hyperlink, a
// screen clear, colours, a carriage return that overwrites the line, a
// bell, DEL, an 8-bit CSI, bidi overrides and a window-title OSC ended by
// BEL.
const Hostile = "Title \x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\ \x1b[2J\x1b[31mred\x1b[0m\rover\x07\x7f\u009b6n " +
	"\u202eoverride\u202c \u2066iso\u2069 \x1b]0;owned\x07end\x1bc\x1b(B."

// Forbidden reports the first character of s that a terminal would act on.
func Forbidden(s string) (rune, bool) {
	for _, r := range s {
		if r != '\n' && r != '\t' && unsafe(r) {
			return r, true
		}
	}
	return 0, false
}

func TestClean(t *testing.T) {
	assert.Equal(t, "Title click red\nover6n override iso end.", Clean(Hostile))
	for in, want := range map[string]string{
		"plain ascii":                 "plain ascii",
		"日本語 ✓ \ufffd":                "日本語 ✓ \ufffd",
		"## Summary\n- a\tb\r\n":      "## Summary\n- a\tb\n",
		"bad \x9b byte":               "bad \ufffd byte",
		"unterminated \x1b]8;;http":   "unterminated 8;;http",
		"\x1b[":                       "",
		"\x1b":                        "",
		"csi \x1b[1;31;42m colour":    "csi  colour",
		"osc st \x1b]2;t\u009cafter":  "osc st after",
		"dcs \x1bPq#0;2;0;0;0\x1b\\x": "dcs x",
		"nul\x00 and \x1f":            "nul and ",
	} {
		assert.Equal(t, want, Clean(in), "%q", in)
	}
	_, bad := Forbidden(Clean(Hostile))
	assert.False(t, bad)
}

func TestLine(t *testing.T) {
	assert.Equal(t, "a b c d e", Line("a\nb\tc\r\x1b[2Kd\r\ne"))
}

// JSON output keeps its meaning: the escaped text decodes to the same value.
func TestJSON(t *testing.T) {
	in := map[string]string{"title": Hostile, "ok": "日本語"}
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	safe := JSON(raw)
	_, bad := Forbidden(string(safe))
	assert.False(t, bad, "%q", safe)
	assert.NotContains(t, string(safe), "\x1b")
	var back map[string]string
	require.NoError(t, json.Unmarshal(safe, &back))
	assert.Equal(t, in, back)
}

func TestWriter(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	text := []byte("é" + Hostile + "\r\n日本")
	for _, c := range text { // one byte at a time: runes split across writes survive
		n, err := w.Write([]byte{c})
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	_, bad := Forbidden(b.String())
	assert.False(t, bad, "%q", b.String())
	assert.True(t, strings.HasPrefix(b.String(), "éTitle"), b.String())
	assert.True(t, strings.HasSuffix(b.String(), "end.\n日本"), "a CRLF split between writes is one newline: %q", b.String())
}
