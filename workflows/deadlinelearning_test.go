package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/investigation"
)

// learningAgent runs a sub-agent under a stand-in parent whose one model
// turn takes turn and whose deadline is deadline after its start; it
// returns what the learning activities were given (their
// ScheduleToClose), keyed by activity, and when the answer was delivered,
// after the start.
func learningAgent(t *testing.T, turn, deadline time.Duration) (map[string]time.Duration, time.Duration) {
	t.Helper()
	h := newHarness(t)
	h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
	h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{}, nil)
	h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).After(turn).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Key: in.Key, Text: "answer"}, nil
	})
	var mu sync.Mutex
	learned := map[string]time.Duration{}
	took := func(ctx context.Context, name string) {
		mu.Lock()
		defer mu.Unlock()
		learned[name] = activity.GetInfo(ctx).ScheduleToCloseTimeout
	}
	h.env.OnActivity(bq.Introspect, mock.Anything, mock.Anything).Return(func(ctx context.Context, _ bigquery.IntrospectInput) (bigquery.Introspection, error) {
		took(ctx, "Introspect")
		return bigquery.Introspection{Claims: []memory.Claim{{Kind: memory.KindColumnMeaning, Text: "claim"}}}, nil
	}).Maybe()
	h.env.OnActivity(bq.UpdateMemories, mock.Anything, mock.Anything).Return(func(ctx context.Context, _ bigquery.MemoryUpdate) (bigquery.MemoryChanges, error) {
		took(ctx, "UpdateMemories")
		return bigquery.MemoryChanges{}, nil
	}).Maybe()
	start := h.env.Now()
	var delivered time.Duration
	h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
		delivered = h.env.Now().Sub(start)
		return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
	})
	h.env.RegisterWorkflow(asParent)
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "parent"})
	h.env.ExecuteWorkflow(asParent, childID("parent", "t1-step_1-i1-c1"), bigquery.Request{
		Request: "q", ParentSession: "parent", ResultKey: "t1-step_1-i1-c1", CallID: "c1", Deadline: start.Add(deadline)})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	return learned, delivered
}

// A sub-agent whose last model turn began before its deadline and answered
// after it delivers that answer at once: the parent waits on it, and
// learning (two activities of up to 4 minutes each) would overrun the
// investigation's time budget.
func TestSubAgentPastItsDeadlineAnswersWithoutLearning(t *testing.T) {
	learned, delivered := learningAgent(t, 3*time.Minute, time.Minute)
	require.Empty(t, learned, "a sub-agent past its deadline learns nothing")
	require.Equal(t, 3*time.Minute, delivered, "the answer is delivered when the turn returns")
}

// Learning that begins before the deadline is bounded by the time left, so
// it ends by the deadline; with too little left it does not begin.
func TestSubAgentLearnsWithinItsDeadline(t *testing.T) {
	learned, _ := learningAgent(t, time.Minute, 3*time.Minute)
	require.Equal(t, map[string]time.Duration{"Introspect": 2 * time.Minute, "UpdateMemories": 2 * time.Minute}, learned,
		"each learning activity is bounded by the time left")

	learned, _ = learningAgent(t, 0, time.Hour)
	require.Equal(t, map[string]time.Duration{"Introspect": bestEffortBudget, "UpdateMemories": bestEffortBudget}, learned,
		"with time to spare each keeps its budget")

	learned, delivered := learningAgent(t, time.Minute, time.Minute+learnMinimum-time.Second)
	require.Empty(t, learned, "with less than learnMinimum left nothing is learned")
	require.Equal(t, time.Minute, delivered)
}
