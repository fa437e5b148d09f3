package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/investigation"
)

// TestVerdictRestsOnCheckedEvidence, as the analyst sees it: a model whose
// conclusion cites a step that never ran and a tool nobody called does not
// get its true_positive printed; a narrow follow-up keeps the verdict; a
// fact the analyst states in a follow-up changes it, with the reason, in
// the output, the status and the Verdict search attribute.
func TestVerdictRestsOnCheckedEvidence(t *testing.T) {
	id := exampleID(t)
	const pentest = "198.51.100.23 is not our penetration test: none is scheduled (SEC-1182 ended last week). Does that change anything?"
	var reviewed []*geminitest.Request
	p := &phased{seen: map[string][]*geminitest.Request{}, queues: map[string][]geminitest.Handler{
		"plan": {reply(geminitest.JSON(map[string]any{"objective": "Decide whether the brute force succeeded.", "steps": []map[string]any{
			{"id": "1", "description": "Read the alert.", "tools": []string{"get_alert"}, "expected": "details", "depends_on": []string{}}}}))},
		"parent": {
			reply(geminitest.Calls(&genai.FunctionCall{Name: "get_alert", Args: map[string]any{"id": id}})),
			reply(geminitest.Text("198.51.100.23 made 214 failed SSH logins.")),
			reply(geminitest.Text("The alert does not say when deploy logged in.")),
			reply(geminitest.Text("Then nobody we know made the logins.")),
		},
		"reflect": {reply(geminitest.JSON(map[string]any{"achieved": true, "insights": []string{}, "plan_updates": []any{}}))},
		// Asked twice, the same invented evidence: a step that never ran, a tool nobody called.
		"conclude": {
			reply(invented()), reply(invented()),
		},
		"verdict": {
			func(r *geminitest.Request) geminitest.Reply {
				reviewed = append(reviewed, r)
				return geminitest.JSON(map[string]any{"evidence": []any{}, "reason": "A login time does not bear on it.", "verdict": "undetermined", "confidence": "low"})
			},
			func(r *geminitest.Request) geminitest.Reply {
				reviewed = append(reviewed, r)
				return geminitest.JSON(map[string]any{"evidence": []any{
					map[string]any{"step_id": "analyst", "tool": "", "fact": "The analyst says 198.51.100.23 is no approved penetration test."},
					map[string]any{"step_id": "step_1", "tool": "get_alert", "fact": "214 failed SSH logins from 198.51.100.23."},
				}, "reason": "The attempts happened, and the analyst states no penetration test was running.", "verdict": "true_positive", "confidence": "medium"})
			},
		},
		"mode": {
			reply(geminitest.JSON(map[string]any{"reason": "a fact", "mode": "direct"})),
			reply(geminitest.JSON(map[string]any{"reason": "a fact", "mode": "direct"})),
		},
	}}
	model.use(t, func(r *geminitest.Request) geminitest.Reply {
		if r.Phase() == geminitest.PhaseMode {
			p.mu.Lock()
			defer p.mu.Unlock()
			q := p.queues["mode"]
			p.queues["mode"] = q[1:]
			return q[0](r)
		}
		return p.handle(r)
	})

	res := starter(t, nil, "investigate", "--alert", exampleAlert)
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	t.Logf("REPORT invented evidence:\n%s", res.stdout)
	wfID := workflowIDFrom(t, res.stdout)
	require.NotContains(t, res.stdout, "VERDICT  true_positive (high confidence)")
	for _, want := range []string{
		"VERDICT  undetermined (low confidence)",
		`dropped evidence item 1: it names step "step_99", which did not run in this investigation`,
		`dropped evidence item 2: it names tool "port_scanner", which step_1 did not call (it called get_alert)`,
		"**Verdict check:** the conclusion proposed true_positive (high)",
	} {
		require.Contains(t, res.stdout, want)
	}
	require.Len(t, p.seen["conclude"], 2, "the conclusion was asked once more, with the problems named")
	// (the re-ask quotes the problem as one line: its quotes are escaped)
	require.Contains(t, p.seen["conclude"][1].Text(), `it names step \"step_99\"`)

	narrow := starter(t, nil, "ask", wfID, "When did deploy log in?")
	require.Equal(t, 0, narrow.code, narrow.stderr)
	require.NotContains(t, narrow.stdout, "VERDICT", "a narrow question keeps the verdict")

	decided := starter(t, nil, "ask", wfID, pentest)
	require.Equal(t, 0, decided.code, decided.stderr)
	t.Logf("REPORT the analyst's fact:\n%s", decided.stdout)
	for _, want := range []string{
		"VERDICT CHANGED  undetermined (low) -> true_positive (medium)",
		"why: The attempts happened, and the analyst states no penetration test was running.",
		"VERDICT  true_positive (medium confidence)",
		"  - The analyst says 198.51.100.23 is no approved penetration test. [analyst]",
	} {
		require.Contains(t, decided.stdout, want)
	}
	require.Len(t, reviewed, 2)
	require.Contains(t, reviewed[1].Text(), `"verdict": "undetermined"`, "the review is given the standing verdict")
	require.Contains(t, reviewed[1].Text(), `"`+pentest+`"`, "and the analyst's question, quoted")

	st := status(t, wfID)
	require.Equal(t, "true_positive", st.Verdict.Verdict)
	require.Equal(t, []investigation.VerdictChange{
		{Turn: 1, Verdict: "undetermined", Confidence: "low", Reason: st.VerdictHistory[0].Reason},
		{Turn: 3, Verdict: "true_positive", Confidence: "medium", Reason: "The attempts happened, and the analyst states no penetration test was running."},
	}, st.VerdictHistory)
	text := starter(t, nil, "status", wfID)
	require.Equal(t, 0, text.code, text.stderr)
	require.Contains(t, text.stdout, "Verdict history:\n  - turn 1: undetermined (low): ")
	js := starter(t, nil, "status", wfID, "--json")
	require.Equal(t, 0, js.code, js.stderr)
	var sj struct {
		History []investigation.VerdictChange `json:"verdict_history"`
	}
	require.NoError(t, json.Unmarshal([]byte(js.stdout), &sj))
	require.Len(t, sj.History, 2)

	desc, err := tc.DescribeWorkflowExecution(t.Context(), wfID, "")
	require.NoError(t, err)
	verdict := string(desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[investigation.VerdictAttribute].GetData())
	require.Equal(t, `"true_positive"`, strings.TrimSpace(verdict), "the search attribute follows the verdict")
	stop := starter(t, nil, "stop", wfID)
	require.Equal(t, 0, stop.code, stop.stderr)
}

// invented is a conclusion whose evidence names a step that never ran and
// a tool that was never called.
func invented() geminitest.Reply {
	return geminitest.JSON(map[string]any{"report": "## Summary\nThe attacker got in.", "evidence": []any{
		map[string]any{"step_id": "step_99", "tool": "get_alert", "fact": "A root shell was opened."},
		map[string]any{"step_id": "step_1", "tool": "port_scanner", "fact": "Port 22 was open."},
	}, "reason": "It is a compromise.", "verdict": "true_positive", "confidence": "high"})
}
