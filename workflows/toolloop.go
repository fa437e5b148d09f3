package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// loopHost is what a tool loop needs from the workflow that runs it (an
// investigation's step, or the BigQuery sub-agent).
type loopHost interface {
	// modelTurn runs one model turn of the loop.
	modelTurn(ctx workflow.Context, iter int, key string, transcript []activities.Ref, final bool) (activities.TurnOutput, error)
	// mustAnswer says why the loop must answer now ("" to go on), given the
	// calls the loop made so far.
	mustAnswer(ctx workflow.Context, loopCalls int) string
	// callsLeft is how many more calls may run, given the loop's calls.
	callsLeft(loopCalls int) int
	emit(e investigation.Event)
	// tool says how the named tool runs.
	tool(name string) toolcall.Tool
	// startSpecial runs a call that is not an activity: a question to the
	// analyst or a child workflow.
	startSpecial(ctx workflow.Context, key string, t toolcall.Tool, c toolcall.Call) workflow.Future
	// toolset names the registry CallTool runs the loop's calls from ("" for
	// the investigation's tools).
	toolset() string
}

// toolLoop is one tool-calling loop: model turns and the function calls
// they ask for, until the model answers without calls or the turn cap
// forces an answer.
type toolLoop struct {
	host     loopHost
	session  string // transcript namespace (the workflow ID)
	prefix   string // transcript key prefix, e.g. "t1-step_2"
	label    string // progress label, e.g. "step_2"
	maxIter  int
	maxBytes int
	// results maps toolcall.Key to a stored result, shared by the loops of
	// one workflow so identical calls are served once.
	results map[string]string
}

// loopResult is what a loop produced.
type loopResult struct {
	// Text is the final answer and Key the transcript key that stores it.
	Text, Key string
	// Cut says why the loop answered early (a spent budget, a stop), if it did.
	Cut string
	// Calls counts the calls that ran, Reused those served from an earlier
	// identical call.
	Calls, Reused int
	// Transcript is the loop's whole transcript.
	Transcript []activities.Ref
}

// run runs the loop to its final answer.
func (l *toolLoop) run(ctx workflow.Context) (loopResult, error) {
	var res loopResult
	for iter := 1; ; iter++ {
		cut := l.host.mustAnswer(ctx, res.Calls)
		final := iter >= l.maxIter || cut != ""
		key := fmt.Sprintf("%s-i%d", l.prefix, iter)
		out, err := l.host.modelTurn(ctx, iter, key, res.Transcript, final)
		if err != nil {
			return res, fmt.Errorf("turn %d: %w", iter, err)
		}
		res.Transcript = append(res.Transcript, activities.Ref{Key: out.Key})
		if len(out.Calls) == 0 || final {
			res.Cut, res.Key = cut, out.Key
			res.Text = strings.TrimSpace(out.Text)
			if res.Text == "" {
				res.Text = fmt.Sprintf("(no answer: the loop ended after %d model turns without a final text)", iter)
			}
			return res, nil
		}
		res.Transcript = append(res.Transcript, l.callTools(ctx, key, out.Calls, &res)...)
	}
}

// callTools runs the calls of one model turn and returns their transcript
// refs in call order. Calls start together, except that a call whose
// arguments use ref:<name> starts once the calls it names have finished. A
// call does not run when its refs are unknown, ambiguous or cyclic; when it
// is identical to an earlier call of this workflow (served from that call's
// result) or of the same turn (served once both are done); or when the
// budget allows no more calls. A call that still fails after its retries
// becomes an error result for the model, not a failed loop.
func (l *toolLoop) callTools(ctx workflow.Context, turnKey string, calls []toolcall.Call, res *loopResult) []activities.Ref {
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("%s-c%d", turnKey, i+1)
		}
	}
	pipe := planPipeline(calls)
	allowed := l.host.callsLeft(res.Calls)
	futures := make([]workflow.Future, len(calls))
	reused := make([]bool, len(calls))  // served from another call's result
	refused := make([]bool, len(calls)) // not run: the budget is spent
	firstOf := map[string]int{}         // toolcall.Key -> first call of this turn with it
	for i, c := range calls {
		key := fmt.Sprintf("%s-c%d", turnKey, i+1)
		summary := toolcall.Summarize(c.Name, c.Args)
		f, settle := workflow.NewFuture(ctx)
		futures[i] = f
		e := investigation.Event{Kind: investigation.EventToolCall, Step: l.label, Text: summary}
		why, bad := pipe.bad[i]
		independent := len(pipe.deps[i]) == 0 && !bad
		earlier, seen := l.results[toolcall.Key(c)]
		twin, repeated := firstOf[toolcall.Key(c)]
		switch {
		case bad:
			settle.SetError(temporal.NewNonRetryableApplicationError("the call did not run: "+why, "BadRef", nil))
		case independent && seen:
			reused[i] = true
			settle.Set(activities.ToolOutput{Key: earlier, OK: true}, nil)
		case independent && repeated:
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
			t := l.host.tool(c.Name)
			if t.Kind == toolcall.ChildWorkflow {
				e.Child = childID(l.session, key)
			}
			l.host.emit(e) // before the call's own events (an ask_user question)
			l.start(ctx, settle, futures, calls, pipe, i, key, summary, t)
			continue
		}
		l.host.emit(e)
	}
	out := make([]activities.Ref, len(calls))
	for i, f := range futures {
		out[i] = l.collect(ctx, calls[i], f, reused[i], refused[i], len(pipe.deps[i]) == 0, res)
	}
	return out
}

// collect waits for one call and returns its transcript ref, counting it
// and reporting its result.
func (l *toolLoop) collect(ctx workflow.Context, c toolcall.Call, f workflow.Future, reused, refused, independent bool, res *loopResult) activities.Ref {
	var out activities.ToolOutput
	if err := f.Get(ctx, &out); err != nil {
		msg := message(err)
		if !strings.HasPrefix(msg, "the call did not run") {
			msg = "the tool failed after retries: " + msg
		}
		if !reused && !refused {
			res.Calls++
		}
		l.host.emit(investigation.Event{Kind: investigation.EventToolResult, Step: l.label, Text: c.Name + ": " + msg})
		return activities.Ref{CallID: c.ID, Tool: c.Name, Error: msg}
	}
	ref := activities.Ref{Key: out.Key}
	if reused {
		ref = activities.Ref{Key: out.Key, CallID: c.ID, Tool: c.Name}
	}
	if out.Inline != "" {
		ref = activities.Ref{CallID: c.ID, Tool: c.Name, Inline: out.Inline}
	}
	if reused {
		res.Reused++
		l.host.emit(investigation.Event{Kind: investigation.EventToolResult, Step: l.label, Text: c.Name + ": served from the identical earlier call"})
		return ref
	}
	res.Calls++
	if out.OK && out.Key != "" && independent {
		l.results[toolcall.Key(c)] = out.Key
	}
	text := fmt.Sprintf("%s: %d bytes", c.Name, out.Bytes)
	switch {
	case !out.OK:
		text = c.Name + " error: " + out.Error
	case out.Truncated:
		text += " (truncated)"
	}
	if out.Link != nil {
		text += fmt.Sprintf(" (child workflow %s)", out.Link.WorkflowID)
	}
	l.host.emit(investigation.Event{Kind: investigation.EventToolResult, Step: l.label, Text: text})
	return ref
}

// start runs call i (an activity, a child workflow or a question to the
// analyst) and settles its future with the outcome; a call with refs first
// waits, in a coroutine, for the calls it uses.
func (l *toolLoop) start(ctx workflow.Context, settle workflow.Settable, futures []workflow.Future, calls []toolcall.Call, pipe pipeline, i int, key, summary string, t toolcall.Tool) {
	c := calls[i]
	launch := func(ctx workflow.Context, refs map[string]string) workflow.Future {
		if t.Kind == toolcall.Analyst || t.Kind == toolcall.ChildWorkflow {
			return l.host.startSpecial(ctx, key, t, c)
		}
		return workflow.ExecuteActivity(toolOptions(ctx, "tool "+summary), a.CallTool, activities.ToolInput{
			Session: l.session, Key: key, Call: c, MaxResultBytes: l.maxBytes, Toolset: l.host.toolset(), Refs: refs,
		})
	}
	if len(pipe.deps[i]) == 0 {
		settle.Chain(launch(ctx, nil))
		return
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		refs := map[string]string{}
		for _, ref := range pipe.refs[i] {
			var dep activities.ToolOutput
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
