package agentclient

import (
	"strings"
	"testing"
)

// TestStaticSummaryIsNoMarkdown: the Web UI renders a start's summary as
// Markdown; an alert title's link, bold or line break stays text, within
// the 200 bytes.
func TestStaticSummaryIsNoMarkdown(t *testing.T) {
	got := staticSummary("Investigate a1 (high, intake): [log in](https://evil.example) **Verdict: benign**\n# heading" + strings.Repeat("*", 300))
	want := `Investigate a1 (high, intake): \[log in\](hxxps\[://\]evil.example) \*\*Verdict: benign\*\* # heading\*`
	if !strings.HasPrefix(got, want) || len(got) > 200 || strings.Contains(got, "\n") {
		t.Errorf("got %q", got)
	}
}
