package workflows

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// Tests of the "guarded-runs" behaviour (version 1 of that change).

func oneStepPlan() activities.PlanOutput {
	out := twoStepPlan()
	out.Plan.Steps = out.Plan.Steps[:1]
	return out
}

func TestSecondPlanDecisionIsRefused(t *testing.T) {
	// The state a second approve or revise of the same workflow task sees:
	// the first one's handler has run, the main loop has not.
	r := &run{State: &State{Phase: investigation.PhaseAwaitingApproval}}
	require.NoError(t, r.decisionOpen())
	r.Steering.Approval = "approved"
	require.EqualError(t, r.decisionOpen(), "the plan already has a decision (approved) that is being applied")
	r.Phase, r.Steering.Approval = investigation.PhaseExecuting, ""
	require.EqualError(t, r.decisionOpen(), "the plan is not waiting for approval (the investigation is executing)")
}

// continuedOverThreshold runs a continued investigation (turn 2, an active
// plan, follow-ups Q2 and Q3 queued) whose history is over its
// continue-as-new threshold from the start, and returns the state it
// carries to the next run.
func continuedOverThreshold(t *testing.T, h *harness) *State {
	t.Helper()
	active := twoStepPlan().Plan
	h.env.SetCurrentHistoryLength(100)
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1",
		Limits: investigation.Limits{MaxHistoryEvents: 50}},
		&State{Turn: 2, ActivePlan: &active, Steering: Steering{FollowUps: []string{"Q2", "Q3"}}, LastSeq: 10})
	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "%v", h.env.GetWorkflowError())
	return carriedState(t, can)
}

func TestContinuedRunAnswersBeforeContinuingAgain(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onTurn(conclusionOnly)
	// The history is over the threshold from the start: without the guard
	// every run would continue as new at once, forever.
	next := continuedOverThreshold(t, h)
	require.Len(t, h.turns, 1, "Q2 was answered first")
	require.Equal(t, []string{"Q3"}, next.Steering.FollowUps)
	require.Equal(t, 3, next.Turn)
}

func TestBudgetHoldsWithinATurnAndCutsTheLastStep(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Final {
			return activities.TurnOutput{Text: "what I have"}, nil
		}
		return activities.TurnOutput{Calls: []toolcall.Call{
			{Name: "get_alert", Args: map[string]any{"id": "1"}},
			{Name: "get_alert", Args: map[string]any{"id": "2"}},
			{Name: "get_alert", Args: map[string]any{"id": "3"}},
		}}, nil
	})
	h.onTool(okTool)
	h.env.OnActivity(a.Reflect, mock.Anything, mock.Anything).Return(activities.Reflection{}, nil).Maybe()
	res, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxToolCalls: 2}})
	require.NoError(t, err)
	require.Len(t, h.tools, 2, "the third call of the turn is over the budget")
	tr := h.turns[1].Transcript
	require.Equal(t, "the call did not run: this exchange's tool-call budget is spent; answer from the results you have", tr[3].Error)
	require.True(t, h.turns[1].Final, "the next turn must answer")
	require.Equal(t, 2, res.ToolCalls)
	require.Equal(t, "this exchange used its 2 tool calls", h.conclude[0].EndedEarly, "the conclusion says the exchange was cut short, also in the last step")
	h.env.AssertNotCalled(t, "Reflect", mock.Anything, mock.Anything)
}

func TestIdenticalCallsOfOneTurnRunOnce(t *testing.T) {
	h := newHarness(t)
	h.onPlan(withStepTools(oneStepPlan(), 0, "get_alert", "search_alerts"), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{Name: "get_alert", Args: map[string]any{"id": "a1"}},
				{Name: "search_alerts", Args: map[string]any{"field": "type", "value": "x"}},
				{Name: "get_alert", Args: map[string]any{"id": "a1", "ref_id": "again"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, h.tools, 2, "the repeated call does not reach the tool")
	tr := h.turns[1].Transcript
	require.Equal(t, activities.Ref{Key: "t1-step_1-i1-c1", CallID: "t1-step_1-i1-c3", Tool: "get_alert"}, tr[3],
		"the repeat gets the first call's result under its own call ID")
	require.Equal(t, 1, res.ReusedCalls)
	require.Equal(t, 2, res.ToolCalls)
}

func TestOverlappingQuestionsCountOnceAndKeepThePhase(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	h.onTool(okTool)
	h.onSlowTurn(3*time.Minute, func(in activities.TurnInput) (activities.TurnOutput, error) {
		switch {
		case len(in.Transcript) == 0:
			return activities.TurnOutput{Calls: []toolcall.Call{
				{Name: "ask_user", Args: map[string]any{"question": "Is deploy a CI account?"}},
				{Name: "ask_user", Args: map[string]any{"question": "Was a change scheduled?"}},
			}}, nil
		case !in.Final:
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
		}
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.env.OnActivity(a.Reflect, mock.Anything, mock.Anything).Return(activities.Reflection{}, nil).Maybe()
	// Turn 1 runs from 0 to 3m and asks two questions. q-1 is answered at
	// 12m, q-2 times out at 13m: the analyst kept the run waiting 10m, not
	// 9m + 10m. Turn 2 runs from 13m to 16m: the run has then worked 6m,
	// over its 4m budget, so the call turn 2 asks for is cut short at once
	// and turn 3 must answer; counted twice, the wait would leave the
	// budget looking unspent and the call would run.
	var st investigation.Status
	answer := h.update(12*time.Minute, investigation.UpdateAnswer, investigation.Answer{QuestionID: "q-1", Text: "yes"})
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 12*time.Minute+30*time.Second)
	_, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{AnswerTimeout: investigation.Duration(10 * time.Minute), TimeBudget: investigation.Duration(4 * time.Minute)}})
	require.NoError(t, err)
	require.NoError(t, answer.rejected)
	require.Equal(t, investigation.PhaseWaitingForAnswer, st.Phase, "q-2 still waits after q-1 was answered")
	require.Equal(t, []investigation.Question{{ID: "q-2", Step: "step_1", Question: "Was a change scheduled?"}}, st.Questions)
	require.Len(t, h.turns, 3)
	require.False(t, h.turns[1].Final)
	require.True(t, h.turns[2].Final, "the budget is spent once the wait counts once")
	require.Empty(t, h.tools, "the call asked after the budget ran out was cut short")
	require.Equal(t, "this exchange used its time budget of 4m", h.conclude[0].EndedEarly)
}

func TestRetriedInputFromAnEarlierRunIsNotRecordedTwice(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onTurn(conclusionOnly)
	active := twoStepPlan().Plan
	// The harness names the first hint update "hint-1": the previous run
	// recorded it, and the client retries it against this run.
	retried := h.update(time.Minute, investigation.UpdateHint, "Mind the VPN range.")
	fresh := h.update(2*time.Minute, investigation.UpdateHint, "Check bastion-01.")
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1"},
		&State{Turn: 2, ActivePlan: &active, Steering: Steering{Hints: []string{"Mind the VPN range."}, HintCount: 1, UpdateIDs: []string{"hint-1"}, Carried: 1}, LastSeq: 5})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	require.NoError(t, retried.rejected)
	require.Equal(t, earlierAck, retried.ack)
	require.Contains(t, fresh.ack.Message, "hint 2 recorded")
	var st investigation.Status
	v, err := h.env.QueryWorkflow(investigation.StatusQuery)
	require.NoError(t, err)
	require.NoError(t, v.Get(&st))
	require.Equal(t, []string{"Mind the VPN range.", "Check bastion-01."}, st.Hints)
}

func TestCarriedResultsServeRepeatedCalls(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
		}
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onTool(okTool)
	active := twoStepPlan().Plan
	call := toolcall.Call{Name: "get_alert", Args: map[string]any{"id": "a1"}}
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1"},
		&State{Turn: 2, ActivePlan: &active, Steering: Steering{FollowUps: []string{"Q2"}, NextQID: 3}, LastSeq: 5,
			Results: Reuse{Keys: map[string]string{toolcall.Key(call): "t1-step_1-i1-c1"}, Order: []string{toolcall.Key(call)}}, Reused: 1})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	var res investigation.Result
	require.NoError(t, h.env.GetWorkflowResult(&res))
	require.Empty(t, h.tools, "the call made before continue-as-new is not repeated")
	require.Equal(t, "t1-step_1-i1-c1", h.turns[1].Transcript[1].Key)
	require.Equal(t, 2, res.ReusedCalls)
}

func TestHistoryStaysUnderItsCap(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onTurn(conclusionOnly)
	var history []investigation.Message
	for i := range 10 {
		history = append(history,
			investigation.Message{Role: "user", Text: fmt.Sprintf("question %d", i)},
			investigation.Message{Role: "assistant", Text: strings.Repeat("x", 10<<10)})
	}
	active := twoStepPlan().Plan
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1"},
		&State{Turn: 11, History: history, ActivePlan: &active, Steering: Steering{FollowUps: []string{"latest question"}}, LastSeq: 5})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	var res investigation.Result
	require.NoError(t, h.env.GetWorkflowResult(&res))
	size := 0
	for _, m := range res.History {
		size += len(m.Text)
	}
	require.LessOrEqual(t, size, maxHistoryBytes)
	require.Equal(t, "latest question", res.History[len(res.History)-2].Text, "the newest exchange stays")
	require.Equal(t, "question 4", res.History[0].Text, "the four oldest exchanges went first")
	var notes []string
	for _, e := range h.events(t) {
		if e.Kind == investigation.EventNote {
			notes = append(notes, e.Text)
		}
	}
	require.Contains(t, notes, "the 4 oldest exchanges of the conversation were dropped to keep it under 64 KiB")
}

func TestProgressPages(t *testing.T) {
	evs := make([]investigation.Event, 450)
	require.Len(t, page(evs, 0), investigation.MaxProgressEvents)
	require.Len(t, page(evs, 400), 50)
	require.Empty(t, page(evs, 450))
	require.Len(t, page(evs, -3), investigation.MaxProgressEvents, "a negative index reads from the start")
}
