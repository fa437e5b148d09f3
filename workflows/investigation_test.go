package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// toolNames are the tools a worker offers; ask_user is always among them.
var toolNames = []toolcall.Tool{{Name: "ask_user", Kind: toolcall.Analyst}, {Name: "get_alert", Kind: toolcall.Activity}, {Name: "search_alerts", Kind: toolcall.Activity}}

func twoStepPlan() activities.PlanOutput {
	return activities.PlanOutput{Tools: toolNames, Plan: plan.Plan{Objective: "Decide if the brute force succeeded", Steps: []plan.Step{
		{ID: "step_1", Description: "Read the alert", Tools: []string{"get_alert"}, Expected: "details", Status: plan.Pending},
		{ID: "step_2", Description: "Find related alerts", Tools: []string{"search_alerts"}, Expected: "history", Status: plan.Pending},
	}}, Usage: investigation.Usage{Calls: 1, PromptTokens: 100, OutputTokens: 10}}
}

// withStepTools gives step i of p the tools its scripted turns call: a
// call of a tool the step was not offered does not run.
func withStepTools(p activities.PlanOutput, i int, tools ...string) activities.PlanOutput {
	p.Plan.Steps[i].Tools = tools
	return p
}

// harness runs the workflow with mocked activities and records their inputs.
type harness struct {
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment

	mu       sync.Mutex
	turns    []activities.TurnInput
	tools    []activities.ToolInput
	reflects []activities.ReflectInput
	conclude []activities.ConcludeInput
	reviews  []activities.ReviewInput
	// cuts are the answers made from what a loop had (CutAnswer).
	cuts []activities.CutAnswerInput
	// review answers ReviewVerdict (by default it keeps the standing
	// verdict), conclusion Conclude (by default false_positive, high).
	review     func(activities.ReviewInput) activities.Review
	conclusion func(activities.ConcludeInput) activities.Conclusion
	// stored sees the progress a context write carries.
	stored func(activities.ProgressInput)
	// rawConclude sees Conclude's input as history holds it.
	rawConclude func(activities.ConcludeInput)
	// concludedAt is the workflow time of each conclusion.
	concludedAt []time.Time
	updates     int
}

func newHarness(t *testing.T) *harness {
	h := &harness{}
	h.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))))
	h.env = h.NewTestWorkflowEnvironment()
	h.env.RegisterWorkflowWithOptions(Investigation, workflow.RegisterOptions{Name: investigation.WorkflowName})
	h.env.RegisterActivity(&activities.Activities{})
	h.env.RegisterActivity(&bigquery.Activities{})
	mockContextStore(h.env, func(in activities.ProgressInput) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.stored != nil {
			h.stored(in)
		}
	})
	h.env.OnActivity(a.Conclude, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ConcludeInput) (activities.Conclusion, error) {
		if h.rawConclude != nil {
			h.rawConclude(in)
		}
		expand(&in, in.Session, in.Context)
		h.mu.Lock()
		h.conclude = append(h.conclude, in)
		h.concludedAt = append(h.concludedAt, h.env.Now())
		conclusion := h.conclusion
		h.mu.Unlock()
		if conclusion != nil {
			return conclusion(in), nil
		}
		return activities.Conclusion{Markdown: "## Summary\nBrute force, no login.", Usage: investigation.Usage{Calls: 1},
			Verdict: &investigation.Verdict{Verdict: investigation.VerdictFalsePositive, Confidence: "high"}}, nil
	}).Maybe()
	h.env.OnActivity(a.CutAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.CutAnswerInput) (activities.TurnOutput, error) {
		h.mu.Lock()
		h.cuts = append(h.cuts, in)
		h.mu.Unlock()
		return activities.TurnOutput{Key: in.Key, Text: "as it was: " + in.Reason}, nil
	}).Maybe()
	h.env.OnActivity(a.ReviewVerdict, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ReviewInput) (activities.Review, error) {
		expand(&in, in.Session, in.Context)
		h.mu.Lock()
		h.reviews = append(h.reviews, in)
		review := h.review
		h.mu.Unlock()
		if review == nil {
			return activities.Review{Verdict: in.Verdict.Standing, Usage: investigation.Usage{Calls: 1}}, nil
		}
		return review(in), nil
	}).Maybe()
	return h
}

func (h *harness) onPlan(out activities.PlanOutput, err error) {
	h.env.OnActivity(a.GeneratePlan, mock.Anything, mock.Anything).Return(out, err)
}

// onTurn answers model turns with fn, recording inputs.
func (h *harness) onTurn(fn func(in activities.TurnInput) (activities.TurnOutput, error)) {
	h.onSlowTurn(0, fn)
}

// onSlowTurn is onTurn with model turns that take d of workflow time.
func (h *harness) onSlowTurn(d time.Duration, fn func(in activities.TurnInput) (activities.TurnOutput, error)) {
	h.env.OnActivity(a.ModelTurn, mock.Anything, mock.Anything).After(d).Return(func(_ context.Context, in activities.TurnInput) (activities.TurnOutput, error) {
		expand(&in, in.Session, in.Context)
		h.mu.Lock()
		h.turns = append(h.turns, in)
		h.mu.Unlock()
		out, err := fn(in)
		out.Key = in.Key
		out.Usage = investigation.Usage{Calls: 1}
		return out, err
	})
}

func (h *harness) onTool(fn func(in activities.ToolInput) (activities.ToolOutput, error)) {
	h.env.OnActivity(a.CallTool, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ToolInput) (activities.ToolOutput, error) {
		h.mu.Lock()
		h.tools = append(h.tools, in)
		h.mu.Unlock()
		return fn(in)
	}).Maybe()
}

func (h *harness) onReflect(fn func(in activities.ReflectInput) (activities.Reflection, error)) {
	h.env.OnActivity(a.Reflect, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ReflectInput) (activities.Reflection, error) {
		expand(&in, in.Session, in.Context)
		h.mu.Lock()
		h.reflects = append(h.reflects, in)
		h.mu.Unlock()
		return fn(in)
	})
}

func (h *harness) run(t *testing.T, in investigation.Input) (investigation.Result, error) {
	t.Helper()
	h.env.ExecuteWorkflow(investigation.WorkflowName, in)
	require.True(t, h.env.IsWorkflowCompleted())
	if err := h.env.GetWorkflowError(); err != nil {
		return investigation.Result{}, err
	}
	var res investigation.Result
	require.NoError(t, h.env.GetWorkflowResult(&res))
	return res, nil
}

// events reads every progress event, page by page.
func (h *harness) events(t *testing.T) []investigation.Event {
	t.Helper()
	var all []investigation.Event
	for {
		v, err := h.env.QueryWorkflow(investigation.ProgressQuery, len(all))
		require.NoError(t, err)
		var evs []investigation.Event
		require.NoError(t, v.Get(&evs))
		require.LessOrEqual(t, len(evs), investigation.MaxProgressEvents)
		all = append(all, evs...)
		if len(evs) < investigation.MaxProgressEvents {
			return all
		}
	}
}

func kinds(evs []investigation.Event) string {
	var k []string
	for i, e := range evs {
		if e.Seq != i+1 {
			return fmt.Sprintf("gap at %d: seq %d", i, e.Seq)
		}
		k = append(k, string(e.Kind))
	}
	return strings.Join(k, ",")
}

func okTool(in activities.ToolInput) (activities.ToolOutput, error) {
	return activities.ToolOutput{Key: in.Key, OK: true, Bytes: 42}, nil
}

func noChange(activities.ReflectInput) (activities.Reflection, error) {
	return activities.Reflection{Insights: []string{"nothing new"}, Usage: investigation.Usage{Calls: 1}}, nil
}

func TestHappyPath(t *testing.T) {
	h := newHarness(t)
	h.onPlan(withStepTools(twoStepPlan(), 0, "get_alert", "search_alerts"), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{Name: "get_alert", Args: map[string]any{"id": "a1"}},
				{ID: "model-id", Name: "search_alerts", Args: map[string]any{"field": "type", "op": "==", "value": "x"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "found things in " + in.Step.ID}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)

	res, err := h.run(t, investigation.Input{AlertID: "a1", Question: "Was it a compromise?", History: nil})
	require.NoError(t, err)

	require.Equal(t, "## Summary\nBrute force, no login.", res.Conclusion)
	require.Equal(t, []investigation.Message{
		{Role: "user", Text: "Was it a compromise?"},
		{Role: "assistant", Text: "Objective: Decide if the brute force succeeded\n\n## Summary\nBrute force, no login."},
	}, res.History)
	require.Equal(t, 2, res.ToolCalls)
	require.Equal(t, 1+3+2+1, res.Usage.Calls, "plan + 3 turns + 2 reflections + conclusion")
	for _, s := range res.Plan.Steps {
		require.Equal(t, plan.Done, s.Status)
		require.Equal(t, "found things in "+s.ID, s.Result)
	}

	// Both calls of one turn were started (in any order), with their own keys and IDs.
	require.Len(t, h.tools, 2)
	byKey := map[string]toolcall.Call{}
	for _, in := range h.tools {
		byKey[in.Key] = in.Call
	}
	require.Equal(t, "t1-step_1-i1-c1", byKey["t1-step_1-i1-c1"].ID, "a missing call ID is assigned")
	require.Equal(t, "get_alert", byKey["t1-step_1-i1-c1"].Name)
	require.Equal(t, "model-id", byKey["t1-step_1-i1-c2"].ID, "the model's call ID is kept")

	// The second turn sees the model turn and both results, by key, in call order.
	require.Len(t, h.turns, 3)
	require.Equal(t, []activities.Ref{{Key: "t1-step_1-i1"}, {Key: "t1-step_1-i1-c1"}, {Key: "t1-step_1-i1-c2"}}, h.turns[1].Transcript)
	// Step 2 starts with a fresh transcript and step 1's answer as an earlier result.
	require.Empty(t, h.turns[2].Transcript)
	require.Equal(t, []activities.StepRef{{StepID: "step_1", Description: "Read the alert", Key: "t1-step_1-i2"}}, h.turns[2].Earlier)

	// Reflection sees the step, completed and pending lists, not the conversation.
	require.Len(t, h.reflects, 2)
	require.Equal(t, "step_1", h.reflects[0].Step.ID)
	require.Empty(t, h.reflects[0].Completed, "the finished step is shown as the step, not among the completed ones")
	require.Len(t, h.reflects[0].Pending, 1)
	require.Equal(t, []investigation.Insight{{Turn: 1, Step: "step_1", Text: "nothing new"}, {Turn: 1, Step: "step_2", Text: "nothing new"}}, h.conclude[0].Insights)
	require.Empty(t, h.conclude[0].Earlier)
	require.Empty(t, h.conclude[0].EndedEarly)
	// Step results travel by transcript key, never inline.
	require.Equal(t, "t1-step_1-i2", h.reflects[0].Step.ResultKey)
	require.Empty(t, h.reflects[0].Step.Result)
	require.Equal(t, "t1-step_1-i2", h.reflects[1].Completed[0].ResultKey)
	require.Equal(t, 2, h.reflects[1].Steps)
	require.Equal(t, investigation.DefaultMaxSteps, h.reflects[1].MaxSteps)
	for _, s := range h.conclude[0].Steps {
		require.Empty(t, s.Result)
		require.NotEmpty(t, s.ResultKey)
	}
	require.Equal(t, &investigation.Verdict{Verdict: investigation.VerdictFalsePositive, Confidence: "high"}, res.Verdict)

	require.Equal(t, "plan,step,tool_call,tool_call,tool_result,tool_result,step_done,insight,step,step_done,insight,conclusion,idle", kinds(h.events(t)))
}

// TestConcludeFromAlert: the baseline exchange asks for no plan, runs no
// step, calls no tool and concludes once, told that nothing was checked.
func TestConcludeFromAlert(t *testing.T) {
	h := newHarness(t) // no GeneratePlan, ModelTurn or CallTool is mocked: a call fails the run
	res, err := h.run(t, investigation.Input{AlertID: "a1", Question: "Is this malicious?", ConcludeFromAlert: true})
	require.NoError(t, err)
	require.Len(t, h.conclude, 1)
	require.Empty(t, h.conclude[0].Steps)
	require.Empty(t, h.conclude[0].Insights)
	require.Equal(t, alertOnlyNote, h.conclude[0].EndedEarly)
	require.Equal(t, "Is this malicious?", h.conclude[0].Objective)
	require.Empty(t, res.Plan.Steps)
	require.Zero(t, res.ToolCalls)
	require.Equal(t, 1, res.Usage.Calls, "the conclusion is the only model call")
	require.Equal(t, investigation.VerdictFalsePositive, res.Verdict.Verdict)
	require.Equal(t, "note,conclusion,idle", kinds(h.events(t)))
}

func TestAchievedEndsEarly(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "conclusive"}, nil
	})
	h.onReflect(func(activities.ReflectInput) (activities.Reflection, error) {
		return activities.Reflection{Achieved: true, Insights: []string{"clear"}}, nil
	})
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, h.turns, 1, "step_2 must not run")
	require.Len(t, h.reflects, 1)
	require.Equal(t, plan.Done, res.Plan.Steps[0].Status)
	require.Equal(t, plan.Skipped, res.Plan.Steps[1].Status)
	require.Contains(t, res.Plan.Steps[1].Note, "objective achieved")
	require.Equal(t, DefaultQuestion, res.History[0].Text, "the default request is used")
	// The conclusion is told what was not checked.
	require.Len(t, h.conclude, 1)
	require.Equal(t, "reflection found the objective achieved after step_1, so these planned steps did not run: step_2", h.conclude[0].EndedEarly)
}

func TestStepCap(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "more questions"}, nil
	})
	n := 0
	h.onReflect(func(activities.ReflectInput) (activities.Reflection, error) {
		n++
		return activities.Reflection{PlanUpdates: []plan.Update{{Type: plan.AddStep, Step: &plan.Step{Description: fmt.Sprintf("follow lead number %d", n), Tools: []string{"get_alert"}}, Reason: "curious"}}}, nil
	})
	res, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxSteps: 4}})
	require.NoError(t, err)
	require.Len(t, res.Plan.Steps, 4, "the plan never grows past the cap")
	require.Len(t, h.turns, 4)
	require.Equal(t, 4, res.Plan.Count(plan.Done))
	var dropped int
	for _, e := range h.events(t) {
		for _, it := range e.Updates {
			if strings.Contains(it, "step cap of 4 reached") {
				dropped++
			}
		}
	}
	require.Equal(t, 2, dropped, "the updates after the cap are dropped and reported")
}

func TestMalformedReflection(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "ok"}, nil
	})
	calls := 0
	h.onReflect(func(activities.ReflectInput) (activities.Reflection, error) {
		calls++
		if calls == 1 {
			// Structurally valid JSON with nonsense in it.
			return activities.Reflection{PlanUpdates: []plan.Update{
				{Type: plan.CancelStep, StepID: "step_42"},
				{Type: "rewrite_everything"},
				{Type: plan.UpdateStep, StepID: "step_1", Step: &plan.Step{Description: "redo"}},
				{Type: plan.AddStep},
			}}, nil
		}
		// Invalid JSON twice: the activity gives up with a non-retryable error.
		return activities.Reflection{}, temporal.NewNonRetryableApplicationError("the model's reflection answer was unusable twice", activities.ErrMalformedOutput, nil)
	})
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err, "a bad reflection never fails the investigation")
	require.Len(t, res.Plan.Steps, 2)
	require.Equal(t, 2, res.Plan.Count(plan.Done))
	var items []string
	var notes []string
	for _, e := range h.events(t) {
		if e.Kind == investigation.EventPlanUpdate {
			items = append(items, e.Updates...)
		}
		if e.Kind == investigation.EventNote {
			notes = append(notes, e.Text)
		}
	}
	require.Len(t, items, 4)
	for _, it := range items {
		require.Contains(t, it, "dropped")
	}
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "Reflection failed")
	require.Contains(t, notes[0], "unusable twice")
}

func TestToolFailureBecomesResult(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{ID: "c1", Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	attempts := 0
	h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
		attempts++
		return activities.ToolOutput{}, errors.New("firestore unavailable")
	})
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Greater(t, attempts, 1, "the tool activity is retried before giving up")
	require.Equal(t, 2, res.Plan.Count(plan.Done))
	last := h.turns[1].Transcript[1]
	require.Equal(t, "c1", last.CallID)
	require.Equal(t, "get_alert", last.Tool)
	require.Empty(t, last.Key)
	require.Contains(t, last.Error, "firestore unavailable", "the model sees the failure as the tool's result")
}

func TestIterationCapForcesAnswer(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Final {
			return activities.TurnOutput{Text: "final answer"}, nil
		}
		return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": fmt.Sprint(len(in.Transcript))}}}}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxIterations: 3}})
	require.NoError(t, err)
	require.Len(t, h.turns, 6, "3 turns per step")
	require.True(t, h.turns[2].Final)
	require.False(t, h.turns[1].Final)
	require.Len(t, h.tools, 2, "step_2 repeats step_1's calls exactly: they are served from step_1's results")
	require.Equal(t, 2, res.ReusedCalls)
	require.Equal(t, []activities.Ref{{Key: "t1-step_2-i1"}, {Key: "t1-step_1-i1-c1", CallID: "t1-step_2-i1-c1", Tool: "get_alert"}}, h.turns[4].Transcript)
	require.Equal(t, "final answer", res.Plan.Steps[0].Result)
}

func TestPlanFailureIsClear(t *testing.T) {
	h := newHarness(t)
	h.onPlan(activities.PlanOutput{}, temporal.NewNonRetryableApplicationError("Gemini rejected the credentials (HTTP 401): API key not valid; check GEMINI_API_KEY", "GeminiUnauthorized", nil))
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	require.Equal(t, "planning failed: Gemini rejected the credentials (HTTP 401): API key not valid; check GEMINI_API_KEY", app.Message())
	require.True(t, app.NonRetryable())
}

func TestBadInputFailsFast(t *testing.T) {
	h := newHarness(t)
	_, err := h.run(t, investigation.Input{AlertID: "a1", Language: "fr"})
	require.ErrorContains(t, err, `unsupported conclusion language "fr"`)
}

func TestRefPipelineOrdersCalls(t *testing.T) {
	h := newHarness(t)
	h.onPlan(withStepTools(twoStepPlan(), 0, "get_alert", "urlscan_result", "urlscan_search", "virustotal_lookup"), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{Name: "urlscan_result", Args: map[string]any{"uuid": "ref:s.results.0.uuid"}},
				{Name: "urlscan_search", Args: map[string]any{"ref_id": "s", "query": "domain:evil.example"}},
				{Name: "virustotal_lookup", Args: map[string]any{"resource": "evil.example"}},
				{Name: "get_alert", Args: map[string]any{"id": "ref:ghost"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
		return activities.ToolOutput{Key: in.Key, OK: true, Bytes: 10}, nil
	})
	h.onReflect(noChange)
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, h.tools, 3, "the call with an unknown ref never runs")
	order := map[string]int{}
	for i, in := range h.tools {
		order[in.Call.Name] = i
	}
	require.Less(t, order["urlscan_search"], order["urlscan_result"], "a call runs after the call it references")
	dependent := h.tools[order["urlscan_result"]]
	require.Equal(t, map[string]string{"s": "t1-step_1-i1-c2"}, dependent.Refs)
	require.Equal(t, "t1-step_1-i1-c1", dependent.Key, "keys follow call order, not run order")

	tr := h.turns[1].Transcript
	require.Len(t, tr, 5)
	require.Equal(t, "t1-step_1-i1-c1", tr[1].Key, "results go back in call order")
	require.Equal(t, "t1-step_1-i1-c2", tr[2].Key)
	require.Equal(t, "t1-step_1-i1-c3", tr[3].Key)
	require.Equal(t, "get_alert", tr[4].Tool)
	require.Equal(t, "the call did not run: ref:ghost names no call of this turn", tr[4].Error)
}

func TestRefToFailedCall(t *testing.T) {
	h := newHarness(t)
	h.onPlan(withStepTools(twoStepPlan(), 0, "get_alert", "search_alerts"), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{ID: "a", Name: "search_alerts", Args: map[string]any{"field": "x"}},
				{ID: "b", Name: "get_alert", Args: map[string]any{"id": "ref:a.alerts.0.id"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
		return activities.ToolOutput{Key: in.Key, OK: false, Error: "bad field"}, nil
	})
	h.onReflect(noChange)
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, h.tools, 1)
	require.Equal(t, "the call did not run: ref:a refers to a, which failed", h.turns[1].Transcript[2].Error)
}

// carriedState decodes the state a continue-as-new hands to the next run.
func carriedState(t *testing.T, can *workflow.ContinueAsNewError) *State {
	t.Helper()
	var in investigation.Input
	var next State
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in, &next))
	return &next
}

// The attack: text the step read steers its model to search_alerts, a
// registered tool the plan did not give step_1 (only get_alert). The call
// does not run and counts as no evidence; the model reads why.
func TestStepCallOfAToolItWasNotOfferedDoesNotRun(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil) // step_1: tools [get_alert]
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 && !in.Final {
			return activities.TurnOutput{Calls: []toolcall.Call{
				{ID: "c1", Name: "search_alerts", Args: map[string]any{"value": "x"}},
				{ID: "c2", Name: "get_alert", Args: map[string]any{"id": "a1"}},
			}}, nil
		}
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, h.tools, 1)
	require.Equal(t, "get_alert", h.tools[0].Call.Name, "step_1 was planned with [get_alert] only, yet its search_alerts call ran")
	require.Equal(t, 1, res.ToolCalls)
	refused := h.turns[1].Transcript[1]
	require.Equal(t, "search_alerts", refused.Tool)
	require.Equal(t, `the call did not run: "search_alerts" is not offered in this step; call only the tools declared to you`, refused.Error)
}

// A model-written objective copied from a huge alert field (200 KiB in one
// plan answer) is bounded before it rides in every model turn's input.
func TestHugeObjectiveIsBoundedInEveryTurn(t *testing.T) {
	h := newHarness(t)
	p := twoStepPlan()
	p.Plan.Objective = "Decide " + strings.Repeat("AAAA ", 40<<10)
	p.Plan.Steps[0].Description = strings.Repeat("read ", 10<<10)
	h.onPlan(p, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "done"}, nil
	})
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, h.turns, 2)
	for _, in := range h.turns {
		raw, err := json.Marshal(in)
		require.NoError(t, err)
		require.Less(t, len(raw), 8<<10, "one model turn's input carries the whole model-written objective")
	}
	require.LessOrEqual(t, len(res.Objective), plan.MaxObjectiveBytes)
	require.True(t, clip.Clipped(res.Plan.Steps[0].Description))
}
