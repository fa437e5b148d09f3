package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/investigation"
)

// A stop that reaches the sub-agent while it introspects lets that model
// call finish, then answers: no UpdateMemories (embedding calls) for the
// parent's conclusion to wait on.
func TestStopDuringIntrospectionSkipsSavingMemories(t *testing.T) {
	h := newHarness(t)
	h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
	h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{}, nil)
	h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Key: in.Key, Text: "answer"}, nil
	})
	h.env.OnActivity(bq.Introspect, mock.Anything, mock.Anything).After(time.Minute).Return(bigquery.Introspection{Claims: []memory.Claim{{Kind: memory.KindColumnMeaning, Text: "claim"}}}, nil)
	updated := false
	h.env.OnActivity(bq.UpdateMemories, mock.Anything, mock.Anything).After(2 * time.Minute).Return(func(context.Context, bigquery.MemoryUpdate) (bigquery.MemoryChanges, error) {
		updated = true
		return bigquery.MemoryChanges{}, nil
	}).Maybe()
	delivered := false
	h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
		delivered = in.Answer == "answer"
		return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
	})
	start := h.env.Now()
	child := childID("parent", "t1-step_1-i1-c1")
	h.env.RegisterDelayedCallback(func() {
		require.NoError(t, h.env.SignalWorkflowByID(child, investigation.UpdateStop, "stopped by the analyst"))
	}, 30*time.Second)
	h.env.RegisterWorkflow(asParent)
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "parent"})
	h.env.ExecuteWorkflow(asParent, child, bigquery.Request{Request: "q", ParentSession: "parent", ResultKey: "t1-step_1-i1-c1", CallID: "c1"})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	require.False(t, updated, "UpdateMemories ran after the stop")
	require.True(t, delivered, "the sub-agent delivers its answer")
	require.Less(t, h.env.Now().Sub(start), 2*time.Minute, "the answer follows the stop by the introspection in flight only")
}
