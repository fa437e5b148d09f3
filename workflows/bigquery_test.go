package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

func TestBigQueryAgentLearningIsBestEffort(t *testing.T) {
	cases := []struct {
		name             string
		recallErr        error
		introspectErr    error
		updateErr        error
		status           memory.Status
		approved         []string
		wantUpdateCalled bool
		wantNote         string
	}{
		{name: "all good", wantUpdateCalled: true, wantNote: "Proposed 1 claims for review (starter memory list --proposed)"},
		{name: "auto-approved", status: memory.StatusApproved, wantUpdateCalled: true, wantNote: "Learned 1 claims, approved automatically"},
		{name: "some auto-approved", approved: []string{"m-2"}, wantUpdateCalled: true, wantNote: "Learned 1 claims, approved automatically; proposed 1 for review"},
		{name: "recall fails", recallErr: errors.New("firestore down"), wantUpdateCalled: true, wantNote: "Memory recall failed"},
		{name: "introspection fails", introspectErr: temporal.NewNonRetryableApplicationError("bad", "GeminiInvalidRequest", nil), wantNote: "Introspection failed"},
		{name: "saving fails", updateErr: temporal.NewNonRetryableApplicationError("quota", "x", nil), wantUpdateCalled: true, wantNote: "Saving memories failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
			h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{Memories: []bigquery.MemoryNote{{ID: "m-1", Claim: "c"}}}, c.recallErr)
			h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
				if c.recallErr == nil {
					require.Equal(t, "m-1", in.Memories[0].ID, "recalled memories reach the sub-agent")
				}
				return activities.TurnOutput{Key: in.Key, Text: "answer"}, nil
			})
			h.env.OnActivity(bq.Introspect, mock.Anything, mock.Anything).Return(bigquery.Introspection{Claims: []memory.Claim{{Kind: memory.KindColumnMeaning, Text: "claim"}}, Helpful: []string{"m-1"}}, c.introspectErr)
			updated := false
			h.env.OnActivity(bq.UpdateMemories, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.MemoryUpdate) (bigquery.MemoryChanges, error) {
				updated = true
				require.Equal(t, []string{"m-1"}, in.Helpful)
				saved := []string{"m-2"}
				if c.approved != nil {
					saved = append(saved, "m-3")
				}
				return bigquery.MemoryChanges{Saved: saved, Approved: c.approved, Status: c.status}, c.updateErr
			}).Maybe()
			var delivered bigquery.DeliverInput
			h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
				delivered = in
				return activities.ToolOutput{Key: in.ResultKey, OK: true, Link: &in.Link}, nil
			})
			h.env.RegisterWorkflow(asParent)
			h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "parent"})
			h.env.ExecuteWorkflow(asParent, childID("parent", "t1-step_1-i1-c1"), bigquery.Request{Request: "q", ParentSession: "parent", ResultKey: "t1-step_1-i1-c1", CallID: "c1"})
			require.True(t, h.env.IsWorkflowCompleted())
			require.NoError(t, h.env.GetWorkflowError(), "learning never fails the sub-agent")
			var out activities.ToolOutput
			require.NoError(t, h.env.GetWorkflowResult(&out))
			require.Equal(t, "t1-step_1-i1-c1", out.Key)
			require.Equal(t, "answer", delivered.Answer)
			require.Equal(t, "parent", delivered.ParentSession)
			require.Equal(t, "bigquery_agent", delivered.Tool)
			require.Equal(t, c.wantUpdateCalled, updated)
			v, err := h.env.QueryWorkflowByID(childID("parent", "t1-step_1-i1-c1"), investigation.ProgressQuery, 0)
			require.NoError(t, err)
			var evs []investigation.Event
			require.NoError(t, v.Get(&evs))
			var notes []string
			for _, e := range evs {
				notes = append(notes, e.Text)
			}
			require.Contains(t, notes[len(notes)-1]+notes[0], c.wantNote)
		})
	}
}

func TestBigQueryAgentNeedsARequest(t *testing.T) {
	h := newHarness(t)
	h.onPlan(activities.PlanOutput{Tools: []toolcall.Tool{{Name: "bigquery_agent", Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}}, Plan: plan.Plan{Objective: "o", Steps: []plan.Step{
		{ID: "step_1", Description: "ask logs", Tools: []string{"bigquery_agent"}, Status: plan.Pending}}}}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "bigquery_agent", Args: map[string]any{"request": "  "}}}}, nil
		}
		return activities.TurnOutput{Text: "no logs"}, nil
	})
	h.onReflect(noChange)
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	ref := h.turns[1].Transcript[1]
	require.Equal(t, "bigquery_agent", ref.Tool)
	require.Contains(t, ref.Error, `bigquery_agent needs a "request"`, "no child starts; the model is told why")
}

// The investigation's BigQuery scan budget spans its sub-agent runs: each
// child's queries see what is left, what they scanned counts, and once it
// is spent the next bigquery_agent call does not start a child. The
// children's model usage is the sub-agent phase of the investigation's.
func TestSubAgentsReportScansAndUsage(t *testing.T) {
	h := newHarness(t)
	h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
	h.onPlan(activities.PlanOutput{Usage: investigation.Usage{Calls: 1}, Tools: []toolcall.Tool{{Name: "bigquery_agent", Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}}, Plan: plan.Plan{Objective: "o", Steps: []plan.Step{
		{ID: "step_1", Description: "ask logs", Tools: []string{"bigquery_agent"}, Status: plan.Pending}}}}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if n := len(in.Transcript); n < 6 { // three calls, one per turn
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "bigquery_agent", Args: map[string]any{"request": fmt.Sprintf("logins, take %d", n/2+1)}}}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.onReflect(noChange)
	h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{Usage: investigation.Usage{Calls: 1, PromptTokens: 3, Model: "e"}}, nil)
	h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
		u := investigation.Usage{Calls: 1, PromptTokens: 10, OutputTokens: 2, Model: "m"}
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Key: in.Key, Usage: u, Calls: []toolcall.Call{{Name: "bigquery_query", Args: map[string]any{"sql": "SELECT 1"}}}}, nil
		}
		return activities.TurnOutput{Key: in.Key, Usage: u, Text: "rows"}, nil
	})
	h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
		return activities.ToolOutput{Key: in.Key, OK: true, ScannedBytes: 600}, nil
	})
	h.env.OnActivity(bq.Introspect, mock.Anything, mock.Anything).Return(bigquery.Introspection{Usage: investigation.Usage{Calls: 1, PromptTokens: 5, ThoughtTokens: 1, Model: "m"}}, nil)
	h.env.OnActivity(bq.UpdateMemories, mock.Anything, mock.Anything).Return(bigquery.MemoryChanges{Usage: investigation.Usage{Calls: 1, PromptTokens: 4, Model: "e"}}, nil)
	h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
		return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
	})
	res, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxScanBytes: 1000}})
	require.NoError(t, err)
	require.EqualValues(t, 1200, res.ScannedBytes)
	require.Equal(t, investigation.Usage{Calls: 10, PromptTokens: 64, OutputTokens: 8, ThoughtTokens: 2, Model: investigation.MixedModels,
		ByModel: investigation.ModelSplit{{Model: "e", Calls: 4, PromptTokens: 14}, {Model: "m", Calls: 6, PromptTokens: 50, OutputTokens: 8, ThoughtTokens: 2}}}, res.ByPhase.SubAgent,
		"two children of two turns, an introspection and two embeddings (recall, learning) each, the embedding model's part kept apart through the child's result")
	require.Equal(t, res.Usage, res.ByPhase.Total())
	require.Equal(t, len(h.turns), res.ByPhase.Steps.Calls)
	require.Equal(t, 1, res.ByPhase.Plan.Calls)
	require.Equal(t, 1, res.ByPhase.Reflection.Calls)
	require.Equal(t, 1, res.ByPhase.Conclusion.Calls)

	require.Len(t, h.tools, 2, "two children ran one query each")
	require.EqualValues(t, 1000, h.tools[0].ScanBytesLeft)
	require.EqualValues(t, 400, h.tools[1].ScanBytesLeft, "the second child sees what the first left")
	last := h.turns[len(h.turns)-1].Transcript
	refused := last[len(last)-1]
	require.Equal(t, "bigquery_agent", refused.Tool)
	require.Contains(t, refused.Error, "the investigation's BigQuery scan budget of 1000 bytes (--max-scan-bytes) is spent")
	var scanned []string
	for _, e := range h.events(t) {
		if e.Kind == investigation.EventToolResult && strings.Contains(e.Text, "scanned") {
			scanned = append(scanned, e.Text)
		}
	}
	require.Len(t, scanned, 2)
	require.Contains(t, scanned[0], "scanned 600 bytes")
}

// A sub-agent that scanned and then returned no result (its model turn
// failed for good, or its answer could not be delivered) reports no
// bytes; it is charged its whole loan, so the budget is spent and the next
// bigquery_agent call is refused instead of lent the budget again. A
// query of the sub-agent that failed after its retries is charged its
// loan likewise, and the sub-agent's later queries see it.
func TestFailedSubAgentsAreChargedTheirLoan(t *testing.T) {
	for _, c := range []struct {
		name    string
		turn    func(in bigquery.SubAgentTurnInput) (activities.TurnOutput, error)
		query   func(n int) error // the sub-agent's nth query (from 1) fails with it
		deliver error
		lent    []int64 // ScanBytesLeft its queries saw
	}{
		{name: "model turn failed for good", lent: []int64{1000}, turn: func(in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
			if len(in.Transcript) == 0 {
				return activities.TurnOutput{Key: in.Key, Calls: []toolcall.Call{{Name: toolcall.BigQueryQuery, Args: map[string]any{"sql": "SELECT 1"}}}}, nil
			}
			return activities.TurnOutput{}, temporal.NewNonRetryableApplicationError("400 bad request", "GeminiBadRequest", nil)
		}},
		{name: "answer not delivered", lent: []int64{1000}, deliver: temporal.NewNonRetryableApplicationError("the store refused", "StoreRefused", nil)},
		{name: "a query failed after retries", lent: []int64{1000, -1}, query: func(n int) error {
			if n == 1 {
				return temporal.NewNonRetryableApplicationError("the query activity failed", "Lost", nil)
			}
			return nil
		}, turn: func(in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
			if n := len(in.Transcript); n < 4 {
				return activities.TurnOutput{Key: in.Key, Calls: []toolcall.Call{{Name: toolcall.BigQueryQuery, Args: map[string]any{"sql": fmt.Sprintf("SELECT %d", n)}}}}, nil
			}
			return activities.TurnOutput{Key: in.Key, Text: "rows"}, nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
			h.onPlan(activities.PlanOutput{Usage: investigation.Usage{Calls: 1}, Tools: []toolcall.Tool{{Name: "bigquery_agent", Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}}, Plan: plan.Plan{Objective: "o", Steps: []plan.Step{
				{ID: "step_1", Description: "ask logs", Tools: []string{"bigquery_agent"}, Status: plan.Pending}}}}, nil)
			h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
				if n := len(in.Transcript); n < 8 { // four calls, one per turn
					return activities.TurnOutput{Calls: []toolcall.Call{{Name: "bigquery_agent", Args: map[string]any{"request": fmt.Sprintf("logins, take %d", n/2+1)}}}}, nil
				}
				return activities.TurnOutput{Text: "done"}, nil
			})
			h.onReflect(noChange)
			turn := c.turn
			if turn == nil {
				turn = func(in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
					if len(in.Transcript) == 0 {
						return activities.TurnOutput{Key: in.Key, Calls: []toolcall.Call{{Name: toolcall.BigQueryQuery, Args: map[string]any{"sql": "SELECT 1"}}}}, nil
					}
					return activities.TurnOutput{Key: in.Key, Text: "rows"}, nil
				}
			}
			h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{}, nil)
			h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
				return turn(in)
			})
			queries := 0
			h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
				queries++
				if c.query != nil {
					if err := c.query(queries); err != nil {
						return activities.ToolOutput{}, err
					}
				}
				if in.ScanBytesLeft < 0 { // as bigquery_query refuses it
					return activities.ToolOutput{Key: in.Key, Error: "query refused: the scan budget is spent"}, nil
				}
				return activities.ToolOutput{Key: in.Key, OK: true, ScannedBytes: 900}, nil
			})
			h.env.OnActivity(bq.Introspect, mock.Anything, mock.Anything).Return(bigquery.Introspection{}, nil).Maybe()
			h.env.OnActivity(bq.UpdateMemories, mock.Anything, mock.Anything).Return(bigquery.MemoryChanges{}, nil).Maybe()
			h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
				if c.deliver != nil {
					return activities.ToolOutput{}, c.deliver
				}
				return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
			}).Maybe()
			res, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxScanBytes: 1000}})
			require.NoError(t, err)
			var lent []int64
			for _, tl := range h.tools {
				lent = append(lent, tl.ScanBytesLeft)
			}
			require.Equal(t, c.lent, lent, "one sub-agent ran queries; the later calls were refused")
			require.EqualValues(t, 1000, res.ScannedBytes, "the failed work is charged its loan of 1000 bytes")
			last := h.turns[len(h.turns)-1].Transcript
			require.Contains(t, last[len(last)-1].Error, "the investigation's BigQuery scan budget of 1000 bytes (--max-scan-bytes) is spent")
		})
	}
}

// TestSubAgentsRunningTogetherShareTheScanBudget: sub-agents that run at
// the same time (two calls of one turn, or two parallel steps), and the
// queries of one sub-agent turn, are lent shares of what is left, so
// together they cannot scan past --max-scan-bytes; a running step that
// cannot call bigquery_agent takes no share, and a lone sub-agent gets all
// that is left.
func TestSubAgentsRunningTogetherShareTheScanBudget(t *testing.T) {
	bqTool := toolcall.Tool{Name: toolcall.BigQueryAgent, Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}
	step := func(id string, tools ...string) plan.Step {
		return plan.Step{ID: id, Description: "work " + id, Tools: tools, DependsOn: []string{}, Status: plan.Pending}
	}
	ask := toolcall.Call{Name: toolcall.BigQueryAgent, Args: map[string]any{"request": "logins"}}
	ask2 := toolcall.Call{Name: toolcall.BigQueryAgent, Args: map[string]any{"request": "sudo"}} // not identical: both run
	for _, c := range []struct {
		name    string
		steps   []plan.Step
		calls   []toolcall.Call // of each step's first turn
		queries int             // in the sub-agent's first turn
		lent    []int64         // ScanBytesLeft the sub-agents' queries saw, sorted
	}{
		{"two calls in one turn", []plan.Step{step("step_1", toolcall.BigQueryAgent)}, []toolcall.Call{ask, ask2}, 1, []int64{500, 500}},
		{"two parallel steps, one that cannot ask", []plan.Step{step("step_1", toolcall.BigQueryAgent), step("step_2", toolcall.BigQueryAgent), step("step_3", "get_alert")}, []toolcall.Call{ask}, 1, []int64{500, 500}},
		{"one sub-agent alone", []plan.Step{step("step_1", toolcall.BigQueryAgent), step("step_2", "get_alert")}, []toolcall.Call{ask}, 1, []int64{1000}},
		{"three queries in one sub-agent turn", []plan.Step{step("step_1", toolcall.BigQueryAgent)}, []toolcall.Call{ask}, 3, []int64{333, 333, 334}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
			h.onPlan(activities.PlanOutput{Tools: append(slices.Clone(toolNames), bqTool), Plan: plan.Plan{Objective: "o", Steps: c.steps}}, nil)
			h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
				if len(in.Transcript) == 0 && slices.Contains(in.Step.Tools, toolcall.BigQueryAgent) {
					if in.Step.ID == "step_2" {
						// Not step_1's call: an identical one may be served
						// from step_1's result when that finishes first.
						return activities.TurnOutput{Calls: []toolcall.Call{ask2}}, nil
					}
					return activities.TurnOutput{Calls: slices.Clone(c.calls)}, nil
				}
				return activities.TurnOutput{Text: "done"}, nil
			})
			h.onReflect(noChange)
			h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{}, nil)
			h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
				if len(in.Transcript) == 0 {
					var qs []toolcall.Call
					for i := range c.queries {
						qs = append(qs, toolcall.Call{Name: toolcall.BigQueryQuery, Args: map[string]any{"sql": fmt.Sprintf("SELECT %d", i)}})
					}
					return activities.TurnOutput{Key: in.Key, Calls: qs}, nil
				}
				return activities.TurnOutput{Key: in.Key, Text: "rows"}, nil
			})
			var lent []int64
			h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
				if in.Call.Name != toolcall.BigQueryQuery {
					return okTool(in)
				}
				lent = append(lent, in.ScanBytesLeft)
				// The query tool holds a query to what it was lent.
				return activities.ToolOutput{Key: in.Key, OK: true, ScannedBytes: min(700, in.ScanBytesLeft)}, nil
			})
			h.env.OnActivity(bq.Introspect, mock.Anything, mock.Anything).Return(bigquery.Introspection{}, nil)
			h.env.OnActivity(bq.UpdateMemories, mock.Anything, mock.Anything).Return(bigquery.MemoryChanges{}, nil)
			h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
				return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
			})
			res, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxScanBytes: 1000, MaxParallelSteps: 3}})
			require.NoError(t, err)
			slices.Sort(lent)
			require.Equal(t, c.lent, lent)
			require.LessOrEqual(t, res.ScannedBytes, int64(1000), "together they stay within the budget")
		})
	}
}

// A two-hour time budget: the sub-agent works until its deadline, answers
// then (its final turn takes 20 minutes of its own), and the parent gets
// that answer. The child's execution timeout is its deadline plus room for
// the answer, never a fixed 30 minutes that would kill it first.
func TestSubAgentLivesUntilItsDeadlineAndAnswers(t *testing.T) {
	h := newHarness(t)
	h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
	h.onPlan(activities.PlanOutput{Tools: []toolcall.Tool{{Name: "bigquery_agent", Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}}, Plan: plan.Plan{Objective: "o", Steps: []plan.Step{
		{ID: "step_1", Description: "ask logs", Tools: []string{"bigquery_agent"}, Status: plan.Pending}}}}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "bigquery_agent", Args: map[string]any{"request": "logins over the last year"}}}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.onReflect(noChange)
	h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{}, nil)
	h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).After(20 * time.Minute).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
		if in.Final {
			return activities.TurnOutput{Key: in.Key, Text: "answered at the deadline"}, nil
		}
		return activities.TurnOutput{Key: in.Key, Calls: []toolcall.Call{{Name: "bigquery_query", Args: map[string]any{"sql": fmt.Sprintf("SELECT %d", len(in.Transcript))}}}}, nil
	})
	h.onTool(okTool)
	var delivered []bigquery.DeliverInput
	h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
		delivered = append(delivered, in)
		return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
	})
	var lifetime time.Duration
	h.env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		lifetime = info.WorkflowExecutionTimeout
	})
	_, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{TimeBudget: investigation.Duration(2 * time.Hour)}})
	require.NoError(t, err)
	require.Len(t, delivered, 1, "the child lived to deliver its answer")
	require.Equal(t, "answered at the deadline", delivered[0].Answer)
	last := h.turns[len(h.turns)-1].Transcript
	require.Equal(t, activities.Ref{Key: "t1-step_1-i1-c1"}, last[len(last)-1], "the parent's next turn reads the child's answer, not an error")
	require.GreaterOrEqual(t, lifetime, 2*time.Hour+subAgentAnswerAllowance, "the child may live past its deadline by the time its answer takes")
}

// A sub-agent whose queries all failed (or that ran none) answers from
// its model alone, which the request it was sent (alert text) may have
// steered: its answer is no log evidence a verdict may cite, nor a result
// a later identical call is served from. One whose query succeeded is.
func TestSubAgentWithoutAQueryIsNoEvidence(t *testing.T) {
	for _, c := range []struct {
		name    string
		queryOK bool
		want    []investigation.StepRun
		runs    int
	}{
		{"query failed", false, []investigation.StepRun{{Turn: 1, Step: "step_1"}, {Turn: 1, Step: "step_2"}}, 2},
		{"query succeeded", true, []investigation.StepRun{
			{Turn: 1, Step: "step_1", Tools: []string{toolcall.BigQueryAgent}},
			{Turn: 1, Step: "step_2", Tools: []string{toolcall.BigQueryAgent}}}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
			h.onPlan(activities.PlanOutput{Tools: []toolcall.Tool{{Name: toolcall.BigQueryAgent, Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}}, Plan: plan.Plan{Objective: "o", Steps: []plan.Step{
				{ID: "step_1", Description: "ask logs", Tools: []string{toolcall.BigQueryAgent}, Status: plan.Pending},
				{ID: "step_2", Description: "ask again", Tools: []string{toolcall.BigQueryAgent}, Status: plan.Pending}}}}, nil)
			h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
				if len(in.Transcript) == 0 {
					return activities.TurnOutput{Calls: []toolcall.Call{{Name: toolcall.BigQueryAgent, Args: map[string]any{"request": "logins from 198.51.100.23"}}}}, nil
				}
				return activities.TurnOutput{Text: "the logs show nothing"}, nil
			})
			h.onReflect(noChange)
			h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{}, nil)
			h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
				if len(in.Transcript) == 0 {
					return activities.TurnOutput{Key: in.Key, Calls: []toolcall.Call{{Name: toolcall.BigQueryQuery, Args: map[string]any{"sql": "SELECT 1"}}}}, nil
				}
				return activities.TurnOutput{Key: in.Key, Text: "no logins from that address: benign"}, nil
			})
			h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
				return activities.ToolOutput{Key: in.Key, OK: c.queryOK, Error: map[bool]string{false: "the query was refused"}[c.queryOK]}, nil
			})
			h.env.OnActivity(bq.Introspect, mock.Anything, mock.Anything).Return(bigquery.Introspection{}, nil).Maybe()
			h.env.OnActivity(bq.UpdateMemories, mock.Anything, mock.Anything).Return(bigquery.MemoryChanges{}, nil).Maybe()
			var delivered []bigquery.DeliverInput
			h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
				delivered = append(delivered, in)
				return activities.ToolOutput{Key: in.ResultKey, OK: true, Link: &in.Link}, nil
			})
			_, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxScanBytes: 1000}})
			require.NoError(t, err)
			require.Len(t, h.conclude, 1)
			require.Equal(t, c.want, h.conclude[0].Verdict.Ran)
			require.Len(t, delivered, c.runs, "an unbacked answer serves no identical later call")
			for _, d := range delivered {
				require.Equal(t, !c.queryOK, d.NoQuery, "the parent's model is told")
			}
		})
	}
}
