package workflows

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// firstWins is a transcript store as Firestore's: a key written once keeps
// its first entry, and a later Put returns it.
type firstWins struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *firstWins) put(session, key, text string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[session+"/"+key]; ok {
		return old
	}
	s.m[session+"/"+key] = text
	return text
}

// sessionRun is what one run under a workflow ID met.
type sessionRun struct {
	answer   string   // the step's answer
	child    string   // the sub-agent's workflow ID
	parent   string   // the session the sub-agent delivered its answer to
	progress []string // the sessions progress was stored under
}

// runUnder runs an investigation under workflow ID id whose step asks the
// BigQuery sub-agent, then answers with fresh; turns and the sub-agent's
// answer go through store.
func runUnder(t *testing.T, store *firstWins, id string, in investigation.Input, fresh string) (sessionRun, error) {
	t.Helper()
	var got sessionRun
	h := newHarness(t)
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
	h.stored = func(p activities.ProgressInput) { got.progress = append(got.progress, p.Session) }
	h.env.OnActivity(a.StoreProgress, mock.Anything, mock.Anything).Return(func(_ context.Context, p activities.ProgressInput) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.stored(p)
		return nil
	})
	h.onPlan(activities.PlanOutput{Tools: []toolcall.Tool{{Name: toolcall.BigQueryAgent, Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}},
		Plan: plan.Plan{Objective: "o", Steps: []plan.Step{{ID: "step_1", Description: "ask logs", Tools: []string{toolcall.BigQueryAgent}, Status: plan.Pending}}}}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: toolcall.BigQueryAgent, Args: map[string]any{"request": "logins"}}}}, nil
		}
		return activities.TurnOutput{Text: store.put(in.Session, in.Key, fresh)}, nil
	})
	h.onReflect(noChange)
	h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{}, nil)
	h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Key: in.Key, Text: "rows"}, nil
	})
	h.env.OnActivity(bq.Introspect, mock.Anything, mock.Anything).Return(bigquery.Introspection{}, nil).Maybe()
	h.env.OnActivity(bq.UpdateMemories, mock.Anything, mock.Anything).Return(bigquery.MemoryChanges{}, nil).Maybe()
	h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
		got.parent = in.ParentSession
		store.put(in.ParentSession, in.ResultKey, in.Answer)
		return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
	})
	h.env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		got.child = info.WorkflowExecution.ID
	})
	res, err := h.run(t, in)
	if err != nil {
		return got, err
	}
	got.answer = res.Plan.Steps[0].Result
	return got, nil
}

// A new run under the workflow ID of a closed one (the intake's
// reinvestigation) with a session of its own writes its turns, its
// sub-agent and its progress apart from the closed run's: its step gets
// the answer it paid for, not the closed run's under the same key.
func TestReusedWorkflowIDRunsInItsOwnSession(t *testing.T) {
	store := &firstWins{m: map[string]string{}}
	const id = "intake-guardduty_x-0123456789ab"
	first, err := runUnder(t, store, id, investigation.Input{AlertID: "a1"}, "the first run's answer")
	require.NoError(t, err)
	require.Equal(t, "the first run's answer", first.answer)
	require.Equal(t, id+"-bq-t1-step_1-i1-c1", first.child, "without a session, children derive from the ID as before")
	require.Equal(t, id, first.parent)

	second, err := runUnder(t, store, id, investigation.Input{AlertID: "a1", Session: id + "~20261130T101500.000Z"}, "the second run's answer")
	require.NoError(t, err)
	require.Equal(t, "the second run's answer", second.answer, "the new run must not get the closed run's turn back")
	require.Equal(t, id+"~20261130T101500.000Z-bq-t1-step_1-i1-c1", second.child)
	require.Equal(t, id+"~20261130T101500.000Z", second.parent)
	require.NotEmpty(t, second.progress)
	for _, s := range second.progress {
		require.Equal(t, id+"~20261130T101500.000Z", s, "progress numbered from 1 again goes to the new session")
	}
}

// No input points a run at another investigation's session: the session
// is the run's own workflow ID, or that ID, "~" and a short suffix.
func TestSessionOfAnotherInvestigationIsRefused(t *testing.T) {
	const id = "intake-x-0123456789ab"
	for _, session := range []string{
		"intake-y-0123456789ab",             // another investigation
		id + "-bq-t1-step_1-i1-c1",          // its own sub-agent's
		"intake-x",                          // a prefix of the ID
		id + "~",                            // an empty suffix
		id + "~a/b",                         // a path
		id + "~x~y",                         // a second separator
		id + "~" + string(make([]byte, 65)), // too long, and not the alphabet
	} {
		h := newHarness(t)
		h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
		_, err := h.run(t, investigation.Input{AlertID: "a1", Session: session})
		require.Error(t, err, session)
		require.Contains(t, err.Error(), "is not this investigation's", session)
	}
}
