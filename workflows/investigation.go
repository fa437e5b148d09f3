// Package workflows holds the Investigation workflow: Plan & Execute with
// reflection, every phase a retriable activity, plan updates applied here in
// deterministic code.
package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// DefaultQuestion is the request when the analyst gives none.
const DefaultQuestion = "Investigate this alert thoroughly: establish what happened, whether it is malicious, its scope and impact, and what to do next."

// ErrInvestigationFailed is the error type of a failed investigation.
const ErrInvestigationFailed = "InvestigationFailed"

// a is only used to name activity methods; the worker registers the real value.
var a *activities.Activities

// run is the state of one investigation. It lives in workflow memory and is
// rebuilt by replay; queries read it, updates change it.
type run struct {
	in       investigation.Input
	session  string
	turn     int
	request  string
	phase    string
	tools    []string
	plan     plan.Plan
	insights []investigation.Insight
	// verdict and conclusion are the latest conclusion's (or direct
	// answer's, which keeps the verdict).
	verdict    *investigation.Verdict
	conclusion string
	// stepCap is the cap on the plan's steps for this exchange: the limit,
	// plus the steps an active plan already held when this exchange
	// continued it.
	stepCap  int
	events   []investigation.Event
	firstSeq int // Seq of events[0] minus one (events carried over continue-as-new)
	usage    investigation.Usage
	calls    int
	reused   int
	finished []investigation.StepRef
	// results maps a call (tool and arguments) to its stored result, so an
	// identical call later in the investigation is served from it.
	results map[string]string
	// toolPipeline enables ref: pipelines and call reuse (workflow version 1
	// of the "tool-pipeline" change; older histories replay without them).
	toolPipeline bool
	// conversation enables steering, ask_user, follow-ups and continue-as-new
	// (version 1 of the "conversation" change).
	conversation bool
	// guarded enables version 1 of the "guarded-runs" change: the tool-call
	// budget holds within a model turn, identical calls of one turn run
	// once, a step cut short by the budget ends the run, overlapping waits
	// for the analyst count once, a continued run runs a turn before it may
	// continue as new again, and the conversation history is kept under
	// maxHistoryBytes.
	guarded bool

	// Analyst input, written by update handlers.
	hints      []string
	followUps  []string
	questions  []*pendingQuestion
	nextQID    int
	approval   string // "", "approved" or "revise"
	feedback   string
	stopReason string

	// Run policy: when the current turn started and how long it waited for
	// the analyst (not counted against the time budget).
	turnStart  time.Time
	waited     time.Duration
	turnCalls  int
	activePlan *plan.Plan
	// waiting counts the ask_user questions waiting now; waitStart is when
	// the first of them began.
	waiting   int
	waitStart time.Time
	// ranTurn says this run has run a turn (planned or answered).
	ranTurn bool
	// updateIDs are the IDs of the steering inputs recorded, carried ones
	// first; carried marks how many came from earlier runs.
	updateIDs []string
	carried   int
}

// maxHistoryBytes bounds the conversation history that every later turn
// carries and shows the model: the oldest exchanges go first.
const maxHistoryBytes = 64 << 10

// maxCarriedUpdateIDs is how many recent steering input IDs a run hands to
// the next one; a client retries an input for 30 s at most.
const maxCarriedUpdateIDs = 200

// Investigation plans, executes each step with tools, reflects after each step
// and concludes; then it stays open for follow-up questions until it has been
// idle for Input.IdleTimeout, continuing as new when its history grows long.
// The analyst steers it with updates (hint, approve, revise, answer, stop,
// ask). It returns the last conclusion and the conversation history.
func Investigation(ctx workflow.Context, in investigation.Input) (investigation.Result, error) {
	in.Limits = in.Limits.WithDefaults()
	if in.Language == "" {
		in.Language = "en"
	}
	if strings.TrimSpace(in.Question) == "" {
		in.Question = DefaultQuestion
	}
	if in.IdleTimeout <= 0 {
		in.IdleTimeout = investigation.DefaultIdleTimeout
	}
	if in.AlertID == "" {
		return investigation.Result{}, temporal.NewNonRetryableApplicationError("the investigation has no alert ID", ErrInvestigationFailed, nil)
	}
	if _, ok := investigation.Languages[in.Language]; !ok {
		return investigation.Result{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("unsupported conclusion language %q", in.Language), ErrInvestigationFailed, nil)
	}
	r := &run{in: in, session: workflow.GetInfo(ctx).WorkflowExecution.ID, turn: len(in.History)/2 + 1, results: map[string]string{}}
	if c := in.Carry; c != nil {
		r.turn, r.activePlan, r.followUps, r.hints, r.insights, r.tools = c.Turn, c.ActivePlan, c.FollowUps, c.Hints, c.Insights, c.Tools
		r.firstSeq, r.usage, r.calls, r.stopReason = c.LastSeq, c.Usage, c.ToolCalls, c.Stop
		r.reused, r.nextQID, r.updateIDs, r.carried = c.Reused, c.Questions, c.UpdateIDs, len(c.UpdateIDs)
		for k, v := range c.Results {
			r.results[k] = v
		}
		if r.activePlan != nil {
			r.plan = r.activePlan.Clone()
		}
	}
	r.toolPipeline = workflow.GetVersion(ctx, "tool-pipeline", workflow.DefaultVersion, 1) >= 1
	r.conversation = workflow.GetVersion(ctx, "conversation", workflow.DefaultVersion, 1) >= 1
	r.guarded = workflow.GetVersion(ctx, "guarded-runs", workflow.DefaultVersion, 1) >= 1
	if err := workflow.SetQueryHandler(ctx, investigation.ProgressQuery, r.eventsAfter); err != nil {
		return investigation.Result{}, err
	}
	if r.conversation {
		if err := r.registerHandlers(ctx); err != nil {
			return investigation.Result{}, err
		}
	}

	var last investigation.Conclusion
	if in.Carry == nil {
		c, err := r.planTurn(ctx, in.Question)
		if err != nil {
			return investigation.Result{}, err
		}
		last = c
		if !r.conversation {
			return r.result(last), nil
		}
	}
	for r.stopReason == "" {
		r.phase = investigation.PhaseIdle
		r.setDetails(ctx, "idle: waiting for follow-up questions")
		if len(r.followUps) == 0 {
			r.emit(investigation.Event{Kind: investigation.EventIdle, Text: fmt.Sprintf("waiting up to %s for follow-up questions", in.IdleTimeout)})
		}
		got, err := workflow.AwaitWithTimeout(ctx, in.IdleTimeout, func() bool { return len(r.followUps) > 0 || r.stopReason != "" })
		if err != nil {
			return investigation.Result{}, err
		}
		if !got || r.stopReason != "" {
			break
		}
		// A continued run first runs a turn, so a low threshold cannot make
		// runs continue as new one after another without answering.
		long := workflow.GetInfo(ctx).GetCurrentHistoryLength() > in.Limits.MaxHistoryEvents || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		if long && (r.ranTurn || !r.guarded) {
			return investigation.Result{}, r.continueAsNew(ctx)
		}
		question := r.followUps[0]
		r.followUps = r.followUps[1:]
		c, err := r.followUp(ctx, question)
		if err != nil {
			return investigation.Result{}, err
		}
		last = c
	}
	// Let every update handler finish before completing: no input is lost.
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return investigation.Result{}, err
	}
	if r.stopReason != "" && len(r.followUps) > 0 {
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: "not answered, the investigation was stopped:", Items: r.followUps})
	}
	return r.result(last), nil
}

func (r *run) result(c investigation.Conclusion) investigation.Result {
	return investigation.Result{
		AlertID:     r.in.AlertID,
		Objective:   r.plan.Objective,
		Conclusion:  c.Markdown,
		Verdict:     r.verdict,
		Plan:        r.plan,
		Insights:    r.insights,
		History:     r.in.History,
		Usage:       r.usage,
		ToolCalls:   r.calls,
		ReusedCalls: r.reused,
	}
}

// continueAsNew hands the conversation, the active plan and every pending
// input to a fresh run of this workflow, after all handlers finished.
func (r *run) continueAsNew(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	in := r.in
	in.Carry = &investigation.Carry{
		Turn: r.turn, ActivePlan: r.activePlan, FollowUps: r.followUps, Hints: r.hints, Insights: r.insights, Tools: r.tools,
		LastSeq: r.firstSeq + len(r.events), Usage: r.usage, ToolCalls: r.calls, Stop: r.stopReason,
		Results: r.results, Reused: r.reused, Questions: r.nextQID, UpdateIDs: r.updateIDs[max(len(r.updateIDs)-maxCarriedUpdateIDs, 0):],
	}
	return workflow.NewContinueAsNewError(ctx, investigation.WorkflowName, in)
}

// planTurn runs one Plan & Execute turn for a request: plan (waiting for
// approval when asked), execute, conclude. The request and the conclusion
// join the conversation history.
func (r *run) planTurn(ctx workflow.Context, request string) (investigation.Conclusion, error) {
	r.beginTurn(ctx, request)
	if err := r.makePlan(ctx, request); err != nil {
		return investigation.Conclusion{}, failure("planning failed", err)
	}
	if r.in.ApprovePlan && r.turn == 1 {
		if err := r.awaitApproval(ctx, request); err != nil {
			return investigation.Conclusion{}, err
		}
	}
	endedEarly, err := r.executePlan(ctx)
	if err != nil {
		return investigation.Conclusion{}, err
	}
	return r.conclude(ctx, request, endedEarly)
}

func (r *run) beginTurn(ctx workflow.Context, request string) {
	r.ranTurn = true
	r.request = request
	r.phase = investigation.PhasePlanning
	r.turnStart = workflow.Now(ctx)
	r.waited = 0
	r.turnCalls = 0
	r.finished = nil
}

func (r *run) conclude(ctx workflow.Context, request, endedEarly string) (investigation.Conclusion, error) {
	r.phase = investigation.PhaseConcluding
	var c investigation.Conclusion
	current, earlier := r.splitInsights()
	if err := workflow.ExecuteActivity(llmOptions(ctx, "conclude"), a.Conclude, investigation.ConcludeInput{
		Session:    r.session,
		AlertID:    r.in.AlertID,
		Request:    request,
		Objective:  r.plan.Objective,
		Steps:      withoutResults(r.plan.Steps),
		Insights:   current,
		Earlier:    earlier,
		Language:   r.in.Language,
		EndedEarly: endedEarly,
		Hints:      r.hints,
	}).Get(ctx, &c); err != nil {
		return c, failure("writing the conclusion failed", err)
	}
	r.usage = r.usage.Add(c.Usage)
	r.setVerdict(ctx, c.Verdict)
	r.conclusion = c.Markdown
	r.emit(investigation.Event{Kind: investigation.EventConclusion, Text: c.Markdown, Verdict: c.Verdict})
	r.setDetails(ctx, "concluded")
	r.remember(request, "Objective: "+r.plan.Objective+"\n\n"+c.Markdown)
	active := r.plan.Clone()
	r.activePlan = &active
	return c, nil
}

// remember appends one exchange to the conversation history, dropping the
// oldest exchanges when the history grows past maxHistoryBytes.
func (r *run) remember(request, answer string) {
	r.in.History = append(append([]investigation.Message(nil), r.in.History...),
		investigation.Message{Role: "user", Text: request},
		investigation.Message{Role: "assistant", Text: answer},
	)
	r.turn++
	if !r.guarded {
		return
	}
	size := 0
	for _, m := range r.in.History {
		size += len(m.Text)
	}
	dropped := 0
	for size > maxHistoryBytes && len(r.in.History) > 2 {
		size -= len(r.in.History[0].Text) + len(r.in.History[1].Text)
		r.in.History = r.in.History[2:]
		dropped++
	}
	if dropped > 0 {
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf(
			"the %d oldest exchanges of the conversation were dropped to keep it under %d KiB", dropped, maxHistoryBytes>>10)})
	}
}

func (r *run) makePlan(ctx workflow.Context, request string) error {
	var out investigation.PlanOutput
	err := workflow.ExecuteActivity(llmOptions(ctx, "plan"), a.GeneratePlan, investigation.PlanInput{
		AlertID:    r.in.AlertID,
		Request:    request,
		History:    r.in.History,
		MaxSteps:   r.in.Limits.MaxSteps,
		ActivePlan: planWithoutResults(r.activePlan),
		Feedback:   r.feedback,
		Previous:   planWithoutResults(r.previousPlan()),
		Hints:      r.hints,
	}).Get(ctx, &out)
	if err != nil {
		return err
	}
	r.tools = out.Tools
	r.usage = r.usage.Add(out.Usage)
	notes := out.Notes
	if out.Continues && r.activePlan != nil {
		// Extend the active plan with the new steps (renumbered after it,
		// duplicates of earlier steps dropped).
		updates := make([]plan.Update, len(out.Plan.Steps))
		for i := range out.Plan.Steps {
			step := out.Plan.Steps[i]
			updates[i] = plan.Update{Type: plan.AddStep, Step: &step, Reason: "follow-up: " + request}
		}
		r.stepCap = len(r.activePlan.Steps) + r.in.Limits.MaxSteps
		merged, outcomes := plan.Apply(*r.activePlan, updates, plan.Limits{MaxSteps: r.stepCap, Tools: r.tools})
		for _, o := range outcomes {
			if !o.Applied {
				notes = append(notes, describeOutcome(o))
			}
		}
		notes = append(notes, "continues the active plan")
		r.plan = merged
	} else {
		r.plan = out.Plan
		r.stepCap = r.in.Limits.MaxSteps
	}
	p := r.plan.Clone()
	r.emit(investigation.Event{Kind: investigation.EventPlan, Plan: &p, Items: notes})
	r.setDetails(ctx, "planned")
	return nil
}

// previousPlan is the plan being revised, if the analyst asked for a revision.
func (r *run) previousPlan() *plan.Plan {
	if r.feedback == "" {
		return nil
	}
	p := r.plan.Clone()
	return &p
}

// executePlan runs pending steps until none is left, reflection says the
// objective is achieved, or the step cap is reached. It returns a reason when
// the run ended before the plan was finished.
func (r *run) executePlan(ctx workflow.Context) (string, error) {
	executed := 0
	r.phase = investigation.PhaseExecuting
	for {
		i := r.plan.Next()
		if i < 0 {
			return "", nil
		}
		if reason := r.exhausted(ctx, 0); reason != "" {
			r.plan.SkipPending("not run: " + reason)
			r.emit(investigation.Event{Kind: investigation.EventStop, Text: reason})
			return reason, nil
		}
		if executed >= r.in.Limits.MaxSteps {
			reason := fmt.Sprintf("the step cap of %d was reached", r.in.Limits.MaxSteps)
			r.plan.SkipPending(reason)
			r.emit(investigation.Event{Kind: investigation.EventNote, Text: "Stopping: " + reason})
			return reason, nil
		}
		executed++
		step := &r.plan.Steps[i]
		step.Status = plan.Running
		r.emit(investigation.Event{Kind: investigation.EventStep, Step: step.ID, Text: step.Description, Items: []string{"expected: " + step.Expected}})
		r.setDetails(ctx, "running "+step.ID)

		text, key, cut, err := r.executeStep(ctx, *step)
		if err != nil {
			return "", failure(step.ID+" failed", err)
		}
		step = &r.plan.Steps[i]
		step.Status = plan.Done
		step.Result = clip.String(text, r.in.Limits.MaxStepResultBytes)
		step.ResultKey = key
		r.finished = append(r.finished, investigation.StepRef{StepID: step.ID, Description: step.Description, Key: key})
		r.emit(investigation.Event{Kind: investigation.EventStepDone, Step: step.ID, Text: step.Result})
		if cut != "" && r.guarded {
			// The step answered early because the run's budget ran out (or
			// the analyst stopped it): conclude now, and say why.
			r.plan.SkipPending("not run: " + cut)
			r.emit(investigation.Event{Kind: investigation.EventStop, Text: cut})
			return cut, nil
		}

		if achieved := r.reflect(ctx, *step); achieved {
			reason := "reflection found the objective achieved after " + step.ID
			r.plan.SkipPending(reason)
			r.emit(investigation.Event{Kind: investigation.EventNote, Text: "Objective achieved: concluding early."})
			r.setDetails(ctx, "objective achieved")
			return "", nil
		}
		r.setDetails(ctx, "reflected on "+step.ID)
	}
}

// executeStep runs the step's tool loop. It returns the answer, the
// transcript key that stores it and, when the run's budget or the analyst
// cut the loop short, why.
func (r *run) executeStep(ctx workflow.Context, step plan.Step) (string, string, string, error) {
	l := &toolLoop{
		session:  r.session,
		prefix:   fmt.Sprintf("t%d-%s", r.turn, step.ID),
		label:    step.ID,
		maxIter:  r.in.Limits.MaxIterations,
		maxBytes: r.in.Limits.MaxToolResultBytes,
		pipeline: r.toolPipeline,
		results:  r.results,
		emit:     func(e investigation.Event) { r.emit(e) },
		child:    r.startBigQueryAgent,
		stop:     func(loopCalls int) string { return r.exhausted(ctx, loopCalls) },
		budget:   func(loopCalls int) int { return r.in.Limits.MaxToolCalls - r.turnCalls - loopCalls },
		guarded:  r.guarded,
		turn: func(ctx workflow.Context, iter int, key string, transcript []investigation.Ref, final bool) (investigation.TurnOutput, error) {
			var out investigation.TurnOutput
			in := investigation.TurnInput{
				Session:    r.session,
				Key:        key,
				AlertID:    r.in.AlertID,
				Objective:  r.plan.Objective,
				Step:       step,
				Earlier:    r.finished,
				Transcript: transcript,
				Final:      final,
				Hints:      r.hints,
			}
			if step.ID == answerStepID {
				in.Direct, in.Question, in.Language, in.History = true, r.request, r.in.Language, r.in.History
			}
			err := workflow.ExecuteActivity(llmOptions(ctx, fmt.Sprintf("%s turn %d", step.ID, iter)), a.ModelTurn, in).Get(ctx, &out)
			r.usage = r.usage.Add(out.Usage)
			return out, err
		},
	}
	if r.conversation {
		l.ask = func(ctx workflow.Context, c toolcall.Call) workflow.Future {
			return r.askUser(ctx, c, step.ID)
		}
	}
	text, key, err := l.run(ctx)
	r.calls += l.calls
	r.turnCalls += l.calls
	r.reused += l.reused
	return text, key, l.cut, err
}

// reflect asks the model to judge the finished step and applies its plan
// updates. A failed or malformed reflection never fails the investigation: the
// plan simply goes on unchanged.
func (r *run) reflect(ctx workflow.Context, step plan.Step) bool {
	var out investigation.Reflection
	current, earlier := r.splitInsights()
	var completed []plan.Step
	for _, s := range r.plan.WithStatus(plan.Done) {
		if s.ID != step.ID {
			completed = append(completed, s)
		}
	}
	err := workflow.ExecuteActivity(llmOptions(ctx, "reflect "+step.ID), a.Reflect, investigation.ReflectInput{
		Session:   r.session,
		Objective: r.plan.Objective,
		Step:      withoutResults([]plan.Step{step})[0],
		Completed: withoutResults(completed),
		Pending:   withoutResults(r.plan.WithStatus(plan.Pending)),
		Insights:  current,
		Earlier:   earlier,
		Steps:     len(r.plan.Steps),
		MaxSteps:  r.stepCap,
		Tools:     r.tools,
		Hints:     r.hints,
	}).Get(ctx, &out)
	if err != nil {
		r.emit(investigation.Event{Kind: investigation.EventNote, Step: step.ID, Text: "Reflection failed, continuing with the plan unchanged: " + message(err)})
		return false
	}
	r.usage = r.usage.Add(out.Usage)
	var fresh []string
	for _, in := range out.Insights {
		if in = strings.TrimSpace(in); in != "" {
			fresh = append(fresh, in)
			r.insights = append(r.insights, investigation.Insight{Turn: r.turn, Step: step.ID, Text: in})
		}
	}
	if len(fresh) > 0 {
		r.emit(investigation.Event{Kind: investigation.EventInsight, Step: step.ID, Items: fresh})
	}
	if len(out.PlanUpdates) > 0 {
		var outcomes []plan.Outcome
		r.plan, outcomes = plan.Apply(r.plan, out.PlanUpdates, plan.Limits{MaxSteps: r.stepCap, Tools: r.tools})
		items := make([]string, 0, len(outcomes))
		for _, o := range outcomes {
			items = append(items, describeOutcome(o))
		}
		r.emit(investigation.Event{
			Kind:      investigation.EventPlanUpdate,
			Step:      step.ID,
			Items:     items,
			Completed: plan.IDs(r.plan.WithStatus(plan.Done)),
			Pending:   plan.IDs(r.plan.WithStatus(plan.Pending)),
		})
	}
	return out.Achieved
}

func describeOutcome(o plan.Outcome) string {
	target := o.StepID
	if target == "" {
		target = o.Update.StepID
	}
	s := string(o.Update.Type)
	if target != "" {
		s += " " + target
	}
	if o.Update.Step != nil && o.Update.Step.Description != "" {
		s += ": " + o.Update.Step.Description
	}
	if !o.Applied {
		return s + " (dropped: " + o.Why + ")"
	}
	if o.Update.Reason != "" {
		s += " (" + o.Update.Reason + ")"
	}
	return s
}

// emit records a progress event and returns its sequence number. Numbers
// continue across continue-as-new, so a watcher never sees one twice.
func (r *run) emit(e investigation.Event) int {
	e.Seq = r.firstSeq + len(r.events) + 1
	e.Turn = r.turn
	r.events = append(r.events, e)
	return e.Seq
}

// eventsAfter answers the progress query: the events after seq `after` that
// this run holds (earlier ones are in the run before a continue-as-new).
func (r *run) eventsAfter(after int) ([]investigation.Event, error) {
	return page(r.events, after-r.firstSeq), nil
}

// page returns at most investigation.MaxProgressEvents events from index i.
func page(events []investigation.Event, i int) []investigation.Event {
	i = max(i, 0)
	if i >= len(events) {
		return nil
	}
	return events[i:min(len(events), i+investigation.MaxProgressEvents)]
}

// maxDetailsConclusion bounds the conclusion shown in the current details.
const maxDetailsConclusion = 8 << 10

// setDetails keeps the workflow's current details (shown in the Web UI) set
// to the plan's progress and, once concluded, the verdict and the latest
// conclusion.
func (r *run) setDetails(ctx workflow.Context, phase string) {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** — %d/%d steps done, %d tool calls\n\n", phase, r.plan.Count(plan.Done), len(r.plan.Steps), r.calls)
	if v := r.verdict; v != nil {
		fmt.Fprintf(&b, "**Verdict: %s** (%s confidence)\n\n", v.Verdict, v.Confidence)
	}
	fmt.Fprintf(&b, "Objective: %s\n\n", r.plan.Objective)
	for _, s := range r.plan.Steps {
		mark := map[plan.Status]string{plan.Done: "[x]", plan.Running: "[>]", plan.Cancelled: "[-]", plan.Skipped: "[-]"}[s.Status]
		if mark == "" {
			mark = "[ ]"
		}
		fmt.Fprintf(&b, "- %s %s: %s (%s)\n", mark, s.ID, s.Description, s.Status)
	}
	if r.conclusion != "" {
		fmt.Fprintf(&b, "\n---\n\n%s\n", clip.String(r.conclusion, maxDetailsConclusion))
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

// llmOptions are the activity options of a model call: retried with backoff
// (the activity turns 429/5xx into retryable errors that carry Retry-After as
// the next delay, and 400/401/403/404 into non-retryable ones), and retried
// on another worker within 30 s when its worker dies (heartbeats).
func llmOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 3 * time.Minute,
		HeartbeatTimeout:    30 * time.Second, // model calls heartbeat while they wait
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    8,
		},
	})
}

func toolOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		Summary:             clip.String(summary, 200),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    4,
		},
	})
}

// failure ends the investigation with one clear sentence built from the
// innermost application error.
func failure(what string, err error) error {
	return temporal.NewNonRetryableApplicationError(what+": "+message(err), ErrInvestigationFailed, nil)
}

// message returns the most specific human message in an activity error chain.
func message(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Message() != "" {
		return app.Message()
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return "timed out (" + to.TimeoutType().String() + ")"
	}
	return err.Error()
}
