package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// An investigation that called bigquery_agent charges a sub-agent phase of
// model turns and memory embeddings. Summed as "(several models)" it had
// no price, and the room, failing closed, held every start but critical
// ones for the rest of the day; kept per model, it is priced, and the next
// alert starts while the day's spend is under the budget. The spend rides
// in the concluded signal, as JSON.
func TestSubAgentSpendKeepsTheBudgetOpen(t *testing.T) {
	h := newAdmissionHarness(t)
	s := intake.Settings{MaxRunning: 2, DailyBudgetUSD: 1}
	h.admit(time.Second, s, alertOf("a1", "id:1", "high"))
	var sp investigation.Spend
	sp.ByPhase.Steps = investigation.Usage{Calls: 2, PromptTokens: 20000, OutputTokens: 800, Model: "gemini-2.5-flash"}
	sp.ByPhase.SubAgent = investigation.Usage{Calls: 1, PromptTokens: 40000, OutputTokens: 1200, Model: "gemini-2.5-flash"}.
		Add(investigation.Usage{Calls: 1, PromptTokens: 30, Model: "gemini-embedding-001"})
	sp.Usage = sp.ByPhase.Total()
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(investigation.ConcludedSignal, investigation.Concluded{WorkflowID: intake.WorkflowID("id:1"), Spend: sp})
	}, time.Minute)
	h.admit(2*time.Minute, s, alertOf("a2", "id:2", "high"))
	var st intake.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 150*time.Second)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 3*time.Minute)
	h.env.ExecuteWorkflow(intake.AdmissionWorkflowName, AdmissionInput{})
	require.Len(t, h.results, 2)
	require.Equal(t, intake.OutcomeStarted, h.results[1].Outcomes[0].Kind, "%+v", h.results[1].Outcomes[0])
	require.Empty(t, st.Unpriced)
	want := (60000*0.30 + 2000*2.50 + 30*0.15) / 1e6
	require.InDelta(t, want, st.SpentToday, 1e-9, "each model's part at its own price")
}
