package activities

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/tools"
)

// exampleTools is the registry the shipped examples are written for: the
// threat-intelligence tools, the alert tools and ask_user (bigquery_agent
// is known by name in the plan's check).
func exampleTools(t *testing.T) *tools.Registry {
	reg := intelTools(t)
	require.NoError(t, reg.Add(tools.NewSearchAlerts(nil), tools.NewAskUser()))
	return reg
}

// Every example a prompt shows is accepted by the check its answer goes
// through, in every language: an example the check refuses teaches the
// model the very answer the code overrules. The conclusion's example is a
// first verdict; the review's lowers the standing true_positive in an
// analyst's follow-up, as its prompt says, so it must cite a tool's result
// of this exchange.
func TestShippedExamplesPassTheirChecks(t *testing.T) {
	reg := exampleTools(t)
	contexts := map[string]VerdictContext{
		// The plan example's steps, run in the first exchange; ask_user
		// answered by the analyst.
		"conclude": {Turn: 1, Analyst: true, Ran: []investigation.StepRun{
			{Turn: 1, Step: "step_1", Tools: []string{"query_otx", "search_alerts"}},
			{Turn: 1, Step: "step_2", Tools: []string{"bigquery_agent"}},
			{Turn: 1, Step: "step_3", Tools: []string{"bigquery_agent", "ask_user"}},
		}},
		// The analyst's follow-up, answered directly with a log query,
		// after a first exchange that concluded true_positive.
		"verdict": {Turn: 2, Analyst: true, Standing: standing, Ran: []investigation.StepRun{
			{Turn: 1, Step: "step_1", Tools: []string{"get_alert"}},
			{Turn: 1, Step: "step_2", Tools: []string{"bigquery_agent"}},
			{Turn: 2, Step: "answer", Tools: []string{"bigquery_agent"}},
		}},
	}
	for phase, examples := range map[string]map[string]string{"conclude": concludeExamples, "verdict": verdictExamples} {
		require.Len(t, examples, len(investigation.Languages), "%s: one example per language", phase)
		for lang, ex := range examples {
			var v modelVerdict
			require.NoError(t, json.Unmarshal([]byte(ex), &v), "%s %s", phase, lang)
			require.NoError(t, v.values(), "%s %s", phase, lang)
			c := contexts[phase].readingAlerts(reg)
			require.Empty(t, c.problems(v), "%s %s: the check asks the model to fix the example", phase, lang)
			out, notes, overruled := c.settle(v, lang)
			require.Empty(t, overruled, "%s %s: the check overrules the example", phase, lang)
			require.Empty(t, notes, "%s %s", phase, lang)
			require.Equal(t, v.Verdict, out.Verdict, "%s %s", phase, lang)
			require.Len(t, out.Evidence, len(v.Evidence), "%s %s: an item is dropped", phase, lang)
		}
	}

	var p plan.Plan
	require.NoError(t, json.Unmarshal([]byte(planExample), &p))
	_, notes, err := plan.Repair(p, append(reg.Names(), "bigquery_agent"), 5)
	require.NoError(t, err)
	require.Empty(t, notes, "the plan example is repaired")

	var r struct {
		Insights    *[]string      `json:"insights"`
		PlanUpdates *[]plan.Update `json:"plan_updates"`
		Achieved    *bool          `json:"achieved"`
	}
	require.NoError(t, json.Unmarshal([]byte(reflectExample), &r))
	require.True(t, r.Insights != nil && r.PlanUpdates != nil && r.Achieved != nil, "the reflection example lacks a required field")
}
