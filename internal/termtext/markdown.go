package termtext

import (
	"regexp"
	"strings"

	"github.com/secops-agent/investigator/internal/clip"
)

// The Temporal Web UI renders a workflow's summary and current details as
// CommonMark (with GFM tables; images and HTML removed): text from an alert
// or a model there must not be a link or pass for our own bold labels.

var schemeRe = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]{1,20})://`)

// Defang rewrites every URL scheme so that no renderer links it:
// https://x becomes hxxps[://]x, ftp://x ftp[://]x.
func Defang(s string) string {
	return schemeRe.ReplaceAllStringFunc(s, func(m string) string {
		scheme := strings.TrimSuffix(m, "://")
		switch strings.ToLower(scheme) {
		case "http":
			scheme = "hxxp"
		case "https":
			scheme = "hxxps"
		}
		return scheme + "[://]"
	})
}

// markdownEscaper backslash-escapes what makes links ([x](u), [x][r] with
// a definition, <scheme:…> autolinks), emphasis (* _ ~), code spans, HTML
// (which the UI would drop, hiding the text) and entities. CommonMark shows
// a backslash-escaped ASCII punctuation character as the character itself,
// so the text reads as it was written.
var markdownEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", `*`, `\*`, `_`, `\_`, `~`, `\~`,
	`[`, `\[`, `]`, `\]`, `<`, `\<`, `>`, `\>`, `&`, `\&`,
)

// Markdown makes untrusted text plain in Markdown: URLs defanged, then
// link, emphasis, code and HTML syntax escaped. Newlines stay (a model's
// conclusion keeps its headings and lists); use Line first for a field of
// one line.
func Markdown(s string) string {
	return markdownEscaper.Replace(Defang(s))
}

// linkEscaper escapes only what makes a link (and the backslash, so an
// escape of our own cannot be undone by one in s).
var linkEscaper = strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`, `<`, `\<`)

// NoLinksClipped makes a one-line event summary (a tool call's, holding
// the model's arguments) no link in a UI that renders Markdown, within n
// bytes: URLs defanged, link syntax escaped. Emphasis is left alone, so a
// UI that shows summaries as plain text (the dev server's) shows few
// backslashes.
func NoLinksClipped(s string, n int) string {
	return clip.StringAt(linkEscaper.Replace(Defang(s)), n, outsideMarkdownEscape)
}

// MarkdownClipped is Markdown(s) within n bytes, never cut between a
// backslash and the character it escapes.
func MarkdownClipped(s string, n int) string {
	return clip.StringAt(Markdown(s), n, outsideMarkdownEscape)
}

// outsideMarkdownEscape says a cut before s[i] does not split an escape:
// Markdown's output pairs every backslash with what follows it, so an odd
// run of backslashes before i ends in an escape's first half.
func outsideMarkdownEscape(s string, i int) bool {
	n := 0
	for i-n-1 >= 0 && s[i-n-1] == '\\' {
		n++
	}
	return n%2 == 0
}
