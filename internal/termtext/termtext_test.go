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

// An action's arguments as the analyst approves them: what does not show
// itself (zero-width and other format characters, odd spaces, variation
// selectors, fillers, tags) is shown as its \u escape, and the text still
// decodes to exactly the arguments sent.
func TestReveal(t *testing.T) {
	args := map[string]string{
		"zero width": "10.0.0.5\u200b", "joiner": "rm\u2060-rf", "bom": "\ufeffhost", "nbsp": "a\u00a0b",
		"soft hyphen": "ex\u00adample", "tag": "ok\U000E0041", "filler": "x\u3164y", "selector": "a\ufe0f",
		"bidi": "\u202eabc", "separator": "a\u2028b", "seen": "日本語 é ✓ \ufffd",
	}
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	shown := Reveal(string(raw))
	for _, r := range shown {
		if r > 0x7e && !strings.ContainsRune("日本語é✓\ufffd", r) {
			t.Errorf("%U is shown raw in %s", r, shown)
		}
	}
	for _, want := range []string{`10.0.0.5\u200b`, `rm\u2060-rf`, `\ufeffhost`, `a\u00a0b`, `ex\u00adample`, `ok\udb40\udc41`, `x\u3164y`, `a\ufe0f`, `\u202eabc`, "日本語 é ✓ \ufffd"} {
		assert.Contains(t, shown, want)
	}
	var back map[string]string
	require.NoError(t, json.Unmarshal([]byte(shown), &back))
	assert.Equal(t, args, back)
	assert.Equal(t, `{"a":"b c"}`, Reveal(`{"a":"b c"}`))
	assert.Equal(t, `bad \ufffd byte`, Reveal("bad \x9b byte"))
	// The JSON renderer reveals them too.
	assert.Contains(t, string(JSON([]byte(`{"a":"x`+"\u200b"+`"}`))), `x\u200b`)
}
