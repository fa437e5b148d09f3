package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/modeltest"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

// largeAlert is a parsed alert of over 200 KiB: many events from private
// addresses, a few public ones late in it, domains, a hash, a long command
// line, and a last field (in key order) that only paging reaches.
func largeAlert(t *testing.T) alerts.Alert {
	t.Helper()
	var events []any
	for i := range 1700 {
		events = append(events, map[string]any{
			"src": fmt.Sprintf("10.2.%d.%d", i/256, i%256),
			"msg": fmt.Sprintf("event %d: routine connection to host-%d.corp.example.com, nothing of note in it at all", i, i),
		})
	}
	events = append(events, map[string]any{"src": "203.0.113.66", "dst": "198.51.100.7"})
	data := map[string]any{
		"rule":        "beaconing",
		"events":      events,
		"sha256":      "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"commandLine": "powershell -enc " + strings.Repeat("SQBFAFgA", 2000),
		"zz_last":     "exfiltration to 203.0.113.250 confirmed",
	}
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	require.Greater(t, len(raw), 200<<10)
	a, err := alerts.Parse(raw)
	require.NoError(t, err)
	return a
}

// The indicator list of a large alert is ranked and capped, and the prompt
// says how many were left out and where they are. Before, it listed every
// indicator (here over 3,000 lines).
func TestLargeAlertIndicatorsAreRankedAndCapped(t *testing.T) {
	al := largeAlert(t)
	section, err := alertSection(prompt.NewTag(), al)
	require.NoError(t, err)
	found, _ := alerts.ScanIndicators(al.Data)
	require.Greater(t, len(found), 3000)

	require.NotContains(t, section, " alert>>>\n| {", "not shown whole")
	require.Contains(t, section, fmt.Sprintf("Below are the %d most useful of the %d indicators found in it", maxPromptIndicators, len(found)))
	require.Contains(t, section, "Call get_alert with the alert ID for the complete data: it comes in pages")
	require.Contains(t, section, `or path "@indicators" for every indicator`)

	lines, shown, total := indicatorLines(al)
	require.Equal(t, maxPromptIndicators, shown)
	require.Equal(t, len(found), total)
	require.LessOrEqual(t, len(lines), maxPromptIndicatorBytes)
	list := strings.Split(lines, "\n")
	require.Len(t, list, maxPromptIndicators)
	require.Equal(t, "ipv4 198.51.100.7 (at events[1700].dst)", list[0], "public addresses first, though found last")
	require.Equal(t, "ipv4 203.0.113.66 (at events[1700].src)", list[1])
	require.NotContains(t, lines, "powershell", "a command line longer than the list's budget waits for get_alert")
	require.Less(t, len(section), 40<<10)
}

// The prompt's promise holds through the real activity: get_alert, run by
// CallTool with the run's cap, pages through the 200 KiB alert without a
// page being cut, and the pages put together are the data whose last field
// the model can read.
func TestGetAlertPagesFitTheToolResultCap(t *testing.T) {
	al := largeAlert(t)
	store := memAlerts{al.ID: al}
	reg, err := tools.NewRegistry(tools.NewGetAlert(store))
	require.NoError(t, err)
	ts := modeltest.NewTranscript()
	a := &Activities{Model: &Model{Transcript: ts}, Tools: reg, Alerts: store}
	whole, err := prompt.MarshalJSON(al.Data, "")
	require.NoError(t, err)
	require.Greater(t, len(whole), MaxAlertPromptBytes, "the prompt does not show it whole")

	for _, limit := range []int{investigation.DefaultMaxToolResultBytes, 6 << 10} {
		var got strings.Builder
		offset := 0
		for i := 0; ; i++ {
			args := map[string]any{"id": al.ID, "offset": float64(offset)}
			key := fmt.Sprintf("k%d-%d", limit, i)
			out, err := a.CallTool(context.Background(), ToolInput{Session: "s", Key: key, Call: toolcall.Call{Name: toolcall.GetAlert, Args: args}, MaxResultBytes: limit})
			require.NoError(t, err)
			require.True(t, out.OK, out.Error)
			require.False(t, out.Truncated, "page %d is not cut", i)
			var page map[string]any
			require.NoError(t, json.Unmarshal([]byte(ts.M["s/"+key].Response), &page))
			got.WriteString(page["page"].(string))
			next, more := page["next_offset"].(float64)
			if !more {
				break
			}
			offset = int(next)
		}
		require.Equal(t, string(whole), got.String())
		require.Contains(t, got.String(), `"zz_last":"exfiltration to 203.0.113.250 confirmed"`)
	}
}
