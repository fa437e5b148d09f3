package investigation

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// summaryInputs are report shapes a model gives: with and without a
// heading, Japanese, blank, a heading alone, blank or no-break-space lines.
var summaryInputs = []string{
	"",
	"\n\n",
	"Benign: close the alert.",
	"Benign.\n## Details\nx",
	"## Summary",
	"## Summary\n",
	"## Summary\n\n",
	"## Summary\n   ",
	"## Summary\nBenign: close the alert.\n\n## Details\nx",
	"\n## Summary\n\nBenign.\n",
	"  # Summary\r\nBenign.\r\n# Next\r\n",
	"## 概要\n\n誤検知です。アラートを閉じてください。\n\n## 詳細\nx",
	"誤検知です。\n## 詳細",
	"\u00a0\n## Summary\nx",
	"## A\n## B\ntext",
	"#",
}

// Workflow code calls Lead and recorded histories hold its output (the
// follow-up's stored context): it must give these bytes for ever.
func TestLeadKeepsItsBytes(t *testing.T) {
	const n = "**N.**"
	want := []string{
		n + "\n\n",
		n + "\n\n\n\n",
		n + "\n\nBenign: close the alert.",
		n + "\n\nBenign.\n## Details\nx",
		"## Summary\n\n" + n,
		"## Summary\n" + n + "\n\n",
		"## Summary\n\n" + n + "\n\n",
		"## Summary\n" + n + "\n\n   ",
		"## Summary\n" + n + "\n\nBenign: close the alert.\n\n## Details\nx",
		"\n## Summary\n\n" + n + "\n\nBenign.\n",
		"  # Summary\r\n" + n + "\n\nBenign.\r\n# Next\r\n",
		"## 概要\n\n" + n + "\n\n誤検知です。アラートを閉じてください。\n\n## 詳細\nx",
		n + "\n\n誤検知です。\n## 詳細",
		n + "\n\n\u00a0\n## Summary\nx",
		"## A\n" + n + "\n\n## B\ntext",
		"#\n\n" + n,
	}
	for i, md := range summaryInputs {
		require.Equal(t, want[i], Lead(md, n), "%q", md)
		require.Equal(t, md, Lead(md, ""))
	}
}

// SummaryOf and OverruledSummary find the first section with firstSection;
// they give what their line-by-line versions gave.
func TestFirstSectionKeepsSummaries(t *testing.T) {
	for _, md := range summaryInputs {
		require.Equal(t, oldSummaryOf(md), SummaryOf(md), "%q", md)
		if strings.TrimSpace(md) != "" { // the old version added a blank line to a blank report
			require.Equal(t, oldOverruledSummary(md, "L.", "P:"), OverruledSummary(md, "L.", "P:"), "%q", md)
		}
	}
	require.Equal(t, "## 概要\nL.\n\nP:\n\n> 誤検知です。アラートを閉じてください。\n\n## 詳細\nx",
		OverruledSummary(summaryInputs[11], "L.", "P:"))
}

func oldSummaryOf(markdown string) string {
	var b strings.Builder
	started := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			if started {
				break
			}
			started = true
			continue
		}
		if started || strings.TrimSpace(line) != "" {
			started = true
			b.WriteString(line + "\n")
		}
	}
	return strings.TrimSpace(b.String())
}

func oldOverruledSummary(md, lead, label string) string {
	lines := strings.Split(md, "\n")
	heading := func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "#") }
	start := 0
	for start < len(lines) && strings.TrimSpace(lines[start]) == "" {
		start++
	}
	if start < len(lines) && heading(lines[start]) {
		start++
	}
	end := start
	for end < len(lines) && !heading(lines[end]) {
		end++
	}
	section := lead + "\n\n" + label
	if body := strings.TrimSpace(strings.Join(lines[start:end], "\n")); body != "" {
		var quoted []string
		for _, l := range strings.Split(body, "\n") {
			quoted = append(quoted, strings.TrimRight("> "+l, " "))
		}
		section += "\n\n" + strings.Join(quoted, "\n")
	}
	out := append(slices.Clone(lines[:start]), section)
	if end < len(lines) {
		out = append(out, "", strings.Join(lines[end:], "\n"))
	}
	return strings.Join(out, "\n")
}
