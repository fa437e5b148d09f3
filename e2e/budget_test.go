package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
)

// TestToolCallBudgetCutsTheTurn: with --max-tool-calls 2, a turn that asks
// for three calls runs two; the third gets an error result naming the spent
// budget, the step answers at once from what it has, reflection and the
// remaining step are skipped, and the conclusion says why it ended early.
func TestToolCallBudgetCutsTheTurn(t *testing.T) {
	id := exampleID(t)
	var final *geminitest.Request
	var concludePrompt string
	model.use(t, geminitest.Script(
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.JSON(map[string]any{
				"objective": "Decide whether the SSH brute force succeeded.",
				"steps": []map[string]any{
					{"id": "s1", "description": "Read the alert and search earlier alerts.", "tools": []string{"get_alert", "search_alerts"}, "expected": "context"},
					{"id": "s2", "description": "Search earlier alerts for the instance.", "tools": []string{"search_alerts"}, "expected": "history"},
				},
			})
		},
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.Calls(
				&genai.FunctionCall{Name: "get_alert", Args: map[string]any{"id": id}},
				&genai.FunctionCall{Name: "search_alerts", Args: map[string]any{
					"field": "service.action.networkConnectionAction.remoteIpDetails.ipAddressV4", "op": "==", "value": "198.51.100.23"}},
				&genai.FunctionCall{Name: "search_alerts", Args: map[string]any{
					"field": "resource.instanceDetails.instanceId", "op": "==", "value": "i-0abc1234def567890"}},
			)
		},
		func(r *geminitest.Request) geminitest.Reply {
			final = r
			return geminitest.Text("198.51.100.23 brute-forced web-server-prod-01; the instance's history was not searched.")
		},
		func(r *geminitest.Request) geminitest.Reply {
			concludePrompt = r.Text()
			return geminitest.Conclusion("## Summary\nBrute force seen; the search was cut by the budget.", "undetermined", "low")
		},
	))
	before := len(modelSrv.Requests())
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--max-tool-calls", "2")
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Equal(t, 4, len(modelSrv.Requests())-before, "plan, two turns of step_1, the conclusion: no reflection, no step_2")

	require.NotNil(t, final)
	resps := final.FunctionResponses()
	require.Len(t, resps, 3, "every call gets a response, in call order")
	require.NotContains(t, toJSON(resps[1].Response), "budget", "the second call ran")
	require.Contains(t, toJSON(resps[2].Response), "tool-call budget is spent", "the third did not run")
	require.Contains(t, concludePrompt, "this exchange used its 2 tool calls", "the conclusion is told why it ended early")
	require.Contains(t, res.stdout, "VERDICT  undetermined (low confidence)")

	hist := history(t, workflowIDFrom(t, res.stdout))
	var calls []string
	for _, a := range activitiesIn(t, hist, converter.GetDefaultDataConverter()) {
		if a.Type == "CallTool" {
			calls = append(calls, a.Summary)
		}
		require.NotEqual(t, "Reflect", a.Type, "a step cut short is not reflected on")
	}
	require.Len(t, calls, 2, "only the calls within the budget ran: %s", strings.Join(calls, "; "))
	saveHistory(t, hist, "budget.history.json")
}
