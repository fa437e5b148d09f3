package standin

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/plan"
)

func concludeData(alert string, steps ...stepView) map[string]any {
	return map[string]any{"Request": "Investigate.", "Plan": "Objective: o", "Alert": alert, "Steps": steps, "Language": "English", "Lang": "en", "Example": "{}", "Cite": "- `step_1`: tools get_alert"}
}

func done(id string, rec record) stepView {
	rec.Step = id
	return stepView{Step: plan.Step{ID: id, Description: "d", Status: plan.Done}, Result: answer("Findings of "+id+":", rec)}
}

var sections = []string{"## Summary\n", "## Key findings\n", "## Assessment\n", "## Uncertainties\n", "## Recommended actions\n"}

// A login after failures is a true positive with high confidence; the
// report says who wrote it and names the address, user, time and earlier
// alerts; each evidence item names its step and tool.
func TestConcludeTruePositive(t *testing.T) {
	h := newHarness(t)
	al := readAlert(t, guardDutyFile)
	out := h.structured(agentPrompts, "conclude", concludeData(alertSection(t, al),
		done("step_1", record{Searched: true, SearchedFor: "198.51.100.23", Earlier: []string{"guardduty-8db0f55e83fd"},
			Evidence: []evidence{{Tool: "search_alerts", Fact: "1 earlier alert(s) involve 198.51.100.23: guardduty-8db0f55e83fd."}}}),
		done("step_3", record{LogsChecked: true, Failures: 214, FirstFailure: "2026-11-20T07:58:12Z", LastFailure: "2026-11-20T08:14:47Z",
			Login:    &login{Source: "198.51.100.23", User: "deploy", Host: "web-server-prod-01", Time: "2026-11-20T08:14:52Z", Method: "password"},
			Evidence: []evidence{{Tool: "bigquery_agent", Fact: "198.51.100.23 logged in as deploy."}}}),
		done("step_4", record{SessionChecked: true, Activity: []string{"08:35:12 sudo (nopasswd): COMMAND=/usr/bin/bash /tmp/.x.sh"},
			Evidence: []evidence{{Tool: "bigquery_agent", Fact: "The session ran sudo."}}}),
	))
	assert.Equal(t, "true_positive", out["verdict"])
	assert.Equal(t, "high", out["confidence"])
	assert.Equal(t, []any{
		map[string]any{"step_id": "step_1", "tool": "search_alerts", "fact": "1 earlier alert(s) involve 198.51.100.23: guardduty-8db0f55e83fd."},
		map[string]any{"step_id": "step_3", "tool": "bigquery_agent", "fact": "198.51.100.23 logged in as deploy."},
		map[string]any{"step_id": "step_4", "tool": "bigquery_agent", "fact": "The session ran sudo."},
	}, out["evidence"])
	report := out["report"].(string)
	last := 0
	for _, s := range sections {
		i := strings.Index(report, s)
		require.Greater(t, i, last-1, "section %q in order", s)
		last = i
	}
	assert.Contains(t, report, "Written by the offline Gemini stand-in, not by a model.")
	assert.Contains(t, report, "198.51.100.23 attacked web-server-prod-01 with 214 failed login attempts (2026-11-20 07:58:12–08:14:47 UTC) and then logged in as deploy at 2026-11-20 08:14:52 UTC by password.")
	assert.Contains(t, report, "COMMAND=/usr/bin/bash /tmp/.x.sh")
	assert.Contains(t, report, "earlier alert(s) guardduty-8db0f55e83fd")
	assert.Contains(t, report, "- 198.51.100.23 logged in as deploy. (step_3, bigquery_agent)")
	assert.Contains(t, report, "Isolate web-server-prod-01 (i-0abc1234def567890)")
}

// Without logs there is no verdict to give: undetermined, low.
func TestConcludeUndetermined(t *testing.T) {
	h := newHarness(t)
	out := h.structured(agentPrompts, "conclude", concludeData(alertSection(t, readAlert(t, sccFile)),
		done("step_1", record{Searched: true, SearchedFor: "203.0.113.45", Evidence: []evidence{{Tool: "search_alerts", Fact: "No earlier alert."}}}),
		done("step_3", record{Evidence: []evidence{{Fact: "No step corroborated the alert."}}}),
	))
	assert.Equal(t, "undetermined", out["verdict"])
	assert.Equal(t, "low", out["confidence"])
	assert.Equal(t, []any{map[string]any{"step_id": "step_1", "tool": "search_alerts", "fact": "No earlier alert."}}, out["evidence"],
		"evidence names a tool; the tool-less finding stays in the report")
	assert.Contains(t, out["report"], "No step corroborated the alert.")
	report := out["report"].(string)
	for _, s := range sections {
		assert.Contains(t, report, s)
	}
	assert.Contains(t, report, "The logs were not read: the alert names no source address")
	assert.Contains(t, report, "batch-worker-7")

	// Logs that show a login without failures leave it undetermined too.
	out = h.structured(agentPrompts, "conclude", concludeData(alertSection(t, readAlert(t, guardDutyFile)),
		done("step_3", record{LogsChecked: true, Login: &login{Source: "192.0.2.10", User: "alice", Host: "bastion-01", Time: "2026-11-20T09:00:00Z"}}),
	))
	assert.Equal(t, "undetermined", out["verdict"])
	assert.Equal(t, "medium", out["confidence"])
}
