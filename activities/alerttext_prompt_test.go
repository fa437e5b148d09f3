package activities

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/plan"
)

// TestPromptsSayWhatAlertsTextCannotSettle: the verdict check weighs the
// results of tools that give back alerts' text as the alert itself, so
// every phase that steers towards a verdict is told so, with the tools'
// names from the registry: the planner (plan a check beyond them), the
// reflection (achieved is no benign on them alone), the direct answer (no
// change on them), and the verdict's own rules (a change needs new
// evidence as the check counts it).
func TestPromptsSayWhatAlertsTextCannotSettle(t *testing.T) {
	names := alertToolList(alertTools(t))
	require.Contains(t, names, "get_alert")
	require.Contains(t, names, "search_alerts")
	rs, err := prompts.Render("reflect/system", prompt.NewTag(), map[string]any{"Step": plan.Step{ID: "step_1"}, "Example": "{}", "AlertTools": names})
	require.NoError(t, err)
	ps, err := prompts.Render("plan/system", prompt.NewTag(), map[string]any{"MaxSteps": 5, "Example": "{}", "AlertTools": names})
	require.NoError(t, err)
	as, err := renderPhase(prompt.NewTag(), "answer", map[string]any{"Standing": standing, "Lang": "en", "Language": "English", "Alert": "x", "Question": "q", "AlertTools": names})
	require.NoError(t, err)
	for phase, text := range map[string]string{"reflect": rs, "plan": ps, "answer": as.system} {
		require.Contains(t, text, "Results of "+names+" are alerts' text", phase)
	}
	require.Contains(t, rs, "never answer it as benign or false positive")
	cs, err := renderPhase(prompt.NewTag(), "conclude", map[string]any{"Standing": standing, "Lang": "en", "Language": "English", "Cite": "-", "Request": "q", "Alert": "a", "Plan": "p", "Asker": ""})
	require.NoError(t, err)
	require.Contains(t, cs.user, "whose result is new evidence")
	require.Contains(t, cs.system+cs.user, "a tool whose call in it returned a result")
	require.False(t, strings.Contains(cs.system+cs.user, "a tool it called in it"))
}
