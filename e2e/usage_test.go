package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/secops-agent/investigator/investigation"
)

// usageInHistory sums the model usage that a workflow's activities
// returned, read from its history: each model call's activity result
// carries the usage of that call, and nothing else does.
func usageInHistory(t *testing.T, wfID string) investigation.Usage {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	var sum investigation.Usage
	for _, e := range history(t, wfID).Events {
		at := e.GetActivityTaskCompletedEventAttributes()
		if at == nil {
			continue
		}
		var out struct {
			Usage investigation.Usage `json:"usage"`
		}
		require.NoError(t, dc.FromPayloads(at.GetResult(), &out))
		sum = sum.Add(out.Usage)
	}
	return sum
}

// requireUsageOfTree checks that an investigation's result counts the model
// usage of its whole run tree: its own activities and those of its
// sub-agent children, each child's as the sub-agent phase.
func requireUsageOfTree(t *testing.T, parentID string, childIDs []string) investigation.Result {
	t.Helper()
	var res investigation.Result
	require.NoError(t, tc.GetWorkflow(context.Background(), parentID, "").Get(context.Background(), &res))
	var children investigation.Usage
	for _, id := range childIDs {
		children = children.Add(usageInHistory(t, id))
	}
	require.Positive(t, children.Calls)
	require.Positive(t, children.PromptTokens, "the stand-in reports token counts")
	require.Equal(t, children, res.ByPhase.SubAgent, "the sub-agent phase is the children's usage")
	require.Equal(t, usageInHistory(t, parentID).Add(children), res.Usage, "the total is the run tree's")
	require.Equal(t, res.Usage, res.ByPhase.Total())
	t.Logf("REPORT usage of the run tree: %d model calls, %d prompt + %d output tokens; the sub-agents' %d calls, %d + %d tokens",
		res.Usage.Calls, res.Usage.PromptTokens, res.Usage.OutputTokens, children.Calls, children.PromptTokens, children.OutputTokens)
	return res
}
