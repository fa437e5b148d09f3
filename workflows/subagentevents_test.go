package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/investigation"
)

// subAgentProgress reads every progress event a sub-agent serves, page by
// page, as a follower does.
func subAgentProgress(t *testing.T, h *harness, id string) []investigation.Event {
	t.Helper()
	var all []investigation.Event
	for after := 0; ; {
		v, err := h.env.QueryWorkflowByID(id, investigation.ProgressQuery, after)
		require.NoError(t, err)
		var evs []investigation.Event
		require.NoError(t, v.Get(&evs))
		if len(evs) == 0 {
			return all
		}
		all = append(all, evs...)
		after = evs[len(evs)-1].Seq
	}
}

// Anyone who may signal workflows can send a sub-agent stop signals it
// cannot read, thousands of them: its progress keeps a bounded number of
// notes about them, and its own progress (the recall, the answer) stays.
func TestSubAgentNotesAFloodOfBadStopSignalsBounded(t *testing.T) {
	const flood = 1000
	h := newHarness(t)
	h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
	h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{}, nil)
	h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).After(time.Minute).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Key: in.Key, Text: "answer"}, nil
	})
	h.env.OnActivity(bq.Introspect, mock.Anything, mock.Anything).Return(bigquery.Introspection{}, nil)
	h.env.OnActivity(bq.UpdateMemories, mock.Anything, mock.Anything).Return(bigquery.MemoryChanges{}, nil)
	h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
		return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
	})
	child := childID("parent", "t1-step_1-i1-c1")
	h.env.RegisterDelayedCallback(func() {
		for i := range flood {
			// Neither a JSON string nor {"text": ...}: ignored, not a stop.
			require.NoError(t, h.env.SignalWorkflowByID(child, investigation.UpdateStop, map[string]any{"n": i}))
		}
	}, 10*time.Second)
	h.env.RegisterWorkflow(asParent)
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "parent"})
	h.env.ExecuteWorkflow(asParent, child, bigquery.Request{Request: "q", ParentSession: "parent", ResultKey: "t1-step_1-i1-c1", CallID: "c1"})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())

	evs := subAgentProgress(t, h, child)
	ignored, stops := 0, 0
	for i, e := range evs {
		require.Equal(t, evs[0].Seq+i, e.Seq, "events are numbered in turn")
		if strings.HasPrefix(e.Text, investigation.UpdateStop+" signal ignored") {
			ignored++
		}
		if e.Kind == investigation.EventStop {
			stops++
		}
	}
	require.Less(t, len(evs), 100, "a flood of unreadable stop signals is not noted signal by signal")
	require.Equal(t, maxSignalNotes, ignored)
	require.Equal(t, 0, stops, "an unreadable signal stops nothing")
	require.Contains(t, evs[0].Text, "Recalled 0 memories", "the sub-agent's own progress is kept")
	require.Contains(t, evs[len(evs)-1].Text, "Proposed 0 claims", "learning ran: the answer was never cut")
	noted := false
	for _, e := range evs {
		noted = noted || strings.Contains(e.Text, "further stop signals that are refused or ignored are not noted")
	}
	require.True(t, noted, "the progress says that later refusals go unnoted")
}
