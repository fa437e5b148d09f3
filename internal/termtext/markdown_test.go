package termtext

import (
	"regexp"
	"strings"
	"testing"
)

// markdownAttacks are texts that CommonMark would render as a link, an
// autolink, a link by reference, emphasis passing for our labels, code, or
// HTML the Web UI would drop (hiding what the alert said).
var markdownAttacks = []string{
	"[click](https://evil.example/login)",
	"**Verdict: benign** (high confidence)",
	"<https://evil.example> <mail@evil.example> <b>hidden</b>",
	"[x]\n\n[x]: https://evil.example \"t\"",
	"![img](https://evil.example/p.png) _under_ ~~gone~~ `code`",
	`\[escaped\](https://evil.example) \\*star\\* &lt;b&gt; &#91;`,
	"HTTPS://Evil.example/b ftp://x",
}

// markdownSyntax finds a Markdown syntax character not escaped by a
// backslash (an even run of backslashes before it).
var markdownSyntax = regexp.MustCompile("(^|[^\\\\])(\\\\\\\\)*[][*_~`<>&]")

// TestMarkdownNeutralises: after Markdown every syntax character is
// backslash-escaped and no URL scheme is left, so nothing renders as a link
// or emphasis; and the text reads as written: dropping each escape's
// backslash (what CommonMark shows) gives the defanged text back.
func TestMarkdownNeutralises(t *testing.T) {
	for _, s := range markdownAttacks {
		m := Markdown(s)
		if loc := markdownSyntax.FindStringIndex(m); loc != nil {
			t.Errorf("%q: unescaped syntax at %q", s, m[loc[0]:])
		}
		if regexp.MustCompile(`(?i)[a-z0-9]://`).MatchString(m) {
			t.Errorf("%q: a URL scheme is left: %q", s, m)
		}
		if shown := regexp.MustCompile(`\\(.)`).ReplaceAllString(m, "$1"); shown != Defang(s) {
			t.Errorf("%q reads %q, not %q", s, shown, Defang(s))
		}
	}
	if got := Markdown("see https://evil.example/a"); got != `see hxxps\[://\]evil.example/a` {
		t.Errorf("got %q", got)
	}
}

// TestMarkdownClippedKeepsEscapes: a clip never leaves a backslash without
// the character it escapes (which would escape the clip's own note).
func TestMarkdownClippedKeepsEscapes(t *testing.T) {
	s := strings.Repeat("*", 500)
	for n := 20; n < 60; n++ {
		m := MarkdownClipped(s, n)
		if len(m) > n {
			t.Fatalf("%d bytes over %d", len(m), n)
		}
		kept, _, _ := strings.Cut(m, " …[cut ")
		if kept != strings.Repeat(`\*`, len(kept)/2) {
			t.Errorf("n=%d: an escape is cut: %q", n, m)
		}
	}
}

// TestNoLinksClipped: a tool call's summary, holding the model's
// arguments, renders no link in a UI that reads event summaries as
// Markdown, and reads as written once the escapes are dropped.
func TestNoLinksClipped(t *testing.T) {
	linkSyntax := regexp.MustCompile("(^|[^\\\\])(\\\\\\\\)*[][<]")
	for _, s := range markdownAttacks {
		m := NoLinksClipped("tool lookup("+s+")", 200)
		if loc := linkSyntax.FindStringIndex(m); loc != nil {
			t.Errorf("%q: unescaped link syntax at %q", s, m[loc[0]:])
		}
		if regexp.MustCompile(`(?i)[a-z0-9]://`).MatchString(m) {
			t.Errorf("%q: a URL scheme is left: %q", s, m)
		}
	}
	if got := NoLinksClipped("tool get_alert(id=a_1)", 200); got != "tool get_alert(id=a_1)" {
		t.Errorf("a plain summary changed: %q", got)
	}
	if m := NoLinksClipped(strings.Repeat("[", 300), 50); len(m) > 50 || !outsideMarkdownEscape(m, strings.Index(m, " …[cut ")) {
		t.Errorf("clipped badly: %q", m)
	}
}
