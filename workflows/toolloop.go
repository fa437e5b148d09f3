package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/size"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// loopHost is what a tool loop needs from the workflow that runs it (an
// investigation's step, or the BigQuery sub-agent).
type loopHost interface {
	// modelTurn runs one model turn of the loop.
	modelTurn(ctx workflow.Context, iter int, key string, transcript []activities.Ref, final bool) (activities.TurnOutput, error)
	// mustAnswer says why the loop must answer now ("" to go on), given the
	// calls the loop made so far: a stop, a spent budget, a deadline.
	mustAnswer(ctx workflow.Context, loopCalls int) string
	// answersAsIs says the loop, once it must answer, answers from what it
	// has (CutAnswer) instead of asking the model once more: the analyst
	// stopped it and waits for the conclusion.
	answersAsIs(ctx workflow.Context) bool
	// callsLeft is how many more calls may start, given the loop's calls
	// (a host running several loops at once counts theirs too).
	callsLeft(loopCalls int) int
	// callStarted and callDone tell the host that a call started, and that
	// it finished with out, or failed with err (out is then the zero value:
	// what the call spent did not come back); both are called for every
	// call that ran, and only for those.
	callStarted()
	callDone(ctx workflow.Context, key string, out activities.ToolOutput, err error)
	// deadline is when the loop must answer by, if it has one (the time
	// budget): a turn still running then is cut short.
	deadline(ctx workflow.Context) (time.Time, bool)
	// timeLeft is what is left of the loop's time budget (0: it has none),
	// counted as if a wait for the analyst ended now.
	timeLeft(ctx workflow.Context) time.Duration
	// language is the language of what the loop's answer says to the
	// analyst (empty: English).
	language() string
	emit(e investigation.Event)
	// tool says how the named tool runs.
	tool(name string) toolcall.Tool
	// offers says the loop's model turns were offered the named tool (its
	// declaration): a call of any other does not run (planGuarded).
	offers(name string) bool
	// startSpecial runs a call that is not an activity: a question to the
	// analyst or a child workflow; siblings is as for scanFor.
	startSpecial(ctx workflow.Context, key string, t toolcall.Tool, c toolcall.Call, siblings int) workflow.Future
	// toolset names the registry CallTool runs the loop's calls from ("" for
	// the investigation's tools).
	toolset() string
	// gate runs a call of an acting tool (toolcall.Tool.Acts) through run
	// once the analyst approves it, with the approval (activities.Approval)
	// CallTool checks, or settles it with why it did not run.
	gate(ctx workflow.Context, key string, c toolcall.Call, run func(ctx workflow.Context, approval string) workflow.Future) workflow.Future
	// toolTimeout bounds one attempt of the named tool's activity.
	toolTimeout(name string) time.Duration
	// scanFor is what call c (transcript key key) may scan in BigQuery (see
	// tools.CallInfo.ScanBytesLeft); siblings counts the calls after it in
	// its turn to the same tool. A host may lend it a share of its budget,
	// returned at callDone.
	scanFor(key string, c toolcall.Call, siblings int) int64
}

// toolLoop is one tool-calling loop: model turns and the function calls
// they ask for, until the model answers without calls or the turn cap
// forces an answer.
type toolLoop struct {
	host     loopHost
	session  string // transcript namespace (run.session, or the sub-agent's workflow ID)
	prefix   string // transcript key prefix, e.g. "t1-step_2"
	label    string // progress label, e.g. "step_2"
	maxIter  int
	maxBytes int
	// results serve identical calls once; shared by the loops of one
	// workflow.
	results *Reuse
	// exchange is the transcript-key prefix of the exchange's calls
	// ("t2-"): a result served from a key without it was produced in an
	// earlier exchange. Empty: every result is the loop's own.
	exchange string
	// outer is the loop's context, which the watch of a turn's calls does
	// not cancel, and children the child workflows the current turn
	// started under it: they hear that the loop must answer by a signal
	// (stopAnswersAtOnce).
	outer    workflow.Context
	children []workflow.ChildWorkflowFuture
}

// loopResult is what a loop produced.
type loopResult struct {
	// Text is the final answer and Key the transcript key that stores it.
	Text, Key string
	// Cut says why the loop answered early (a spent budget, a stop), if it did.
	Cut string
	// Calls counts the calls that ran (not those refused or served from
	// another call), Reused those served from an earlier identical call.
	Calls, Reused int
	// Tools names the tools whose calls returned a result (OK, and not an
	// action left undone or a question left unanswered), run or served
	// from a call of this exchange, in first-call order: what the loop's
	// answer may cite as this exchange's evidence. Earlier names those
	// served from an earlier exchange's call: earlier evidence.
	Tools, Earlier []string
	// Called names the tools whose calls started or were served, whatever
	// came of them: the evidence of runs recorded before the
	// results-are-evidence gate (addRan).
	Called []string
	// Transcript is the loop's whole transcript.
	Transcript []activities.Ref
}

// run runs the loop to its final answer. The calls a model turn asks for
// (tool activities, questions to the analyst) run under a context that is
// cancelled as soon as the host says the loop must answer (the analyst's
// stop, a spent budget, a deadline): they are cut short; a child workflow
// is told by a signal and answers from what it has. Then the next turn,
// with function calling off, answers from what the loop has; after the
// analyst's stop no model call answers: CutAnswer lays out what the loop
// has (answersAsIs). A model turn in flight is let finish, never cancelled
// and paid again. Cancelling the workflow cancels everything: nothing
// answers.
func (l *toolLoop) run(ctx workflow.Context) (loopResult, error) {
	var res loopResult
	l.outer = ctx
	prefix := l.prefix
	for redo := 1; ; redo++ {
		err := l.turns(ctx, prefix, &res)
		if !isTranscriptMissing(err) || redo > maxRedos {
			return res, err
		}
		// The store lost an entry this loop's turns need: run the loop
		// again under fresh keys (its calls count, they ran).
		l.host.emit(investigation.Event{Kind: investigation.EventNote, Step: l.label, Text: "the transcript store lost part of this step; running it again: " + message(err)})
		res.Transcript = nil
		*l.results = Reuse{Hashed: l.results.Hashed} // a reused result may be the lost one
		prefix = fmt.Sprintf("%s-r%d", l.prefix, redo)
	}
}

// maxRedos bounds how often a loop runs again after losing its transcript.
const maxRedos = 2

func isTranscriptMissing(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrTranscriptMissing
}

// isRefused says a model activity failed because the model refused the
// request (activities.RefusedError) or kept answering nothing usable
// (activities.ErrNoAnswer): asking again would not help.
func isRefused(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && (app.Type() == activities.ErrModelRefused || app.Type() == activities.ErrNoAnswer)
}

// turns runs model turns and their calls under prefix until the final answer.
func (l *toolLoop) turns(ctx workflow.Context, prefix string, res *loopResult) error {
	for iter := 1; ; iter++ {
		cut := l.host.mustAnswer(ctx, res.Calls)
		if cut != "" && l.host.answersAsIs(ctx) {
			return l.answerAsIs(ctx, prefix, cut, res)
		}
		final := iter >= l.maxIter || cut != ""
		key := fmt.Sprintf("%s-i%d", prefix, iter)
		turnCtx := ctx
		if final && ctx.Err() != nil {
			// The host answers although its workflow was cancelled (a
			// sub-agent cancelled by its parent, in histories recorded
			// before sub-agent-cancel-is-cancel): the answer needs a
			// context of its own.
			turnCtx, _ = workflow.NewDisconnectedContext(ctx)
		}
		out, err := l.host.modelTurn(turnCtx, iter, key, res.Transcript, final)
		if err != nil {
			if temporal.IsCanceledError(err) && !final && l.host.mustAnswer(ctx, res.Calls) != "" {
				continue // cut short: the next turn is the final one
			}
			if isRefused(err) {
				// The model refused this loop's conversation: it would refuse
				// it again, so the loop answers from what it has and the
				// step is a failed one the conclusion reads, not a failed
				// investigation. No gate: before ErrModelRefused existed a
				// refusal was a retryable error, so no recorded history has
				// a turn that failed with it; nor with ErrNoAnswer, newer.
				l.host.emit(investigation.Event{Kind: investigation.EventNote, Step: l.label, Text: message(err)})
				err := l.answerAsIs(ctx, prefix, message(err), res)
				// Not cut short, so the rest of the plan runs, unless a stop
				// or the budget had already ended the loop.
				res.Cut = l.host.mustAnswer(ctx, res.Calls)
				return err
			}
			return fmt.Errorf("turn %d: %w", iter, err)
		}
		res.Transcript = append(res.Transcript, activities.Ref{Key: out.Key})
		if len(out.Calls) == 0 || final {
			res.Cut, res.Key = cut, out.Key
			if cut == "" && l.host.answersAsIs(ctx) {
				// Stopped while this turn ran: its answer stands, and the
				// loop counts as cut short (nothing reflects on it).
				res.Cut = l.host.mustAnswer(ctx, res.Calls)
			}
			res.Text = strings.TrimSpace(out.Text)
			if res.Text == "" {
				res.Text = fmt.Sprintf("(no answer: the loop ended after %d model turns without a final text)", iter)
			}
			return nil
		}
		if cut := l.host.mustAnswer(ctx, res.Calls); cut != "" && l.host.answersAsIs(ctx) {
			// Stopped while this turn ran: the calls it asks for do not run.
			return l.answerAsIs(ctx, prefix, cut, res)
		}
		l.children = nil
		callCtx, stopWatching := l.watch(ctx, res.Calls, l.latestEnd(ctx, out.Calls))
		res.Transcript = append(res.Transcript, l.callTools(callCtx, key, out.Calls, res, func() string { return l.host.mustAnswer(ctx, res.Calls) })...)
		stopWatching()
		if err := ctx.Err(); err != nil && l.host.mustAnswer(ctx, res.Calls) == "" {
			return err // cancelled, and the host does not answer after a cancel
		}
	}
}

// answerAsIs ends the loop with the answer CutAnswer lays out from what
// the loop has, under <prefix>-cut, without a model call.
func (l *toolLoop) answerAsIs(ctx workflow.Context, prefix, cut string, res *loopResult) error {
	var out activities.TurnOutput
	if err := workflow.ExecuteActivity(storeOptions(ctx, "answer from what it has"), a.CutAnswer, activities.CutAnswerInput{
		// Language changes the activity's input only, not a command.
		Session: l.session, Key: prefix + "-cut", Transcript: res.Transcript, Reason: cut, MaxBytes: l.maxBytes, Language: l.host.language(),
	}).Get(ctx, &out); err != nil {
		return fmt.Errorf("answering from what it had: %w", err)
	}
	res.Cut, res.Key, res.Text = cut, out.Key, strings.TrimSpace(out.Text)
	return nil
}

// stopAnswersAtOnce gates the stop that answers at once: a loop stopped by
// the analyst answers from what it has without a model call, and the
// sub-agents it started hear of it by a signal instead of being cancelled.
// Histories recorded before ask the model once more and cancel them.
func stopAnswersAtOnce(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, "stop-answers-at-once", workflow.DefaultVersion, 1) == 1
}

// planGuarded gates the plan guards (asked only where one applies:
// a call of a tool the turn was not offered, or a follow-up whose planning
// failed): such a call does not run, and a follow-up that could not be
// planned ends with a note instead of failing the investigation
// (followUpUnplanned). Histories recorded before ran the call and failed.
func planGuarded(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, "plan-guards", workflow.DefaultVersion, 1) == 1
}

// boundsPlanText says whether workflow code clips a plan's text that is not
// within its bounds: asked (plan-guards) only when it is not, so a run
// recorded before the gate keeps its text, and its context's size.
func boundsPlanText(ctx workflow.Context, within bool) bool {
	return !within && planGuarded(ctx)
}

// maxNamedTool bounds how much of a model-written tool name a refusal quotes.
const maxNamedTool = 80

// latestEnd is when the activity calls among calls end at the latest, by
// their retry budget (the zero time if there are none): a child answers by
// the deadline itself, and a wait for the analyst stops the time budget.
func (l *toolLoop) latestEnd(ctx workflow.Context, calls []toolcall.Call) time.Time {
	var bound time.Duration
	for _, c := range calls {
		switch l.host.tool(c.Name).Kind {
		case toolcall.Activity:
			bound = max(bound, toolRetryBudget+l.host.toolTimeout(c.Name))
		case toolcall.LocalActivity:
			bound = max(bound, toolRetryBudget+localToolAttempt)
		}
	}
	if bound == 0 {
		return time.Time{}
	}
	return workflow.Now(ctx).Add(bound)
}

// watch returns a context for one turn's calls that is cancelled once the
// loop must answer, and a func that ends the watch and its timer. The timer
// is set for the host's deadline, and re-set when a wait for the analyst
// moves it, unless the calls end before the deadline anyway (latestEnd).
func (l *toolLoop) watch(ctx workflow.Context, loopCalls int, latestEnd time.Time) (workflow.Context, func()) {
	turnCtx, cancel := workflow.WithCancel(ctx)
	done := false
	workflow.Go(turnCtx, func(wctx workflow.Context) {
		for !done {
			at, timed := l.host.deadline(wctx)
			timerCtx, stopTimer := workflow.WithCancel(wctx)
			var timer workflow.Future
			if timed && at.Before(latestEnd) {
				timer = workflow.NewTimerWithOptions(timerCtx, max(at.Sub(workflow.Now(wctx)), time.Millisecond),
					workflow.TimerOptions{Summary: "time budget of " + l.label})
			}
			err := workflow.Await(wctx, func() bool {
				_, stillTimed := l.host.deadline(wctx)
				return done || l.host.mustAnswer(wctx, loopCalls) != "" || (timer != nil && timer.IsReady()) || stillTimed != timed
			})
			stopTimer()
			if err != nil || done {
				return
			}
			if why := l.host.mustAnswer(wctx, loopCalls); why != "" {
				cancel()
				if l.host.answersAsIs(l.outer) {
					l.tellChildren(why)
				}
				return
			}
		}
	})
	return turnCtx, func() { done = true; cancel() }
}

// tellChildren tells the child workflows of the current turn still running
// that the loop answers now, and why: each answers from what it has
// (BigQueryAgent's stop signal). A budget cut does not: a child answers by
// its own deadline and limits, with a final model turn.
func (l *toolLoop) tellChildren(why string) {
	for _, f := range l.children {
		if !f.IsReady() {
			f.SignalChildWorkflow(l.outer, investigation.UpdateStop, why)
		}
	}
}

// callTools runs the calls of one model turn and returns their transcript
// refs in call order. Calls start together, except that a call whose
// arguments use ref:<name> starts once the calls it names have finished. A
// call does not run when its refs are unknown, ambiguous or cyclic; when it
// is identical to an earlier call of this workflow (served from that call's
// result) or of the same turn (served once both are done), unless it acts
// (each action is the analyst's to decide); or when the budget allows no
// more calls. A call that still fails after its retries becomes an error
// result for the model, not a failed loop.
// cutBy, once the calls were cut short, says why.
func (l *toolLoop) callTools(ctx workflow.Context, turnKey string, calls []toolcall.Call, res *loopResult, cutBy func() string) []activities.Ref {
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("%s-c%d", turnKey, i+1)
		}
	}
	pipe := planPipeline(calls, func(name string) bool {
		// No recorded history has a ref in such a call's arguments (the
		// only recorded ref, in pipeline, is urlscan_result's), so refusing
		// them changes no recorded command (design/versioning.md).
		k := l.host.tool(name).Kind
		return k != toolcall.Analyst && k != toolcall.ChildWorkflow
	})
	allowed := l.host.callsLeft(res.Calls)
	futures := make([]workflow.Future, len(calls))
	reused := make([]bool, len(calls))  // served from another call's result
	started := make([]bool, len(calls)) // run, as an activity, a child or a question
	firstOf := map[string]int{}         // toolcall.Key -> first call of this turn with it
	for i, c := range calls {
		key := fmt.Sprintf("%s-c%d", turnKey, i+1)
		summary := toolcall.Summarize(c.Name, c.Args)
		f, settle := workflow.NewFuture(ctx)
		futures[i] = f
		e := investigation.Event{Kind: investigation.EventToolCall, Step: l.label, Tool: c.Name, Text: summary}
		why, bad := pipe.bad[i]
		independent := len(pipe.deps[i]) == 0 && !bad
		// An action is never served from another call: an earlier result
		// is not this call's outcome (it may have been undone since), and
		// each one is the analyst's to decide. No gate: no recorded history
		// repeats an action (mcp, mcp-changed: one block_ip each), and no
		// release has run the action path (design/versioning.md).
		reusable := independent && !l.host.tool(c.Name).Acts
		earlier, seen := l.results.get(toolcall.Key(c))
		twin, repeated := firstOf[toolcall.Key(c)]
		switch {
		case !l.host.offers(c.Name) && planGuarded(ctx):
			// Text the model read may steer it to a registered tool its
			// step was not given: it would run, and count as evidence.
			settle.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"the call did not run: %q is not offered in this step; call only the tools declared to you", clip.String(c.Name, maxNamedTool)), "NotOffered", nil))
		case bad:
			settle.SetError(temporal.NewNonRetryableApplicationError("the call did not run: "+why, "BadRef", nil))
		case reusable && seen:
			reused[i] = true
			settle.Set(activities.ToolOutput{Key: earlier, OK: true}, nil)
		case reusable && repeated:
			reused[i] = true
			settle.Chain(futures[twin])
		case allowed <= 0:
			settle.SetError(temporal.NewNonRetryableApplicationError(
				"the call did not run: this exchange's tool-call budget is spent; answer from the results you have", "BudgetSpent", nil))
		default:
			allowed--
			started[i] = true
			l.host.callStarted()
			if reusable {
				firstOf[toolcall.Key(c)] = i
			}
			t := l.host.tool(c.Name)
			if t.Kind == toolcall.ChildWorkflow {
				e.Child = childID(l.session, key)
			}
			l.host.emit(e) // before the call's own events (an ask_user question)
			l.start(ctx, settle, futures, calls, pipe, i, key, summary, t, cutBy)
			continue
		}
		l.host.emit(e)
	}
	out := make([]activities.Ref, len(calls))
	for i, f := range futures {
		out[i] = l.collect(ctx, fmt.Sprintf("%s-c%d", turnKey, i+1), calls[i], f, reused[i], started[i], len(pipe.deps[i]) == 0, res, cutBy)
	}
	return out
}

// collect waits for one call and returns its transcript ref, counting it
// and reporting its result.
func (l *toolLoop) collect(ctx workflow.Context, key string, c toolcall.Call, f workflow.Future, reused, started, independent bool, res *loopResult, cutBy func() string) activities.Ref {
	var out activities.ToolOutput
	err := f.Get(ctx, &out)
	if started {
		res.Calls++
		l.host.callDone(ctx, key, out, err)
	}
	if (started || reused) && !slices.Contains(res.Called, c.Name) {
		res.Called = append(res.Called, c.Name)
	}
	if (started || reused) && err == nil && out.OK && !out.Unperformed {
		// A failed, refused, cut or undone call is no result evidence may cite.
		res.produced(c.Name, reused && l.exchange != "" && !strings.HasPrefix(out.Key, l.exchange))
	}
	if err != nil {
		msg := message(err)
		switch {
		case temporal.IsCanceledError(err):
			msg = "the call was cut short: " + cmp.Or(cutBy(), "the investigation is ending")
		case !strings.HasPrefix(msg, "the call did not run"):
			msg = "the tool failed after retries: " + msg
		}
		l.host.emit(investigation.Event{Kind: investigation.EventToolResult, Step: l.label, Tool: c.Name, Text: c.Name + ": " + msg})
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
		l.host.emit(investigation.Event{Kind: investigation.EventToolResult, Step: l.label, Tool: c.Name, Text: c.Name + ": served from the identical earlier call"})
		return ref
	}
	// An unperformed call's stored result (a sub-agent's answer no query
	// backs) serves no later call: only new histories hold one, so no gate.
	if out.OK && !out.Unperformed && out.Key != "" && independent && !l.host.tool(c.Name).Acts {
		l.results.put(toolcall.Key(c), out.Key)
	}
	text := fmt.Sprintf("%s: %d bytes", c.Name, out.Bytes)
	switch {
	case !out.OK:
		text = c.Name + " error: " + out.Error
	case out.Truncated:
		text += " (truncated)"
	}
	if out.ScannedBytes > 0 {
		text += ", scanned " + size.Bytes(out.ScannedBytes)
	}
	if out.Link != nil {
		text += fmt.Sprintf(" (child workflow %s)", out.Link.WorkflowID)
	}
	l.host.emit(investigation.Event{Kind: investigation.EventToolResult, Step: l.label, Tool: c.Name, Text: text})
	return ref
}

// produced records that a call of tool returned a result, in this
// exchange or (earlier) served from an earlier exchange's call.
func (res *loopResult) produced(tool string, earlier bool) {
	names := &res.Tools
	if earlier {
		names = &res.Earlier
	}
	if !slices.Contains(*names, tool) {
		*names = append(*names, tool)
	}
}

// start runs call i (an activity, a child workflow or a question to the
// analyst) and settles its future with the outcome; a call with refs first
// waits, in a coroutine, for the calls it uses.
func (l *toolLoop) start(ctx workflow.Context, settle workflow.Settable, futures []workflow.Future, calls []toolcall.Call, pipe pipeline, i int, key, summary string, t toolcall.Tool, cutBy func() string) {
	c := calls[i]
	siblings := 0
	for _, later := range calls[i+1:] {
		if later.Name == c.Name {
			siblings++
		}
	}
	launch := func(ctx workflow.Context, refs, inline map[string]string) workflow.Future {
		if t.Kind == toolcall.ChildWorkflow && stopAnswersAtOnce(ctx) {
			// A child runs under the loop's context: the watch tells it to
			// answer (tellChildren) rather than cancel it.
			if ctx.Err() != nil {
				f, settle := workflow.NewFuture(ctx)
				settle.SetError(temporal.NewNonRetryableApplicationError("the call did not run: "+cmp.Or(cutBy(), "the investigation is ending"), "Cut", nil))
				return f
			}
			f := l.host.startSpecial(l.outer, key, t, c, siblings)
			if cf, ok := f.(workflow.ChildWorkflowFuture); ok {
				l.children = append(l.children, cf)
				return decodedChild(l.outer, cf)
			}
			return f
		}
		if t.Kind == toolcall.Analyst || t.Kind == toolcall.ChildWorkflow {
			f := l.host.startSpecial(ctx, key, t, c, siblings)
			if cf, ok := f.(workflow.ChildWorkflowFuture); ok {
				return decodedChild(ctx, cf)
			}
			return f
		}
		// Recorded: only an outside tool the plan recorded has a declaration
		// (State.tool gives an unknown name none), and CallTool runs no
		// outside tool without it.
		in := activities.ToolInput{
			Session: l.session, Key: key, Call: c, MaxResultBytes: l.maxBytes, Toolset: l.host.toolset(), Refs: refs, InlineRefs: inline,
			ScanBytesLeft: l.host.scanFor(key, c, siblings), Recorded: t.Declared != nil,
		}
		if t.Kind == toolcall.LocalActivity {
			return workflow.ExecuteLocalActivity(localToolOptions(ctx, "tool "+summary, localToolAttempt), a.CallTool, in)
		}
		call := func(ctx workflow.Context, approval string) workflow.Future {
			in := in
			in.Approved = approval
			opts := toolOptions(ctx, "tool "+summary, l.host.toolTimeout(c.Name))
			if t.TaskQueue != "" {
				opts = providerToolOptions(ctx, "tool "+summary, l.host.toolTimeout(c.Name), l.host.timeLeft(ctx))
			}
			if t.Acts {
				opts = once(opts) // one approval, one attempt (gateAction)
			}
			return workflow.ExecuteActivity(onQueue(opts, t.TaskQueue), a.CallTool, in)
		}
		if t.Acts {
			return l.host.gate(ctx, key, c, call) // mcp.go: the analyst approves it first
		}
		return call(ctx, "")
	}
	if len(pipe.deps[i]) == 0 {
		settle.Chain(launch(ctx, nil, nil))
		return
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		refs, inline := map[string]string{}, map[string]string{}
		inlineBytes := 0
		for _, ref := range pipe.refs[i] {
			var dep activities.ToolOutput
			if err := futures[ref.call].Get(ctx, &dep); err != nil || !dep.OK {
				settle.SetError(temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("the call did not run: %s%s refers to %s, which failed", toolcall.RefPrefix, ref.name, calls[ref.call].ID), "BadRef", nil))
				return
			}
			// A result the workflow produced itself (the analyst's answer,
			// an action that did not run) has no transcript key: it goes to
			// CallTool whole. No recorded history refers to one (the only
			// recorded ref names a stored result), and otherwise only the
			// activity's input changes, not a command (design/versioning.md).
			switch {
			case dep.Key != "":
				refs[ref.name] = dep.Key
			case dep.Inline != "":
				inline[ref.name] = dep.Inline
				inlineBytes += len(dep.Inline)
			default:
				settle.SetError(temporal.NewNonRetryableApplicationError(
					fmt.Sprintf("the call did not run: %s%s names a result that is not stored; write the value itself", toolcall.RefPrefix, ref.name), "BadRef", nil))
				return
			}
		}
		if inlineBytes > maxInlineRefBytes {
			settle.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"the call did not run: the analyst's answers and decisions it refers to are %d bytes together, more than one call may carry (%d); write the values it needs itself",
				inlineBytes, maxInlineRefBytes), "BadRef", nil))
			return
		}
		settle.Chain(launch(ctx, refs, inline))
	})
}

// decodedChild settles with a child's result as its own future decodes it,
// with the child's serialization context. A future chained to the child's
// would decode the payload with the parent's, and with payload keys the
// parent refuses a payload bound to the child's workflow ID.
func decodedChild(ctx workflow.Context, cf workflow.ChildWorkflowFuture) workflow.Future {
	f, settle := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		var out activities.ToolOutput
		err := cf.Get(ctx, &out)
		settle.Set(out, err)
	})
	return f
}
