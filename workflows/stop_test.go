package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// Tests of "stop means stop": steering by signal, stops and budgets that cut
// in at once, cancellation, bounded state, lost transcript entries, and
// timers that end with their wait.

// signal sends a signal after delay (workflow time).
func (h *harness) signal(delay time.Duration, name string, arg any) {
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(name, arg) }, delay)
}

// notes returns the text of every note event.
func notes(evs []investigation.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Kind == investigation.EventNote {
			out = append(out, e.Text)
		}
	}
	return out
}

func TestSteeringBySignal(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onSlowTurn(time.Minute, func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "ask_user", Args: map[string]any{"question": "Is deploy a CI account?"}}}}, nil
		}
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onReflect(noChange)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil).Maybe()
	// While the plan waits for approval: a bad revise, an approve.
	h.signal(10*time.Second, investigation.UpdateRevise, map[string]any{"text": " "})
	h.signal(20*time.Second, investigation.UpdateApprove, nil)
	h.signal(25*time.Second, investigation.UpdateApprove, nil) // too late: already decided
	// While step_1 runs: a hint (plain string), an empty hint, an answer
	// to the question asked at 1m (a JSON object), an answer nobody waits for.
	h.signal(30*time.Second, investigation.UpdateHint, "Check bastion-01 too.")
	h.signal(35*time.Second, investigation.UpdateHint, "")
	h.signal(90*time.Second, investigation.UpdateAnswer, map[string]any{"question_id": "q-1", "text": "yes, a CI account"})
	h.signal(95*time.Second, investigation.UpdateAnswer, "orphan")
	h.signal(100*time.Second, investigation.UpdateHint, 42) // not text
	// Once idle: an empty question, a question; while it is answered, a
	// stop and a second stop.
	h.signal(30*time.Minute, investigation.UpdateAsk, "")
	h.signal(31*time.Minute, investigation.UpdateAsk, "When did deploy log in?")
	h.signal(31*time.Minute+20*time.Second, investigation.UpdateStop, "enough")
	h.signal(31*time.Minute+30*time.Second, investigation.UpdateStop, "")
	res, err := h.run(t, investigation.Input{AlertID: "a1", ApprovePlan: true})
	require.NoError(t, err)

	evs := h.events(t)
	got := notes(evs)
	for _, want := range []string{
		"revise signal ignored: the revision request is empty",
		"approve signal ignored: the plan is not waiting for approval",
		"hint signal ignored: the hint is empty",
		"answer signal ignored: no question is waiting for an answer",
		`hint signal ignored: its payload must be a JSON string or {"text": "..."}`,
		"ask signal ignored: the question is empty",
		"stop signal ignored: the investigation is already stopping",
	} {
		require.True(t, strings.Contains(strings.Join(got, "\n"), want), "missing note %q in %q", want, got)
	}
	require.Equal(t, []string{"Check bastion-01 too."}, h.turns[1].Hints, "the hint reached the next model call")
	require.Contains(t, h.turns[1].Transcript[1].Inline, "yes, a CI account", "the answer reached the model")
	require.Len(t, res.History, 4, "the follow-up asked by signal was answered")
	require.Equal(t, "When did deploy log in?", res.History[2].Text)
	require.Contains(t, kinds(evs), "stop")
}

// A stop while the sub-agent runs: the child hears of it by a signal (it is
// not cancelled), lets its model turn in flight finish (not cancelled and
// paid again), and answers from what it has without another model call;
// the step answers from what it has too, nothing reflects, and the
// conclusion follows the stop by the rest of the model call in flight.
func TestStopWhileAChildRuns(t *testing.T) {
	h := newHarness(t)
	h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
	h.onPlan(activities.PlanOutput{Tools: []toolcall.Tool{{Name: "bigquery_agent", Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}},
		Plan: plan.Plan{Objective: "o", Steps: []plan.Step{{ID: "step_1", Description: "ask logs", Tools: []string{"bigquery_agent"}, Status: plan.Pending},
			{ID: "step_2", Description: "more", Tools: []string{"bigquery_agent"}, Status: plan.Pending}}}}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 && !in.Final {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "bigquery_agent", Args: map[string]any{"request": "logins from 198.51.100.23"}}}}, nil
		}
		return activities.TurnOutput{Text: "partial"}, nil
	})
	h.env.OnActivity(a.Reflect, mock.Anything, mock.Anything).Return(activities.Reflection{}, nil).Maybe()
	var mu sync.Mutex
	var childTurns []bigquery.SubAgentTurnInput
	h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{}, nil)
	h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).After(time.Minute).Return(func(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
		mu.Lock()
		childTurns = append(childTurns, in)
		mu.Unlock()
		if in.Final {
			return activities.TurnOutput{Key: in.Key, Text: "no login yet"}, nil
		}
		return activities.TurnOutput{Key: in.Key, Calls: []toolcall.Call{{Name: "bigquery_query", Args: map[string]any{"sql": fmt.Sprintf("SELECT %d", len(in.Transcript))}}}}, nil
	})
	h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) { return okTool(in) })
	h.env.OnActivity(bq.Introspect, mock.Anything, mock.Anything).Return(bigquery.Introspection{}, nil).Maybe()
	var delivered []bigquery.DeliverInput
	h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
		delivered = append(delivered, in)
		return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
	})
	var cancelled []string
	h.env.SetOnActivityCanceledListener(func(info *activity.Info) { cancelled = append(cancelled, info.ActivityType.Name) })
	var stoppedAt time.Time
	h.env.RegisterDelayedCallback(func() { stoppedAt = h.env.Now() }, 150*time.Second)
	stop := h.update(150*time.Second, investigation.UpdateStop, "enough")
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.NoError(t, stop.rejected)
	require.Len(t, h.conclude, 1)
	require.Equal(t, "stopped by the analyst: enough", h.conclude[0].EndedEarly)
	// Child: turn 1 (0-1m), its query, turn 2 (1-2m), its query, turn 3
	// (2-3m) in flight at the stop (2.5m): it finishes; no final turn.
	require.Len(t, childTurns, 3)
	for _, in := range childTurns {
		require.False(t, in.Final, "no model call answers after the stop")
	}
	require.NotContains(t, cancelled, "SubAgentTurn", "the model turn in flight was not cancelled (and paid again)")
	require.Len(t, h.cuts, 2, "the child and the step answer from what they have")
	child, step := h.cuts[0], h.cuts[1]
	require.Equal(t, "stopped by the analyst: enough", child.Reason)
	require.Equal(t, activities.Ref{Key: "bq-i3"}, child.Transcript[len(child.Transcript)-1], "the turn in flight is part of what the child had")
	require.Equal(t, "t1-step_1-cut", step.Key)
	require.Equal(t, activities.Ref{Key: "t1-step_1-i1-c1"}, step.Transcript[len(step.Transcript)-1], "the child's answer is part of what the step had")
	require.Len(t, delivered, 1)
	require.Equal(t, "as it was: stopped by the analyst: enough", delivered[0].Answer)
	require.Len(t, h.turns, 1, "the step asks the model nothing after the stop")
	took := h.concludedAt[0].Sub(stoppedAt)
	require.Equal(t, 30*time.Second, took, "the conclusion follows the stop by the rest of the model turn in flight")
	t.Logf("REPORT stop with the child running: conclusion %s of workflow time after the stop (1 min per model call, 30 s of it left in flight)", took)
	require.Equal(t, plan.Skipped, res.Plan.Steps[1].Status)
	require.Equal(t, "t1-step_1-cut", res.Plan.Steps[0].ResultKey)
}

// A stop while a tool call runs cuts the call short: the step answers from
// what it has without another model call, and the investigation concludes
// without waiting for the tool.
func TestStopWhileAToolCallRuns(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
		}
		return activities.TurnOutput{Text: "answered without the tool"}, nil
	})
	h.env.OnActivity(a.CallTool, mock.Anything, mock.Anything).After(time.Hour).Return(activities.ToolOutput{OK: true}, nil)
	h.update(time.Minute, investigation.UpdateStop, "")
	start := h.env.Now()
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, h.concludedAt, 1)
	require.Equal(t, time.Minute, h.concludedAt[0].Sub(start), "at the stop, not the hour the tool would take")
	require.Len(t, h.turns, 1, "no model turn answers after the stop")
	require.Len(t, h.cuts, 1)
	require.Contains(t, h.cuts[0].Transcript[1].Error, "the call was cut short: stopped by the analyst")
}

// A stop while a model turn runs: the turn finishes and its answer stands,
// but the calls it asks for do not run, and the step answers from what it
// has.
func TestStopWhileAModelTurnRuns(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	h.onSlowTurn(time.Minute, func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "reading the alert next", Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
	})
	h.onTool(okTool)
	h.update(30*time.Second, investigation.UpdateStop, "")
	start := h.env.Now()
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Len(t, h.turns, 1)
	require.Empty(t, h.tools, "the calls of a turn that ended after the stop do not run")
	require.Len(t, h.cuts, 1)
	require.Equal(t, []activities.Ref{{Key: "t1-step_1-i1"}}, h.cuts[0].Transcript)
	require.Equal(t, time.Minute, h.concludedAt[0].Sub(start), "the conclusion follows the turn in flight")
}

// The time budget cuts a long tool call short in the middle of a turn: the
// budget (2m) ends before the call's own bound (its 1m retry budget plus a
// 2m attempt), so a timer watches it.
func TestTimeBudgetCutsInMidTurn(t *testing.T) {
	h := newHarness(t)
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 && !in.Final {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
		}
		return activities.TurnOutput{Text: "partial"}, nil
	})
	h.env.OnActivity(a.CallTool, mock.Anything, mock.Anything).After(time.Hour).Return(activities.ToolOutput{OK: true}, nil)
	h.onReflect(noChange)
	start := h.env.Now()
	_, err := h.run(t, investigation.Input{AlertID: "a1", Limits: investigation.Limits{TimeBudget: investigation.Duration(2 * time.Minute)}})
	require.NoError(t, err)
	require.Len(t, h.turns, 2, "step_1's call is cut at the budget, the step answers, step_2 never runs")
	require.Contains(t, h.turns[1].Transcript[1].Error, "the call was cut short: this exchange used its time budget of 2m")
	require.Equal(t, "this exchange used its time budget of 2m", h.conclude[0].EndedEarly)
	require.Equal(t, 2*time.Minute, h.concludedAt[0].Sub(start), "cut at the budget, not when the call would have ended")
}

// A cancellation request ends the investigation as Canceled (not Failed),
// after it recorded why; its child is cancelled with it and ends Canceled
// too, without a model call or an answer: no final turn, no CutAnswer, no
// DeliverAnswer to a parent that is gone.
func TestCancelIsCancel(t *testing.T) {
	h := newHarness(t)
	var childErr error
	childEnded := false
	h.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in bigquery.Request) (activities.ToolOutput, error) {
		out, err := BigQueryAgent(ctx, in)
		childEnded, childErr = true, err
		return out, err
	}, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
	h.onPlan(activities.PlanOutput{Tools: []toolcall.Tool{{Name: "bigquery_agent", Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}},
		Plan: plan.Plan{Objective: "o", Steps: []plan.Step{{ID: "step_1", Description: "ask logs", Tools: []string{"bigquery_agent"}, Status: plan.Pending}}}}, nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Calls: []toolcall.Call{{Name: "bigquery_agent", Args: map[string]any{"request": "logins"}}}}, nil
	})
	h.env.OnActivity(bq.RecallMemories, mock.Anything, mock.Anything).Return(bigquery.Recall{}, nil)
	var mu sync.Mutex
	var childTurns []bigquery.SubAgentTurnInput
	h.env.OnActivity(bq.SubAgentTurn, mock.Anything, mock.Anything).After(time.Hour).Return(func(ctx context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
		mu.Lock()
		childTurns = append(childTurns, in)
		mu.Unlock()
		return activities.TurnOutput{Key: in.Key, Text: "x"}, nil
	}).Maybe()
	delivered := 0
	h.env.OnActivity(bq.DeliverAnswer, mock.Anything, mock.Anything).Return(func(context.Context, bigquery.DeliverInput) (activities.ToolOutput, error) {
		delivered++
		return activities.ToolOutput{OK: true}, nil
	}).Maybe()
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 2*time.Minute)
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1"})
	require.True(t, h.env.IsWorkflowCompleted())
	err := h.env.GetWorkflowError()
	require.Error(t, err)
	var canceled *temporal.CanceledError
	require.ErrorAs(t, err, &canceled, "the investigation ends as Canceled, not Failed: %v", err)
	require.True(t, childEnded)
	require.ErrorAs(t, childErr, &canceled, "the child ends as Canceled, not Completed: %v", childErr)
	for _, in := range childTurns {
		require.False(t, in.Final, "the cancelled child asks the model nothing more")
	}
	require.Zero(t, delivered, "the cancelled child delivers nothing")
	require.Empty(t, h.cuts, "nothing answers from what it had")
	require.Len(t, h.turns, 1, "the step asks the model nothing more")
	st := h.status(t)
	require.Equal(t, investigation.PhaseCancelled, st.Phase)
	evs := h.events(t)
	require.Equal(t, "the investigation was cancelled", evs[len(evs)-1].Text)
}

// TestPayloadsStayBounded runs a big investigation: 40-step plans, tool
// calls with 6 KiB arguments, 200 hints of 7 KiB and 20 follow-ups of 7
// KiB, with long model answers, insights and conclusions. Every activity
// input and result, progress page, status answer and the continue-as-new
// input stays under maxPayloadBytes, and everything the activities put in
// history together (what the investigation's history holds besides
// Temporal's own fields) under maxActivityBytes, because no input carries
// the conversation, the hints or anything else that grows with the run
// (design/durability.md, "State and its bounds").
func TestPayloadsStayBounded(t *testing.T) {
	const (
		maxPayloadBytes = 256 << 10
		// maxStepBytes bounds what one step of a big plan puts in history
		// (its turns' inputs and answers, the tool call, the reflection).
		maxStepBytes = 48 << 10
	)
	h := newHarness(t)
	var mu sync.Mutex
	sizes, sums := map[string]int{}, map[string]int{}
	total := 0
	// perExchange is what each exchange's activities put in history,
	// indexed by how many exchanges concluded before it.
	perExchange := make([]int, 22)
	exchange := 0
	record := func(name string, v any) {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		sizes[name] = max(sizes[name], len(raw))
		sums[name] += len(raw)
		total += len(raw)
		perExchange[min(exchange, 21)] += len(raw)
	}
	bigPlan := func() activities.PlanOutput {
		out := twoStepPlan()
		out.Plan.Steps = nil
		for i := range 40 {
			out.Plan.Steps = append(out.Plan.Steps, plan.Step{ID: fmt.Sprintf("step_%d", i+1), Description: fmt.Sprintf("Check lead %d %s", i, strings.Repeat("d", 300)),
				Tools: []string{"search_alerts"}, Expected: strings.Repeat("e", 200), Status: plan.Pending})
		}
		return out
	}
	h.env.OnActivity(a.GeneratePlan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (activities.PlanOutput, error) {
		record("plan input", in)
		out := bigPlan()
		record("plan result", out)
		return out, nil
	})
	turns := 0
	h.env.OnActivity(a.ModelTurn, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.TurnInput) (activities.TurnOutput, error) {
		record("turn input", in) // as it is in history: not expanded
		mu.Lock()
		turns++
		mu.Unlock()
		out := activities.TurnOutput{Key: in.Key, Text: strings.Repeat("finding ", 2000)}
		if len(in.Transcript) == 0 && !in.Final {
			out = activities.TurnOutput{Key: in.Key, Calls: []toolcall.Call{{ID: "c1", Name: "search_alerts", Args: map[string]any{"value": in.Step.ID + strings.Repeat("a", 6<<10)}}}}
		}
		record("turn result", out)
		return out, nil
	})
	h.onTool(func(in activities.ToolInput) (activities.ToolOutput, error) {
		record("tool input", in)
		out := activities.ToolOutput{Key: in.Key, OK: true, Bytes: 16 << 10, Preview: strings.Repeat("p", 160)}
		record("tool result", out)
		return out, nil
	})
	h.env.OnActivity(a.Reflect, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ReflectInput) (activities.Reflection, error) {
		record("reflect input", in)
		out := activities.Reflection{Insights: []string{strings.Repeat("insight ", 500)}}
		record("reflect result", out)
		return out, nil
	})
	h.rawConclude = func(in activities.ConcludeInput) { record("conclude input", in) }
	h.conclusion = func(activities.ConcludeInput) activities.Conclusion {
		out := activities.Conclusion{Markdown: strings.Repeat("conclusion ", 10000)}
		record("conclude result", out)
		mu.Lock()
		exchange++
		mu.Unlock()
		return out
	}
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ModeInput) (activities.Mode, error) {
		record("mode input", in)
		return activities.Mode{Mode: investigation.ModePlan}, nil
	})
	for i := range 200 {
		hint := fmt.Sprintf("hint %d %s", i, strings.Repeat("h", 7000))
		record("hint", hint) // an update's argument is in history once
		h.update(time.Duration(i)*time.Second, investigation.UpdateHint, hint)
	}
	for i := range 20 {
		question := fmt.Sprintf("question %d %s", i, strings.Repeat("q", 7000))
		record("question", question)
		h.update(10*time.Minute+time.Duration(i)*time.Second, investigation.UpdateAsk, question)
	}
	var pages []int
	h.env.RegisterDelayedCallback(func() {
		for after := 0; ; {
			v, err := h.env.QueryWorkflow(investigation.ProgressQuery, after)
			require.NoError(t, err)
			var evs []investigation.Event
			require.NoError(t, v.Get(&evs))
			raw, _ := json.Marshal(evs)
			pages = append(pages, len(raw))
			if len(evs) == 0 {
				break
			}
			after = evs[len(evs)-1].Seq
		}
	}, 30*time.Hour)
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxHistoryEvents: 100000, MaxSteps: 40, MaxToolCalls: 1000, TimeBudget: investigation.Duration(24 * time.Hour)}})
	require.True(t, h.env.IsWorkflowCompleted())
	if err := h.env.GetWorkflowError(); err != nil {
		var can *workflow.ContinueAsNewError
		require.ErrorAs(t, err, &can)
		payloads, perr := converter.GetDefaultDataConverter().ToPayloads(can.Input)
		require.NoError(t, perr)
		raw, _ := json.Marshal(payloads)
		record("continue-as-new", json.RawMessage(raw))
	}
	require.Equal(t, 21, len(h.conclude), "the investigation and its 20 follow-ups concluded")
	require.GreaterOrEqual(t, turns, 21*40*2, "every exchange ran its 40 steps")
	var parts []string
	for k, v := range sizes {
		require.Less(t, v, maxPayloadBytes, "the largest %s is %d bytes", k, v)
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(parts)
	for _, p := range pages {
		require.Less(t, p, maxPayloadBytes, "a progress page is %d bytes", p)
	}
	st := h.status(t)
	raw, _ := json.Marshal(st)
	require.Less(t, len(raw), maxPayloadBytes, "the status answer")
	require.LessOrEqual(t, len(st.Hints), maxHints)
	// Follow-ups do not cost more as the investigation goes on: the last
	// one puts no more in history than the first one (10% of leeway).
	first, last := perExchange[1], perExchange[20]
	require.LessOrEqual(t, last, first+first/10, "the 20th follow-up's activities hold %d bytes, the first's %d", last, first)
	require.Less(t, total, 21*40*maxStepBytes, "the activities' payloads and the analyst's inputs together")
	t.Logf("REPORT 40-step plans, 200 hints, 20 follow-ups: %d model turns, %d bytes of activity inputs and results in all (%d per step; first follow-up %d, 20th %d); largest: %s; in all: %v",
		turns, total, total/(21*40), first, last, strings.Join(parts, ", "), sums)
}

// A transcript entry the store lost: the step runs again under fresh keys
// instead of failing the investigation.
func TestMissingTranscriptEntryRunsTheStepAgain(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	lost := true
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
		}
		if lost {
			lost = false
			return activities.TurnOutput{}, temporal.NewNonRetryableApplicationError("transcript entry s/t1-step_1-i1-c1 is missing", activities.ErrTranscriptMissing, nil)
		}
		return activities.TurnOutput{Text: "found"}, nil
	})
	h.onTool(okTool)
	h.onReflect(noChange)
	res, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Equal(t, "found", res.Plan.Steps[0].Result)
	var keys []string
	for _, in := range h.turns {
		keys = append(keys, in.Key)
	}
	require.Equal(t, []string{"t1-step_1-i1", "t1-step_1-i2", "t1-step_1-r1-i1", "t1-step_1-r1-i2"}, keys)
	require.Len(t, h.tools, 2, "the call ran again under its new key")
	require.Contains(t, strings.Join(notes(h.events(t)), "\n"), "the transcript store lost part of this step; running it again")
}

// Every wait's timer is cancelled as soon as its condition holds: none is
// left to fire later in the middle of a turn.
func TestTimersEndWithTheirWait(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	h.onSlowTurn(time.Minute, func(in activities.TurnInput) (activities.TurnOutput, error) {
		if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "ask_user", Args: map[string]any{"question": "Who owns host-7?"}}}}, nil
		}
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onReflect(noChange)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	var mu sync.Mutex
	var scheduled []string
	cancelled := map[string]bool{}
	h.env.SetOnTimerScheduledListener(func(id string, _ time.Duration) { mu.Lock(); scheduled = append(scheduled, id); mu.Unlock() })
	h.env.SetOnTimerCanceledListener(func(id string) { mu.Lock(); cancelled[id] = true; mu.Unlock() })
	h.update(30*time.Second, investigation.UpdateApprove)
	h.update(3*time.Minute, investigation.UpdateAnswer, investigation.Answer{Text: "the web team"})
	h.update(10*time.Minute, investigation.UpdateAsk, "And host-8?")
	h.update(20*time.Minute, investigation.UpdateStop, "")
	_, err := h.run(t, investigation.Input{AlertID: "a1", ApprovePlan: true})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	// The approval (ends at 30s), the answer (3m), the first idle wait
	// (10m): each ended by its condition. The last idle wait ends with the
	// workflow (the stop at 20m closes it). A question to the analyst stops
	// the time budget, so its turn needs no timer for it.
	require.GreaterOrEqual(t, len(scheduled), 4)
	for _, id := range scheduled[:len(scheduled)-1] {
		require.True(t, cancelled[id], "timer %s was left running after its wait ended", id)
	}
}

// A stop while a question waits for the analyst reads as a stop, not as a
// question the analyst left unanswered for the answer timeout.
func TestStopDuringAskUserSaysStopped(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	h.onTurn(func(in activities.TurnInput) (activities.TurnOutput, error) {
		if len(in.Transcript) == 0 {
			return activities.TurnOutput{Calls: []toolcall.Call{{Name: "ask_user", Args: map[string]any{"question": "Who owns host-7?"}}}}, nil
		}
		return activities.TurnOutput{Text: "answered without the analyst"}, nil
	})
	h.update(5*time.Minute, investigation.UpdateStop, "enough")
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	var answers []string
	for _, e := range h.events(t) {
		if e.Kind == investigation.EventAnswer {
			answers = append(answers, e.Text)
		}
	}
	require.Equal(t, []string{"withdrawn: stopped by the analyst: enough"}, answers)
	for _, r := range h.loopTranscript() {
		require.NotContains(t, r.Inline+r.Error, "did not answer within", "a stop is not an unanswered question")
	}
}

// A cancellation while the mode of a follow-up is being decided is a
// cancellation: the investigation ends as Canceled without planning "to be
// safe".
func TestCancelDuringDecideModeIsCancel(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).After(time.Hour).Return(activities.Mode{Mode: investigation.ModeDirect}, nil)
	h.update(10*time.Minute, investigation.UpdateAsk, "And host-8?")
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 11*time.Minute)
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1"})
	require.True(t, h.env.IsWorkflowCompleted())
	var canceled *temporal.CanceledError
	require.ErrorAs(t, h.env.GetWorkflowError(), &canceled)
	for _, e := range h.events(t) {
		require.NotContains(t, e.Reason, "planning to be safe", "a cancellation is not a failed mode decision")
		require.NotEqual(t, investigation.EventTurn, e.Kind, "no exchange starts once cancelled")
	}
}

// loopTranscript is the transcript the last step's answer was made from.
func (h *harness) loopTranscript() []activities.Ref {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.turns) == 0 {
		return nil
	}
	return h.turns[len(h.turns)-1].Transcript
}

// A hint given after the stop, once the conclusion is being written, is
// read by no model call: as a signal it becomes a note saying so (not a
// hint event, not one of the hints), as an update it is refused. One given
// after the stop but before the conclusion is read by the conclusion.
func TestHintAfterTheStopWhileConcludingIsNotRecorded(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	h.onSlowTurn(time.Minute, conclusionOnly)
	h.onReflect(noChange)
	const early = "The scanner is ours."
	h.signal(30*time.Second, investigation.UpdateStop, "enough")
	h.signal(40*time.Second, investigation.UpdateHint, early)
	var late *updateResult
	h.conclusion = func(activities.ConcludeInput) activities.Conclusion {
		h.env.SignalWorkflow(investigation.UpdateHint, lateHint)
		late = h.update(0, investigation.UpdateHint, lateHint)
		return activities.Conclusion{Markdown: "## Summary\nStopped.", Usage: investigation.Usage{Calls: 1},
			Verdict: &investigation.Verdict{Verdict: investigation.VerdictFalsePositive, Confidence: "low"}}
	}
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)

	require.Len(t, h.conclude, 1)
	require.Equal(t, []string{early}, h.conclude[0].Hints, "a hint before the conclusion is read by it")
	for _, in := range []any{h.turns, h.reflects, h.conclude, h.reviews, h.cuts} {
		raw, err := json.Marshal(in)
		require.NoError(t, err)
		require.NotContains(t, string(raw), lateHint, "no model request holds the late hint")
	}
	evs := h.events(t)
	for _, e := range evs {
		require.False(t, e.Kind == investigation.EventHint && e.Text == lateHint, "the late hint is not reported as recorded")
	}
	require.Contains(t, notes(evs), "hint signal ignored: the investigation is closing: no model call would read the hint; start a new one")
	require.Equal(t, []string{early}, h.status(t).Hints)
	require.NotNil(t, late)
	require.EqualError(t, late.rejected, "the investigation is closing: no model call would read the hint; start a new one")
}
