package workflows

import (
	"fmt"
	"math"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// turnFunc runs one model turn of a tool loop.
type turnFunc func(ctx workflow.Context, iter int, key string, transcript []investigation.Ref, final bool) (investigation.TurnOutput, error)

// toolLoop is one tool-calling loop: model turns and the function calls they
// ask for, until the model answers without calls or the turn cap forces an
// answer. The investigation runs one per step; the BigQuery sub-agent runs
// one per request.
type toolLoop struct {
	session  string // transcript namespace (the workflow ID)
	prefix   string // transcript key prefix, e.g. "t1-step_2"
	label    string // progress label, e.g. "step_2"
	toolset  string // which worker registry runs the calls
	maxIter  int
	maxBytes int
	// pipeline enables ref: pipelines and call reuse.
	pipeline bool
	// results maps tool+arguments to a stored result, shared across the
	// loops of one workflow so identical calls are served once.
	results map[string]string
	emit    func(investigation.Event)
	turn    turnFunc
	// child starts a tool that runs as a child workflow (bigquery_agent);
	// nil where no tool does.
	child func(ctx workflow.Context, key string, call toolcall.Call) workflow.Future
	// ask puts an ask_user question to the analyst; nil where the analyst
	// cannot be asked.
	ask func(ctx workflow.Context, call toolcall.Call) workflow.Future
	// stop, given the calls made so far, says why the loop must answer now
	// ("" to go on); nil where nothing stops it early.
	stop func(loopCalls int) string
	// budget, given the calls made so far, is how many more calls may run;
	// nil for no limit. Only guarded loops apply it within a turn.
	budget func(loopCalls int) int
	// guarded enables the "guarded-runs" behaviour: the budget holds within
	// a turn, and identical calls of one turn run once.
	guarded bool

	calls, reused int
	// cut says why stop ended the loop early, if it did.
	cut string
	// transcript is the whole loop's transcript once run returns.
	transcript []investigation.Ref
}

// run returns the loop's final answer and the transcript key that stores it.
func (l *toolLoop) run(ctx workflow.Context) (string, string, error) {
	var transcript []investigation.Ref
	for iter := 1; ; iter++ {
		cut := ""
		if l.stop != nil {
			cut = l.stop(l.calls)
		}
		final := iter >= l.maxIter || cut != ""
		key := fmt.Sprintf("%s-i%d", l.prefix, iter)
		out, err := l.turn(ctx, iter, key, transcript, final)
		if err != nil {
			return "", "", fmt.Errorf("turn %d: %w", iter, err)
		}
		transcript = append(transcript, investigation.Ref{Key: out.Key})
		l.transcript = transcript
		if len(out.Calls) == 0 || final {
			l.cut = cut
			text := strings.TrimSpace(out.Text)
			if text == "" {
				text = fmt.Sprintf("(no answer: the loop ended after %d model turns without a final text)", iter)
			}
			return text, out.Key, nil
		}
		transcript = append(transcript, l.callTools(ctx, key, out.Calls)...)
		l.transcript = transcript
	}
}

// callTools runs the calls of one model turn and returns their transcript
// refs in call order. Calls start together, except that a call whose
// arguments use ref:<name> starts once the calls it names have finished. A
// call does not run when its refs are unknown, ambiguous or cyclic; when it
// is identical to an earlier call of this workflow (served from that call's
// result); and, in guarded loops, when it repeats an earlier call of the same
// turn (served once both are done) or when the run's tool-call budget is
// spent. A call that still fails after its retries becomes an error result
// for the model, not a failed loop.
func (l *toolLoop) callTools(ctx workflow.Context, turnKey string, calls []toolcall.Call) []investigation.Ref {
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("%s-c%d", turnKey, i+1)
		}
	}
	pipe := pipeline{deps: make([][]int, len(calls)), refs: make([][]namedRef, len(calls))}
	if l.pipeline {
		pipe = planPipeline(calls)
	}
	allowed := math.MaxInt
	if l.guarded && l.budget != nil {
		allowed = l.budget(l.calls)
	}
	futures := make([]workflow.Future, len(calls))
	reused := make([]bool, len(calls))  // served from another call's result
	refused := make([]bool, len(calls)) // not run: the budget is spent
	firstOf := map[string]int{}         // call key -> first call of this turn with it
	for i, c := range calls {
		key := fmt.Sprintf("%s-c%d", turnKey, i+1)
		summary := toolcall.Summarize(c.Name, c.Args)
		f, settle := workflow.NewFuture(ctx)
		futures[i] = f
		e := investigation.Event{Kind: investigation.EventToolCall, Step: l.label, Text: summary}
		why, bad := pipe.bad[i]
		independent := l.pipeline && len(pipe.deps[i]) == 0 && !bad
		earlier, seen := l.results[toolcall.Key(c)]
		twin, repeated := firstOf[toolcall.Key(c)]
		switch {
		case bad:
			settle.SetError(temporal.NewNonRetryableApplicationError("the call did not run: "+why, "BadRef", nil))
		case independent && seen:
			reused[i] = true
			settle.Set(investigation.ToolOutput{Key: earlier, OK: true}, nil)
		case independent && l.guarded && repeated:
			reused[i] = true
			settle.Chain(futures[twin])
		case allowed <= 0:
			refused[i] = true
			settle.SetError(temporal.NewNonRetryableApplicationError(
				"the call did not run: the run's tool-call budget is spent; answer from the results you have", "BudgetSpent", nil))
		default:
			allowed--
			if independent {
				firstOf[toolcall.Key(c)] = i
			}
			if l.child != nil && c.Name == toolcall.BigQueryAgent {
				e.Child = childID(l.session, key)
			}
			l.emit(e) // before the call's own events (an ask_user question)
			l.start(ctx, settle, futures, calls, pipe, i, key, summary)
			continue
		}
		l.emit(e)
	}
	out := make([]investigation.Ref, len(calls))
	for i, f := range futures {
		c := calls[i]
		var res investigation.ToolOutput
		if err := f.Get(ctx, &res); err != nil {
			msg := message(err)
			if !strings.HasPrefix(msg, "the call did not run") {
				msg = "the tool failed after retries: " + msg
			}
			out[i] = investigation.Ref{CallID: c.ID, Tool: c.Name, Error: msg}
			if !reused[i] && !refused[i] {
				l.calls++
			}
			l.emit(investigation.Event{Kind: investigation.EventToolResult, Step: l.label, Text: c.Name + ": " + msg})
			continue
		}
		if reused[i] {
			out[i] = investigation.Ref{Key: res.Key, CallID: c.ID, Tool: c.Name}
			if res.Inline != "" {
				out[i] = investigation.Ref{CallID: c.ID, Tool: c.Name, Inline: res.Inline}
			}
			l.reused++
			l.emit(investigation.Event{Kind: investigation.EventToolResult, Step: l.label, Text: c.Name + ": served from the identical earlier call"})
			continue
		}
		l.calls++
		out[i] = investigation.Ref{Key: res.Key}
		if res.Inline != "" {
			out[i] = investigation.Ref{CallID: c.ID, Tool: c.Name, Inline: res.Inline}
		}
		if res.OK && res.Key != "" && l.pipeline && len(pipe.deps[i]) == 0 {
			l.results[toolcall.Key(c)] = res.Key
		}
		text := fmt.Sprintf("%s: %d bytes", c.Name, res.Bytes)
		switch {
		case !res.OK:
			text = c.Name + " error: " + res.Error
		case res.Truncated:
			text += " (truncated)"
		}
		if res.Link != nil {
			text += fmt.Sprintf(" (child workflow %s)", res.Link.WorkflowID)
		}
		l.emit(investigation.Event{Kind: investigation.EventToolResult, Step: l.label, Text: text})
	}
	return out
}

// start runs call i (an activity, the BigQuery child workflow or an
// ask_user question) and settles its future with the outcome; a call with
// refs first waits, in a coroutine, for the calls it uses.
func (l *toolLoop) start(ctx workflow.Context, settle workflow.Settable, futures []workflow.Future, calls []toolcall.Call, pipe pipeline, i int, key, summary string) {
	c := calls[i]
	launch := func(ctx workflow.Context, refs map[string]string) workflow.Future {
		if l.child != nil && c.Name == toolcall.BigQueryAgent {
			return l.child(ctx, key, c)
		}
		if l.ask != nil && c.Name == toolcall.AskUser {
			return l.ask(ctx, c)
		}
		return workflow.ExecuteActivity(toolOptions(ctx, "tool "+summary), a.CallTool, investigation.ToolInput{
			Session: l.session, Key: key, Call: c, MaxResultBytes: l.maxBytes, Toolset: l.toolset, Refs: refs,
		})
	}
	if len(pipe.deps[i]) == 0 {
		settle.Chain(launch(ctx, nil))
		return
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		refs := map[string]string{}
		for _, ref := range pipe.refs[i] {
			var dep investigation.ToolOutput
			if err := futures[ref.call].Get(ctx, &dep); err != nil || !dep.OK {
				settle.SetError(temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("the call did not run: %s%s refers to %s, which failed", toolcall.RefPrefix, ref.name, calls[ref.call].ID), "BadRef", nil))
				return
			}
			refs[ref.name] = dep.Key
		}
		settle.Chain(launch(ctx, refs))
	})
}
