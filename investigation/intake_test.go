package investigation

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The check's note leads the first section, so the summary a delivery
// carries begins with it, whatever shape the model gave the report; it
// adds the bytes an appended note would.
func TestLeadStartsTheSummary(t *testing.T) {
	const note = "**Verdict check:** kept."
	for _, tc := range []struct{ markdown, want string }{
		{"## Summary\nBenign: close the alert.\n\n## Details\nx", "## Summary\n" + note + "\n\nBenign: close the alert.\n\n## Details\nx"},
		{"\n## Summary\n\nBenign.", "\n## Summary\n\n" + note + "\n\nBenign."},
		{"Benign: close the alert.\n## Details", note + "\n\nBenign: close the alert.\n## Details"},
		{"## Summary", "## Summary\n\n" + note},
		{"", note + "\n\n"},
	} {
		got := Lead(tc.markdown, note)
		require.Equal(t, tc.want, got)
		require.Equal(t, len(tc.markdown+"\n\n"+note), len(got))
		require.Regexp(t, `^\*\*Verdict check:\*\* kept\.`, SummaryOf(got))
	}
	require.Equal(t, "## Summary\nx", Lead("## Summary\nx", ""))
}
