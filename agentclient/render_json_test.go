package agentclient

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// sneaky is model or alert text a terminal would act on: a hyperlink, a
// bidi override, DEL and an 8-bit CSI.
const sneaky = "a\x1b]8;;https://evil.example/\x1b\\b\u202ec\x7fd\u009b6n"

// typedEvents is one event of each shape, with sneaky text, numbered from
// 2 (event 1 is no longer kept); the tool call starts child run inv/bq-1.
func typedEvents() []investigation.Event {
	p := plan.Plan{Objective: sneaky, Steps: []plan.Step{{ID: "step_1", Description: sneaky, Tools: []string{"get_alert"}, Expected: sneaky}}}
	return []investigation.Event{
		{Seq: 2, Kind: investigation.EventPlan, Turn: 1, Plan: &p, Notes: []string{sneaky}},
		{Seq: 3, Kind: investigation.EventStep, Turn: 1, Step: "step_1", Text: sneaky, Expected: sneaky},
		{Seq: 4, Kind: investigation.EventToolCall, Turn: 1, Step: "step_1", Text: "bigquery_agent logins", Child: "inv/bq-1"},
		{Seq: 5, Kind: investigation.EventInsight, Turn: 1, Step: "step_1", Insights: []string{sneaky}},
		{Seq: 6, Kind: investigation.EventPlanUpdate, Turn: 1, Updates: []string{sneaky}, Completed: []string{"step_1"}},
		{Seq: 7, Kind: investigation.EventQuestion, Turn: 1, Step: "step_1", QuestionID: "q-1", Text: sneaky},
		{Seq: 8, Kind: investigation.EventConclusion, Turn: 1, Text: "## Summary\n" + sneaky, Verdict: &investigation.Verdict{
			Verdict: investigation.VerdictBenign, Confidence: "high", Evidence: []investigation.Evidence{{StepID: "step_1", Tool: "get_alert", Fact: sneaky}}}},
		{Seq: 9, Kind: investigation.EventTurn, Turn: 2, Text: sneaky, Mode: investigation.ModeDirect, Reason: sneaky},
	}
}

// jsonLines decodes every line of out, requiring each to be one JSON
// object without a character a terminal would act on.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		for _, r := range l {
			bad := r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
			require.False(t, bad, "line holds %U: %q", r, l)
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		lines = append(lines, m)
	}
	return lines
}

// decodeEvents decodes the event lines of out (all but the last).
func decodeEvents(t *testing.T, out string) []investigation.Event {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	events := make([]investigation.Event, len(lines)-1)
	for i, l := range lines[:len(lines)-1] {
		require.NoError(t, json.Unmarshal([]byte(l), &events[i]))
	}
	return events
}

// TestWatchJSON: every event of the investigation is one JSON line that
// decodes to the event as recorded; the child run's events stay out, the
// header and notices go to info, and the last line is the result.
func TestWatchJSON(t *testing.T) {
	fastPolling(t)
	events := typedEvents()
	f := newFakeStream("inv", &fakeRun{id: "A", events: events, status: completed})
	f.add("inv/bq-1", &fakeRun{id: "K", status: completed, events: notesNamed("c", 1, 3)})
	res := investigation.Result{AlertID: "a-1", Conclusion: "## Summary\n" + sneaky, Verdict: events[6].Verdict,
		Plan:  plan.Plan{Steps: []plan.Step{{ID: "step_1", Status: plan.Done}}},
		Spend: spend(3, investigation.Usage{Calls: 5, PromptTokens: 500, OutputTokens: 50, Model: "gemini-2.5-flash"})}
	f.result = res
	var out, info strings.Builder
	require.NoError(t, testClient(f).Watch(testCtx(t), NewJSONRenderer(&out, &info, pricing.Default()), "inv", 1))

	lines := jsonLines(t, out.String())
	require.Len(t, lines, len(events)+1, out.String())
	require.Equal(t, events, decodeEvents(t, out.String()), "each event exactly as recorded, the child's left out")
	var final Final
	require.NoError(t, json.Unmarshal([]byte(lastLine(out.String())), &final))
	require.Equal(t, Final{Kind: FinalKind, WorkflowID: "inv", Closed: true, Verdict: res.Verdict, Steps: 1, Spend: res.Spend, Result: &res,
		Cost: Cost{Amount: (500*0.30 + 50*2.50) / 1e6, Currency: "USD"}}, final)
	require.Contains(t, info.String(), "Watching investigation inv")
	require.Contains(t, info.String(), "(events 1 to 1 are no longer available)")
	require.NotContains(t, out.String(), "no longer available")
}

// TestFollowInvestigationJSON: investigate --json stops at the first
// conclusion; its last line carries the verdict and totals of the status.
func TestFollowInvestigationJSON(t *testing.T) {
	fastPolling(t)
	events := append(notes(1, 2),
		investigation.Event{Seq: 3, Kind: investigation.EventConclusion, Text: "## Summary\nBenign.", Verdict: &investigation.Verdict{Verdict: "benign", Confidence: "low"}},
		investigation.Event{Seq: 4, Kind: investigation.EventIdle, Text: "waiting up to 30m0s for follow-up questions"},
	)
	f := newFakeStream("inv", &fakeRun{id: "A", events: events, status: running})
	f.st = investigation.Status{Phase: investigation.PhaseIdle, Verdict: events[2].Verdict,
		Plan:  plan.Plan{Steps: []plan.Step{{ID: "step_1", Status: plan.Done}, {ID: "step_2", Status: plan.Done}, {ID: "step_3", Status: plan.Cancelled}}},
		Spend: spend(2, investigation.Usage{Calls: 4, PromptTokens: 40, OutputTokens: 4, Model: "gemini-2.5-flash"})}
	var out, info strings.Builder
	require.NoError(t, testClient(f).FollowInvestigation(testCtx(t), NewJSONRenderer(&out, &info, pricing.Default()), "inv"))
	require.Equal(t, events[:3], decodeEvents(t, out.String()))
	require.Equal(t, `{"kind":"result","workflow_id":"inv","closed":false,"phase":"idle","verdict":{"verdict":"benign","confidence":"low"},"steps":2,"usage":{"calls":4,"prompt_tokens":40,"output_tokens":4,"model":"gemini-2.5-flash"},"usage_by_phase":{"plan":{"calls":4,"prompt_tokens":40,"output_tokens":4,"model":"gemini-2.5-flash"},"steps":{"calls":0,"prompt_tokens":0,"output_tokens":0},"reflection":{"calls":0,"prompt_tokens":0,"output_tokens":0},"conclusion":{"calls":0,"prompt_tokens":0,"output_tokens":0},"sub_agent":{"calls":0,"prompt_tokens":0,"output_tokens":0}},"tool_calls":2,"cost":{"amount":0.000022,"currency":"USD"}}`,
		lastLine(out.String()))
	require.Empty(t, info.String())
}

// TestInterruptedJSON: after Ctrl-C standard output holds only events; the
// resume command is the error (which the starter prints on stderr).
func TestInterruptedJSON(t *testing.T) {
	fastPolling(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeStream("inv", &fakeRun{id: "A", events: notes(1, 3), status: running})
	f.onDescribe = func(n int) {
		if n == 3 {
			cancel()
		}
	}
	var out, info strings.Builder
	err := testClient(f).Watch(ctx, NewJSONRenderer(&out, &info, pricing.Default()), "inv", 2)
	require.Equal(t, "{\"seq\":2,\"kind\":\"note\",\"text\":\"e2\"}\n{\"seq\":3,\"kind\":\"note\",\"text\":\"e3\"}\n", out.String())
	require.ErrorContains(t, err, "(resume with: starter watch inv --from 4 --json)")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}
