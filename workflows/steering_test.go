package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// updateResult records what happened to one update.
type updateResult struct {
	rejected error
	ack      investigation.Ack
	err      error
	done     bool
}

// update sends an update after delay (workflow time) and records the outcome.
func (h *harness) update(delay time.Duration, name string, args ...any) *updateResult {
	res := &updateResult{}
	h.updates++
	id := fmt.Sprintf("%s-%d", name, h.updates)
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { res.rejected = err; res.done = true },
			OnComplete: func(v any, err error) {
				res.done, res.err = true, err
				if ack, ok := v.(investigation.Ack); ok {
					res.ack = ack
				}
			},
		}, args...)
	}, delay)
	return res
}

func (h *harness) status(t *testing.T) investigation.Status {
	t.Helper()
	v, err := h.env.QueryWorkflow(investigation.StatusQuery)
	require.NoError(t, err)
	var st investigation.Status
	require.NoError(t, v.Get(&st))
	return st
}

func conclusionOnly(in activities.TurnInput) (activities.TurnOutput, error) {
	return activities.TurnOutput{Text: "found in " + in.Step.ID}, nil
}

func TestHintDuringActivityReachesNextModelCall(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onSlowTurn(time.Minute, func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onReflect(noChange)
	hint := h.update(30*time.Second, investigation.UpdateHint, "Check bastion-01 too.")
	empty := h.update(40*time.Second, investigation.UpdateHint, "  ")
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.True(t, hint.done)
	require.NoError(t, hint.rejected)
	require.Contains(t, hint.ack.Message, "hint 1 recorded")
	require.ErrorContains(t, empty.rejected, "the hint is empty")
	require.Empty(t, h.turns[0].Hints, "the hint arrived while the first turn ran")
	require.Equal(t, []string{"Check bastion-01 too."}, h.turns[1].Hints, "the next model call sees it")
	require.Equal(t, []string{"Check bastion-01 too."}, h.reflects[0].Hints)
	require.Equal(t, []string{"Check bastion-01 too."}, h.conclude[0].Hints)
}

func TestApproveAndRevisePlan(t *testing.T) {
	h := newHarness(t)
	var plans []activities.PlanInput
	h.env.OnActivity(a.GeneratePlan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (activities.PlanOutput, error) {
		plans = append(plans, in)
		out := twoStepPlan()
		if in.Feedback != "" {
			out.Plan.Objective = "revised: " + in.Feedback
		}
		return out, nil
	})
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	early := h.update(0, investigation.UpdateApprove) // before the plan exists
	revise := h.update(time.Minute, investigation.UpdateRevise, "also check the bastion")
	var during investigation.Status
	h.env.RegisterDelayedCallback(func() { during = h.status(t) }, 90*time.Second)
	approve := h.update(2*time.Minute, investigation.UpdateApprove)
	late := h.update(3*time.Minute, investigation.UpdateApprove)
	res, err := h.run(t, investigation.Input{AlertID: "a1", ApprovePlan: true})
	require.NoError(t, err)
	require.ErrorContains(t, early.rejected, "not waiting for approval")
	require.NoError(t, revise.rejected)
	require.NoError(t, approve.rejected)
	require.ErrorContains(t, late.rejected, "not waiting for approval")
	require.Len(t, plans, 2, "a revision re-plans")
	require.Equal(t, "also check the bastion", plans[1].Feedback)
	require.Equal(t, "Decide if the brute force succeeded", plans[1].Previous.Objective)
	require.Equal(t, investigation.PhaseAwaitingApproval, during.Phase)
	require.Equal(t, "revised: also check the bastion", res.Objective)
	require.Len(t, h.turns, 2, "the steps ran only after approval")
	var approvals []string
	for _, e := range h.events(t) {
		if e.Kind == investigation.EventApproval {
			approvals = append(approvals, e.Text)
		}
	}
	require.Equal(t, []string{"awaiting", "revise: also check the bastion", "awaiting", "approved"}, approvals)
}

func TestAskUserWaitsForAnswer(t *testing.T) {
	for _, answered := range []bool{true, false} {
		t.Run(fmt.Sprintf("answered=%v", answered), func(t *testing.T) {
			h := newHarness(t)
			h.onPlan(twoStepPlan(), nil)
			h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
				if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
					return activities.TurnOutput{Calls: []toolcall.Call{
						{ID: "c1", Name: "ask_user", Args: map[string]any{"question": "Is deploy allowed to log in from outside?"}},
						{ID: "c2", Name: "get_alert", Args: map[string]any{"id": "a1"}},
					}}, nil
				}
				return activities.TurnOutput{Text: "ok"}, nil
			})
			h.onTool(okTool)
			h.onReflect(noChange)
			var st investigation.Status
			h.env.RegisterDelayedCallback(func() { st = h.status(t) }, time.Minute)
			wrong := h.update(90*time.Second, investigation.UpdateAnswer, investigation.Answer{QuestionID: "q-9", Text: "x"})
			var ans *updateResult
			if answered {
				ans = h.update(2*time.Minute, investigation.UpdateAnswer, investigation.Answer{Text: "No, never."})
			}
			_, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{AnswerTimeout: investigation.Duration(10 * time.Minute)}})
			require.NoError(t, err)
			require.Equal(t, investigation.PhaseWaitingForAnswer, st.Phase)
			require.Equal(t, []investigation.Question{{ID: "q-1", Step: "step_1", Question: "Is deploy allowed to log in from outside?"}}, st.Questions)
			require.ErrorContains(t, wrong.rejected, `no pending question "q-9"`)
			require.Len(t, h.tools, 1, "ask_user is not an activity")
			var order []string
			for _, e := range h.events(t) {
				if e.Kind == investigation.EventToolCall || e.Kind == investigation.EventQuestion {
					order = append(order, string(e.Kind)+": "+e.Text)
				}
			}
			require.Equal(t, []string{
				`tool_call: ask_user question="Is deploy allowed to log in from outside?"`,
				"question: Is deploy allowed to log in from outside?",
				"tool_call: get_alert a1",
			}, order, "the call is shown before the question it asks")
			tr := h.turns[1].Transcript
			require.Equal(t, "ask_user", tr[1].Tool)
			require.Equal(t, "c1", tr[1].CallID)
			if answered {
				require.NoError(t, ans.rejected)
				require.JSONEq(t, `{"answer":"No, never."}`, tr[1].Inline)
			} else {
				require.Contains(t, tr[1].Inline, "did not answer within 10m")
			}
		})
	}
}

func TestStopConcludesEarlyAndCloses(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onSlowTurn(time.Minute, func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "partial"}, nil
	})
	h.onReflect(noChange)
	// All arrive while the first model turn runs: the question is queued for
	// after the turn, then the stop closes the investigation without it.
	ask := h.update(20*time.Second, investigation.UpdateAsk, "Who else logged in?")
	stop := h.update(30*time.Second, investigation.UpdateStop, "enough")
	again := h.update(40*time.Second, investigation.UpdateStop, "")
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.NoError(t, ask.rejected)
	require.NoError(t, stop.rejected)
	require.Contains(t, stop.ack.Message, "the 1 queued follow-up question(s) will not be answered")
	require.ErrorContains(t, again.rejected, "already stopping")
	require.Len(t, h.turns, 1)
	require.Equal(t, plan.Skipped, res.Plan.Steps[1].Status)
	require.Equal(t, "stopped by the analyst: enough", h.conclude[0].EndedEarly)
	evs := h.events(t)
	require.NotContains(t, kinds(evs), "idle", "a stopped investigation closes after its conclusion")
	last := evs[len(evs)-1]
	require.Equal(t, investigation.EventNote, last.Kind)
	require.Equal(t, []string{"Who else logged in?"}, last.Notes, "the unanswered question is named")
}

func TestToolCallBudget(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Final {
			return activities.TurnOutput{Text: "summary"}, nil
		}
		return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": fmt.Sprint(len(in.Transcript))}}}}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxToolCalls: 2}})
	require.NoError(t, err)
	require.Len(t, h.tools, 2)
	require.Equal(t, "summary", res.Plan.Steps[0].Result, "the step answers from what it has")
	require.Equal(t, plan.Skipped, res.Plan.Steps[1].Status)
	require.Equal(t, "this exchange used its 2 tool calls", h.conclude[0].EndedEarly)
}

func TestFollowUpsAndContinueAsNew(t *testing.T) {
	h := newHarness(t)
	var plans, sent []activities.PlanInput
	h.env.OnActivity(a.GeneratePlan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (activities.PlanOutput, error) {
		sent = append(sent, in)
		expand(&in, in.Session, in.Context)
		plans = append(plans, in)
		out := twoStepPlan()
		if in.ActivePlan != nil {
			out.Continues = true
			out.Plan.Steps = []plan.Step{{ID: "step_1", Description: "Check the bastion logins", Tools: []string{"get_alert"}, Status: plan.Pending}}
		}
		return out, nil
	})
	modes := []string{investigation.ModeDirect, investigation.ModePlan}
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ModeInput) (activities.Mode, error) {
		m := modes[0]
		modes = modes[1:]
		return activities.Mode{Mode: m, Reason: "because"}, nil
	})
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	// Just before the idle timeout: not lost.
	first := h.update(30*time.Minute-time.Second, investigation.UpdateAsk, "When did the login happen?")
	second := h.update(30*time.Minute, investigation.UpdateAsk, "Now check the bastion too.")
	h.env.RegisterDelayedCallback(func() { h.env.SetCurrentHistoryLength(100) }, 30*time.Minute+500*time.Millisecond)
	third := h.update(30*time.Minute+time.Second, investigation.UpdateAsk, "Anything else?")
	hint := h.update(30*time.Minute+700*time.Millisecond, investigation.UpdateHint, "Mind the VPN range.")
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1", Limits: investigation.Limits{MaxHistoryEvents: 60}})
	require.True(t, h.env.IsWorkflowCompleted())
	err := h.env.GetWorkflowError()
	require.Error(t, err)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "a long session continues as new: %v", err)
	for _, u := range []*updateResult{first, second, third, hint} {
		require.NoError(t, u.rejected)
	}
	next := carriedState(t, can)
	require.Equal(t, []string{"Anything else?"}, next.Steering.FollowUps, "the pending question is carried, not lost")
	require.Equal(t, []string{"Mind the VPN range."}, next.Steering.Hints)
	require.Len(t, next.History, 6, "three exchanges of conversation")
	require.Len(t, next.ActivePlan.Steps, 3, "the active plan is carried")
	require.Equal(t, 4, next.Turn)
	require.Equal(t, len(h.events(t)), next.LastSeq, "event numbers continue in the next run")
	require.Len(t, plans, 2)
	require.Nil(t, plans[0].ActivePlan, "the first turn has no plan in progress")
	require.NotNil(t, plans[1].ActivePlan, "the planner is told a plan is in progress")
	require.Len(t, plans[1].History, 4, "the conversation is carried: Q1 and the direct answer")
	require.Empty(t, sent[1].Context, "a context this small goes inline")

	evs := h.events(t)
	var turns []string
	for _, e := range evs {
		if e.Kind == investigation.EventTurn {
			turns = append(turns, e.Text+" ("+e.Mode+")")
		}
		if e.Kind == investigation.EventPlan && strings.Contains(strings.Join(e.Notes, ";"), "continues the active plan") {
			require.Len(t, e.Plan.Steps, 3, "the follow-up extended the active plan")
			require.Equal(t, "step_3", e.Plan.Steps[2].ID)
		}
	}
	require.Equal(t, []string{"When did the login happen? (direct)", "Now check the bastion too. (plan)"}, turns)
	require.True(t, h.turns[2].Direct)
	require.Equal(t, "When did the login happen?", h.turns[2].Question, "a direct answer's turn carries the question")
	require.Empty(t, h.turns[2].Step.Description, "and not the step the prompt does not read")
	require.Len(t, h.turns[2].History, 2, "a direct answer sees the conversation")
}

func TestHundredHintsInABurst(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onSlowTurn(time.Minute, func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onReflect(noChange)
	var results []*updateResult
	for i := range 100 {
		results = append(results, h.update(30*time.Second, investigation.UpdateHint, fmt.Sprintf("hint %d", i)))
	}
	var st investigation.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 45*time.Second)
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	seqs := map[int]bool{}
	for _, r := range results {
		require.True(t, r.done)
		require.NoError(t, r.rejected)
		seqs[r.ack.Seq] = true
	}
	require.Len(t, seqs, 100, "each hint got its own event")
	require.Contains(t, results[99].ack.Message, "hint 100 recorded")
	require.Len(t, st.Hints, maxHints, "the latest hints are kept, within the bound")
	require.Equal(t, "hint 99", st.Hints[maxHints-1])
	require.Equal(t, st.Hints, h.conclude[0].Hints)
}

func TestContinuedRunResumesCarriedInput(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onTurn(conclusionOnly)
	active := twoStepPlan().Plan
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Question: "Q1"},
		&State{Turn: 2, History: []investigation.Message{{Role: "user", Text: "Q1"}, {Role: "assistant", Text: "A1"}},
			ActivePlan: &active, Steering: Steering{FollowUps: []string{"Q2"}, Hints: []string{"h"}}, LastSeq: 41})
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	var res investigation.Result
	require.NoError(t, h.env.GetWorkflowResult(&res))
	require.Len(t, res.History, 4)
	require.Equal(t, "Q2", res.History[2].Text)
	require.Equal(t, "t2-answer-i1", h.turns[0].Key, "transcript keys continue with the carried turn")
	require.Equal(t, []string{"h"}, h.turns[0].Hints)
	evs := h.events(t)
	require.Equal(t, 42, evs[0].Seq, "event numbers continue after the carried ones")
	v, err := h.env.QueryWorkflow(investigation.ProgressQuery, 43)
	require.NoError(t, err)
	var after []investigation.Event
	require.NoError(t, v.Get(&after))
	require.Equal(t, 44, after[0].Seq)
}

// The attack: a follow-up (an analyst's, or one the intake queued for an
// attacker-sent related alert) whose planner answers no executable step
// twice. The exchange ends with a note; the first exchange's conclusion
// and verdict stand, and the run goes on to answer the next question.
func TestFollowUpWhosePlanFailsEndsWithANote(t *testing.T) {
	h := newHarness(t)
	plans := 0
	h.env.OnActivity(a.GeneratePlan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (activities.PlanOutput, error) {
		plans++
		if plans == 2 {
			return activities.PlanOutput{}, temporal.NewNonRetryableApplicationError(
				"the model's plan answer was unusable twice: the plan has no executable steps", activities.ErrMalformedOutput, nil)
		}
		return oneStepPlan(), nil
	})
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModePlan}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.onReflect(noChange)
	h.update(time.Minute, investigation.UpdateAsk, "what about the related alert?")
	h.update(2*time.Minute, investigation.UpdateAsk, "and host-8?")
	res, err := h.run(t, investigation.Input{AlertID: "a1", Language: "ja"})
	require.NoError(t, err, "one follow-up's unusable plan ended the whole investigation")
	require.Equal(t, 3, plans, "the next follow-up is still answered")
	require.NotNil(t, res.Verdict)
	require.Equal(t, investigation.VerdictFalsePositive, res.Verdict.Verdict)
	require.Len(t, res.History, 6)
	require.Equal(t, "what about the related alert?", res.History[2].Text)
	require.Equal(t, activities.UnplannedNote("ja"), res.History[3].Text)
	var noted bool
	for _, e := range h.events(t) {
		noted = noted || e.Kind == investigation.EventNote && strings.Contains(e.Text, "the plan has no executable steps")
	}
	require.True(t, noted, "the progress says why the follow-up was not investigated")
}
