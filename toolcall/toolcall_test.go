package toolcall

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	require.Equal(t, "search_alerts type == Recon:EC2/PortProbe", Summarize("search_alerts", map[string]any{"field": "type", "op": "==", "value": "Recon:EC2/PortProbe"}))
	require.Equal(t, "get_alert a1", Summarize("get_alert", map[string]any{"id": "a1"}))
	require.Equal(t, "get_alert a1 events[3] offset 12034", Summarize("get_alert", map[string]any{"id": "a1", "path": "events[3]", "offset": 12034.0}))
	require.Equal(t, "search_alerts indicator 198.51.100.23", Summarize("search_alerts", map[string]any{"indicator": "198.51.100.23"}))
	require.Equal(t, `other a=1 b="x"`, Summarize("other", map[string]any{"b": "x", "a": 1}))
	long := Summarize("other", map[string]any{"a": strings.Repeat("y", 500)})
	require.LessOrEqual(t, len(long), maxSummary)
	require.Contains(t, long, "…[cut", "a long summary says it was cut")

	// Long Japanese text (3 bytes a character) is cut on a character boundary,
	// whatever the offset of the first character.
	for pad := range 3 {
		for _, s := range []string{
			Summarize("other", map[string]any{"a": strings.Repeat("x", pad) + strings.Repeat("不審なログイン", 30)}),
			Summarize("get_alert", map[string]any{"id": strings.Repeat("x", pad) + strings.Repeat("東京リージョンの警告", 20)}),
		} {
			require.True(t, utf8.ValidString(s), "pad %d: %q", pad, s)
			require.True(t, strings.HasSuffix(s, " bytes]"), s)
			require.LessOrEqual(t, len(s), maxSummary)
			require.Greater(t, len(s), maxSummary-utf8.UTFMax)
		}
	}
	require.Equal(t, "get_alert 警告", Summarize("get_alert", map[string]any{"id": "警告"}), "short text is kept whole")
}

func TestKeyIgnoresRefIDAndOrder(t *testing.T) {
	a := Key(Call{Name: "t", Args: map[string]any{"b": 1, "a": "x", RefIDArg: "s1"}})
	b := Key(Call{Name: "t", Args: map[string]any{"a": "x", "b": 1}})
	require.Equal(t, a, b)
	require.NotEqual(t, a, Key(Call{Name: "u", Args: map[string]any{"a": "x", "b": 1}}))
}
