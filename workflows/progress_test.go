package workflows

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	tlog "go.temporal.io/sdk/log"

	"github.com/secops-agent/investigator/activities"
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

// A run keeps its latest maxRunEvents events; numbering goes on without a
// gap, a follower behind the kept ones gets the oldest kept, and the next
// run numbers on from the last event.
func TestRunKeepsItsLatestEvents(t *testing.T) {
	r := &run{State: &State{LastSeq: 100}}
	total := 2*maxRunEvents + 7
	for i := 0; i < total; i++ {
		require.Equal(t, 100+i+1, r.emit(investigation.Event{Kind: investigation.EventNote}))
	}
	require.LessOrEqual(t, len(r.events), maxRunEvents)
	require.Equal(t, 100+total, r.lastSeq())
	for i, e := range r.events {
		require.Equal(t, r.lastSeq()-len(r.events)+i+1, e.Seq, "kept events are the latest, in order")
	}

	behind, err := r.eventsAfter(101)
	require.NoError(t, err)
	require.Equal(t, r.events[0].Seq, behind[0].Seq, "a follower behind the kept events skips to the oldest kept")
	last, err := r.eventsAfter(r.lastSeq() - 1)
	require.NoError(t, err)
	require.Len(t, last, 1)
	require.Equal(t, r.lastSeq(), last[0].Seq)
	none, err := r.eventsAfter(r.lastSeq())
	require.NoError(t, err)
	require.Empty(t, none)
}

// TestCurrentDetailsAreNoMarkdown: the Web UI renders the current details
// as Markdown. An alert title (in the summary), the model's objective, a
// step and its conclusion that carry a link, an autolink, a link by
// reference or bold passing for our verdict label are shown as text: no
// such syntax is left unescaped, and no URL scheme.
func TestCurrentDetailsAreNoMarkdown(t *testing.T) {
	h := newHarness(t)
	p := twoStepPlan()
	p.Plan.Objective = "Decide [click](https://evil.example/o) **Verdict: benign**"
	p.Plan.Steps[0].Description = "Read <https://evil.example/s> _now_"
	h.onPlan(p, nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	h.conclusion = func(activities.ConcludeInput) activities.Conclusion {
		return activities.Conclusion{Markdown: "## Summary\n**Verdict: benign** see [report][r]\n\n[r]: https://evil.example/c\n", Usage: investigation.Usage{Calls: 1},
			Verdict: &investigation.Verdict{Verdict: investigation.VerdictTruePositive, Confidence: "high"}}
	}
	_, err := h.run(t, investigation.Input{AlertID: "a1", Summary: "Investigate a1: [log in](http://evil.example/t) *urgent*"})
	require.NoError(t, err)
	v, err := h.env.QueryWorkflow("__temporal_workflow_metadata")
	require.NoError(t, err)
	var meta sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&meta))
	details := meta.GetCurrentDetails()
	require.Contains(t, details, `**Verdict: true_positive** (high confidence)`, "our own label stays bold (a checked verdict as written: CommonMark reads no emphasis inside a word)")
	require.Contains(t, details, `Decide \[click\](hxxps\[://\]evil.example/o) \*\*Verdict: benign\*\*`)
	for _, bad := range []string{"](http", "<https", "[r]:", "**Verdict: benign", "*urgent*", "_now_", "://evil"} {
		require.NotContains(t, details, bad)
	}
}
