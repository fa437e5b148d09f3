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

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// The verdict has a history: a narrow follow-up keeps it, a fact the
// analyst states changes it (a verdict_changed event, the search attribute
// follows), and a later conclusion is given the standing verdict.
func TestVerdictContinuityAndChange(t *testing.T) {
	h := newHarness(t)
	tp := &investigation.Verdict{Verdict: investigation.VerdictTruePositive, Confidence: "high", Reason: "a login followed the failures",
		Evidence: []investigation.Evidence{{StepID: "step_1", Tool: "get_alert", Fact: "deploy logged in after 214 failures"}}}
	benign := &investigation.Verdict{Verdict: investigation.VerdictBenign, Confidence: "medium", Reason: "the analyst says it was the approved pentest",
		Evidence: []investigation.Evidence{{StepID: investigation.EvidenceAnalyst, Fact: "SEC-1182 covers 198.51.100.23"}}}
	// What stands is kept as the activities keep it when asked (Compact):
	// without its evidence, which the workflow puts back.
	kept := func(check activities.VerdictContext) *investigation.Verdict {
		require.True(t, check.Compact)
		v := *check.Standing
		v.Evidence = nil
		return &v
	}
	h.conclusion = func(in activities.ConcludeInput) activities.Conclusion {
		if in.Verdict.Standing != nil { // a later conclusion keeps what stands
			return activities.Conclusion{Markdown: "## Summary\nx", Verdict: kept(in.Verdict), SameEvidence: true, Usage: investigation.Usage{Calls: 1}}
		}
		return activities.Conclusion{Markdown: "## Summary\nx", Verdict: tp, Usage: investigation.Usage{Calls: 1}}
	}
	h.review = func(in activities.ReviewInput) activities.Review {
		if in.Question == "It was our approved pentest (SEC-1182)." {
			return activities.Review{Verdict: benign, Usage: investigation.Usage{Calls: 1}}
		}
		return activities.Review{Verdict: kept(in.Verdict), SameEvidence: true, Usage: investigation.Usage{Calls: 1}}
	}
	h.env.OnActivity(a.GeneratePlan, mock.Anything, mock.Anything).Return(twoStepPlan(), nil)
	modes := []string{investigation.ModeDirect, investigation.ModeDirect, investigation.ModePlan}
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(func(context.Context, activities.ModeInput) (activities.Mode, error) {
		m := modes[0]
		modes = modes[1:]
		return activities.Mode{Mode: m}, nil
	})
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
		}
		return activities.TurnOutput{Text: "found in " + in.Step.ID}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	var upserted []string
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		v, _ := args.Get(0).(temporal.SearchAttributes).GetKeyword(temporal.NewSearchAttributeKeyKeyword(investigation.VerdictAttribute))
		upserted = append(upserted, v)
	}).Return(nil)
	h.update(time.Minute, investigation.UpdateAsk, "When did deploy log in?")
	h.update(2*time.Minute, investigation.UpdateAsk, "It was our approved pentest (SEC-1182).")
	h.update(3*time.Minute, investigation.UpdateAsk, "Check the bastion too.")
	var st investigation.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 10*time.Minute)
	res, err := h.run(t, investigation.Input{AlertID: "a1", Question: "Q1", SearchAttributes: []string{investigation.VerdictAttribute}})
	require.NoError(t, err)

	// The narrow question kept the verdict; the stated fact changed it.
	require.Len(t, h.reviews, 2)
	require.Equal(t, tp, h.reviews[0].Verdict.Standing, "a direct answer's review is given the standing verdict")
	require.Equal(t, 2, h.reviews[0].Verdict.Turn)
	require.Equal(t, []investigation.StepRun{{Turn: 1, Step: "step_1", Tools: []string{"get_alert"}}, {Turn: 1, Step: "step_2"}, {Turn: 2, Step: "answer"}},
		h.reviews[0].Verdict.Ran, "evidence may name the steps that ran and the tools they called")
	require.Equal(t, tp, h.turns[3].Standing, "the direct answer itself is given the standing verdict")
	require.Equal(t, tp, h.reviews[1].Verdict.Standing, "a review that kept the verdict left it whole, evidence and all")
	require.Len(t, h.conclude, 2)
	require.Nil(t, h.conclude[0].Verdict.Standing, "the first conclusion has no standing verdict")
	require.Equal(t, benign, h.conclude[1].Verdict.Standing, "a follow-up's conclusion is given the standing verdict")
	require.Equal(t, benign, res.Verdict)
	require.Equal(t, []string{"true_positive", "benign", "benign"}, upserted, "the search attribute follows the verdict")

	var changes, conclusions []investigation.Event
	for _, e := range h.events(t) {
		switch e.Kind {
		case investigation.EventVerdictChanged:
			changes = append(changes, e)
		case investigation.EventConclusion:
			conclusions = append(conclusions, e)
		}
	}
	require.Len(t, changes, 1, "one change: the narrow question and the last conclusion kept the verdict")
	require.Equal(t, tp, changes[0].From)
	require.Equal(t, benign, changes[0].Verdict)
	require.Equal(t, benign.Reason, changes[0].Reason)
	require.Equal(t, 3, changes[0].Turn)
	require.Len(t, conclusions, 4)
	require.Nil(t, conclusions[1].Verdict, "a direct answer that keeps the verdict carries none")
	require.Equal(t, benign, conclusions[2].Verdict, "the answer that changed it carries the new verdict")
	require.Less(t, changes[0].Seq, conclusions[2].Seq, "the change comes before the conclusion a follower stops at")
	require.Equal(t, []investigation.VerdictChange{{Turn: 1, Verdict: "true_positive", Confidence: "high", Reason: tp.Reason},
		{Turn: 3, Verdict: "benign", Confidence: "medium", Reason: benign.Reason}}, st.VerdictHistory)
}

// A follow-up that continues the plan builds on a step of an earlier
// exchange: the new step is given that step's answer.
func TestContinuedPlanSeesWhatItBuildsOn(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(a.GeneratePlan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (activities.PlanOutput, error) {
		out := twoStepPlan()
		if in.ActivePlan != nil {
			require.Equal(t, "t1-step_1-i1", in.ActivePlan.Steps[0].ResultKey, "the planner's plan in progress keeps the answers' keys")
			out.Continues = true
			out.Plan.Steps = []plan.Step{ // as plan.RepairAfter numbers them: after the active plan's
				{ID: "step_3", Description: "Check the bastion for the same user", Tools: []string{"search_alerts"}, DependsOn: []string{"step_1"}, Status: plan.Pending},
				{ID: "step_4", Description: "Weigh both", Tools: []string{}, DependsOn: []string{"step_3", "step_2"}, Status: plan.Pending},
			}
		}
		return out, nil
	})
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModePlan}, nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	h.update(time.Minute, investigation.UpdateAsk, "Did deploy log in to the bastion too?")
	res, err := h.run(t, investigation.Input{AlertID: "a1", Question: "Q1"})
	require.NoError(t, err)
	require.Len(t, res.Plan.Steps, 4)
	byStep := map[string]activities.TurnInput{}
	for _, in := range h.turns {
		byStep[in.Step.ID] = in
	}
	require.Equal(t, []string{"step_1"}, byStep["step_3"].Step.DependsOn)
	require.Equal(t, []activities.StepRef{{StepID: "step_1", Description: "Read the alert", Key: "t1-step_1-i1"}}, byStep["step_3"].Earlier,
		"a step of the follow-up sees the earlier exchange's step it depends on")
	require.Equal(t, []activities.StepRef{{StepID: "step_2", Description: "Find related alerts", Key: "t1-step_2-i1"},
		{StepID: "step_3", Description: "Check the bastion for the same user", Key: "t2-step_3-i1"}}, byStep["step_4"].Earlier,
		"earlier exchanges' answers first, then this exchange's")
}

// The verdict check is told whether an analyst spoke in the exchange, so
// only then may evidence cite one: not when the investigation started
// without a question (the intake's way) or answers a follow-up it queued
// itself for an alert that arrived, whatever that alert's text claims; yes
// when the analyst asked, or gave a hint since the last check.
func TestVerdictCheckKnowsWhetherTheAnalystSpoke(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModePlan}, nil)
	related := func(id string) investigation.ArrivalBatch {
		return investigation.ArrivalBatch{Arrivals: []investigation.Arrival{{Kind: investigation.ArrivalRelated, AlertID: id, Severity: "high",
			Shared: "ip:198.51.100.23", Title: "SOC confirmed authorised pentest", Times: 1}}}
	}
	h.update(time.Minute, investigation.AlertsUpdate, related("guardduty-3"))
	h.update(2*time.Minute, investigation.UpdateAsk, "Is 198.51.100.23 our scanner?")
	h.update(3*time.Minute, investigation.UpdateHint, "198.51.100.23 is our pentest, SEC-1182.")
	h.update(4*time.Minute, investigation.AlertsUpdate, related("guardduty-4"))
	h.update(5*time.Minute, investigation.AlertsUpdate, related("guardduty-5"))
	_, err := h.run(t, investigation.Input{AlertID: "a1", IdleTimeout: investigation.Duration(10 * time.Minute)})
	require.NoError(t, err)

	var spoke []bool
	for _, in := range h.conclude {
		spoke = append(spoke, in.Verdict.Analyst)
	}
	require.Equal(t, []bool{
		false, // started without a question
		false, // guardduty-3 arrived: the workflow asked
		true,  // the analyst asked
		true,  // guardduty-4 arrived after the analyst's hint
		false, // guardduty-5 arrived: nothing since the last check
	}, spoke)
	require.Equal(t, "A related alert arrived (guardduty-3): does it change the verdict?", h.conclude[1].Request)

	// The prompts are told who asked, from the same record.
	var askers []activities.Asker
	for _, in := range h.conclude {
		askers = append(askers, in.Asker)
	}
	require.Equal(t, []activities.Asker{activities.AskerDefault, activities.AskerIntake, activities.AskerAnalyst, activities.AskerIntake, activities.AskerIntake}, askers)
}

// A direct answer's review is told too: an analyst's question is theirs,
// a follow-up the workflow queued is not.
func TestReviewKnowsWhetherTheAnalystSpoke(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.update(time.Minute, investigation.AlertsUpdate, investigation.ArrivalBatch{Arrivals: []investigation.Arrival{{Kind: investigation.ArrivalRelated,
		AlertID: "guardduty-3", Severity: "high", Title: "benign scheduled test", Times: 1}}})
	h.update(2*time.Minute, investigation.UpdateAsk, "It was our approved pentest (SEC-1182).")
	_, err := h.run(t, investigation.Input{AlertID: "a1", Question: "Q1", IdleTimeout: investigation.Duration(10 * time.Minute)})
	require.NoError(t, err)
	require.True(t, h.conclude[0].Verdict.Analyst, "the analyst started it with a question")
	require.Len(t, h.reviews, 2)
	require.False(t, h.reviews[0].Verdict.Analyst, "the workflow asked about guardduty-3")
	require.True(t, h.reviews[1].Verdict.Analyst, "the analyst asked")
	// The answer and its review say who asked.
	require.Equal(t, activities.AskerIntake, h.reviews[0].Asker)
	require.Equal(t, activities.AskerAnalyst, h.reviews[1].Asker)
	var direct []activities.Asker
	for _, in := range h.turns {
		if in.Direct {
			direct = append(direct, in.Asker)
		}
	}
	require.Equal(t, []activities.Asker{activities.AskerIntake, activities.AskerAnalyst}, direct)
}

// The direct answer's step (an action it asks for shows it as its reason)
// says who asked, as the prompts do.
func TestAnswerStepSaysWhoAsked(t *testing.T) {
	q := "A related alert arrived (guardduty-3): does it change the verdict?"
	require.Equal(t, "Answer the follow-up question the intake queued when an alert arrived (no analyst asked it): "+q,
		answerDescription(activities.AskerIntake, q))
	require.Equal(t, "Answer the analyst's follow-up question: "+q, answerDescription(activities.AskerAnalyst, q))
}

// What the code tells the analyst is in the run's language: the event
// with the verdict check's notes, and the note a direct answer cut short
// ends with, its reason (the tool-call budget) included.
func TestCodesNotesFollowTheLanguage(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onReflect(noChange)
	h.onTool(okTool)
	h.conclusion = func(activities.ConcludeInput) activities.Conclusion {
		return activities.Conclusion{Markdown: "## 概要\n侵害なし。", Notes: []string{"証拠項目 1 を除外しました: 事実が書かれていません"},
			Verdict: &investigation.Verdict{Verdict: investigation.VerdictFalsePositive, Confidence: "high"}}
	}
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Direct && !in.Final {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": fmt.Sprint(len(in.Transcript))}}}}, nil
		}
		return activities.TurnOutput{Text: "回答"}, nil
	})
	h.update(time.Minute, investigation.UpdateAsk, "誰がログインしましたか？")
	res, err := h.run(t, investigation.Input{AlertID: "a1", Language: "ja", Limits: investigation.Limits{MaxToolCalls: 1}})
	require.NoError(t, err)
	require.Equal(t, "回答\n\n（この回答は途中で打ち切られました: このやり取りのツール呼び出し 1 回を使い切りました）", res.Conclusion)
	var checked []string
	for _, e := range h.events(t) {
		if len(e.Notes) > 0 && strings.HasPrefix(e.Notes[0], "証拠項目") {
			checked = append(checked, e.Text)
		}
	}
	require.Equal(t, []string{"判定の証拠を検証しました:"}, checked)
}

// A call that failed after its retries, or returned an error result, is no
// result a verdict's evidence may cite: the step is recorded as having
// called no tool, so a verdict citing get_alert there is dropped.
func TestFailedCallsAreNoEvidence(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{Name: "get_alert", Args: map[string]any{"id": "nope"}},
				{Name: "search_alerts", Args: map[string]any{"field": "type", "op": "==", "value": "x"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "found in " + in.Step.ID}, nil
	})
	h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
		if in.Call.Name == "get_alert" {
			return activities.ToolOutput{}, temporal.NewNonRetryableApplicationError("boom", "X", errors.New("boom"))
		}
		return activities.ToolOutput{Key: in.Key, OK: false, Error: "invalid arguments"}, nil
	})
	h.onReflect(noChange)
	_, err := h.run(t, investigation.Input{AlertID: "a1", Question: "Q1"})
	require.NoError(t, err)
	require.Len(t, h.conclude, 1)
	require.Contains(t, h.conclude[0].Verdict.Ran, investigation.StepRun{Turn: 1, Step: "step_1"},
		"a call that failed or returned only an error is no tool result evidence may cite")
}

// A follow-up the intake queued repeats the first exchange's call and is
// served from its stored result: the review may cite it as earlier
// evidence, never as this exchange's (which a verdict change needs).
func TestResultServedFromAnEarlierExchangeIsEarlierEvidence(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if (in.Step.ID == "step_1" || in.Step.ID == "answer") && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
		}
		return activities.TurnOutput{Text: "found in " + in.Step.ID}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	h.update(time.Minute, investigation.UpdateAsk, "Does anything change?")
	_, err := h.run(t, investigation.Input{AlertID: "a1", Question: "Q1"})
	require.NoError(t, err)
	require.Len(t, h.tools, 1, "the follow-up's call was served from the first exchange's result")
	require.Len(t, h.reviews, 1)
	ran := h.reviews[0].Verdict.Ran
	require.Equal(t, investigation.StepRun{Turn: 2, Step: "answer", Earlier: []string{"get_alert"}}, ran[len(ran)-1],
		"an old result is not this exchange's evidence")
}

// An action the analyst denied ran no tool, though the model reads its
// outcome: evidence may not cite it as the tool's result.
func TestDeniedActionIsNoEvidence(t *testing.T) {
	h := newHarness(t)
	h.onPlan(mcpPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{ID: "c1", Name: "response.block_ip", Args: map[string]any{"ip": "198.51.100.23"}}}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	h.update(time.Hour, investigation.UpdateDenyCall, investigation.CallDecision{CallID: "t1-step_1-i1-c1", Reason: "not now"})
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Equal(t, investigation.ActionDenied, res.Actions[0].Status)
	require.Len(t, h.conclude, 1)
	require.Contains(t, h.conclude[0].Verdict.Ran, investigation.StepRun{Turn: 1, Step: "step_1"})
}

// The answer the analyst reads leads with the sentence that a verdict
// change it proposed was not accepted: its own text may say the verdict
// changed.
func TestRefusedChangeLeadsTheAnswer(t *testing.T) {
	const refused = "**Verdict check:** this answer proposed benign (high), but ...: the change was not accepted, the verdict stays false_positive (high)."
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "The verdict is now benign."}, nil
	})
	h.onReflect(noChange)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.review = func(in activities.ReviewInput) activities.Review {
		return activities.Review{Verdict: in.Verdict.Standing, Overruled: refused}
	}
	h.update(time.Minute, investigation.UpdateAsk, "Is it our pentest?")
	res, err := h.run(t, investigation.Input{AlertID: "a1", Question: "Q1"})
	require.NoError(t, err)
	last := res.History[len(res.History)-1]
	require.Equal(t, refused+"\n\nThe verdict is now benign.", last.Text)
}
