package standin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/toolcall"
)

func modeData(alert, activePlan string) map[string]any {
	return map[string]any{"Alert": alert, "History": "[user]\nInvestigate.\n\n[assistant]\nObjective: o", "ActivePlan": activePlan, "Question": "Which user ran the miner?"}
}

// A finished plan gets direct answers; a plan with pending steps goes on.
func TestMode(t *testing.T) {
	h := newHarness(t)
	alert := alertSection(t, readAlert(t, sccFile))
	out := h.structured(agentPrompts, "mode", modeData(alert, "Objective: o\n- step_1 (done): a [tools: get_alert]\n- step_2 (cancelled): b [tools: get_alert]"))
	assert.Equal(t, "direct", out["mode"])
	out = h.structured(agentPrompts, "mode", modeData(alert, "Objective: o\n- step_1 (done): a [tools: get_alert]\n- step_2 (pending): b [tools: get_alert]"))
	assert.Equal(t, "plan", out["mode"])
	assert.Contains(t, out["reason"], "step_2")
}

// The direct answer looks at the alert once, then quotes the key findings
// of the last conclusion in the conversation and the alert's indicators.
func TestDirectAnswer(t *testing.T) {
	h := newHarness(t)
	al := readAlert(t, sccFile)
	history := "[user]\nInvestigate.\n\n[assistant]\nObjective: o\n\n## Summary\nx\n\n## Key findings\n- No earlier alert. (step_1, search_alerts)\n\n## Assessment\ny"
	data := map[string]any{"Alert": alertSection(t, al), "History": history, "Question": "Which user ran the miner?", "Language": "English",
		"RefPrefix": toolcall.RefPrefix, "Final": false}
	reg := registry(t, true)
	l := h.loop(agentPrompts, "answer", data, reg.Declarations(reg.Names()))
	_, calls := l.turn(false)
	require.Len(t, calls, 1)
	assert.Equal(t, "get_alert", calls[0].Name)
	l.answer(calls, map[string]map[string]any{calls[0].ID: getAlertResult(al)})
	text, calls := l.turn(false)
	assert.Empty(t, calls)
	assert.Contains(t, text, "without reading them: it is a script, not a model")
	assert.Contains(t, text, "- No earlier alert. (step_1, search_alerts)")
	assert.Contains(t, text, "user svc-batch")
}

// The review after a direct answer keeps the standing verdict, evidence
// and all: the stand-in cannot weigh what the analyst said.
func TestVerdictReviewKeepsTheVerdict(t *testing.T) {
	h := newHarness(t)
	standing := map[string]any{"verdict": "true_positive", "confidence": "high", "reason": "r",
		"evidence": []any{map[string]any{"step_id": "step_3", "tool": "bigquery_agent", "fact": "deploy logged in"}}}
	out := h.structured(agentPrompts, "verdict", map[string]any{"Question": "Was it our pentest?", "Answer": "Maybe.", "Language": "English",
		"Standing": standing, "Cite": "- `step_3`: tools bigquery_agent", "Example": "{}"})
	assert.Equal(t, "true_positive", out["verdict"])
	assert.Equal(t, "high", out["confidence"])
	assert.Equal(t, standing["evidence"], out["evidence"])
}
