package workflows

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"

	"github.com/secops-agent/investigator/investigation"
)

// Progress events are logged by kind and place, never with their text.
func TestLogEventLeavesTextOut(t *testing.T) {
	var buf bytes.Buffer
	l := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	logEvent(l, investigation.Event{Seq: 7, Turn: 2, Kind: investigation.EventToolResult, Step: "step_3", Tool: "get_alert",
		Text: "get_alert: 198.51.100.23 logged in as deploy"})
	logEvent(l, investigation.Event{Seq: 8, Turn: 2, Kind: investigation.EventConclusion, Text: "## Summary\nsecret finding",
		Verdict: &investigation.Verdict{Verdict: investigation.VerdictTruePositive, Confidence: "high"}})
	out := buf.String()
	for _, want := range []string{"kind=tool_result", "seq=7", "turn=2", "step=step_3", "tool=get_alert", "kind=conclusion", "verdict=true_positive", "confidence=high"} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "198.51.100.23")
	require.NotContains(t, out, "secret finding")
}
