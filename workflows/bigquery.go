package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/log"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/activities/bigquery/bqtools"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/size"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// bq only names the sub-agent's activity methods; the worker registers the
// real value.
var bq *bigquery.Activities

// Sub-agent limits.
const (
	bigQueryMaxIterations = 10
	bigQueryMaxToolCalls  = 20
	// subAgentAnswerAllowance is how long a sub-agent may run past its
	// deadline: a model turn in flight at the deadline, the final turn
	// (each within its retry budget) and DeliverAnswer. Its execution
	// timeout is its deadline plus this, a backstop only: it answers by
	// the deadline by itself, and a timeout shorter than that would kill
	// it before its answer.
	subAgentAnswerAllowance = 2*llmRetryBudget + storeRetryBudget
	// bigQueryToolAttempt bounds one attempt of a sub-agent tool call: a
	// query runs under its own BigQuery job timeout (bqtools job_timeout),
	// which the config holds at least a minute below it.
	bigQueryToolAttempt = bqtools.CallAttempt
)

// startBigQueryAgent starts the BigQuery sub-agent for one bigquery_agent
// call as a child workflow. Its ID is derived from the parent's session
// (its ID, or the ID and a suffix) and the call's transcript key, so two
// calls never collide, a replayed or retried parent never starts a second
// child for the same call, and a new run under a closed run's ID never
// meets its children (the child's session is its own ID). The
// parent-close policy is REQUEST_CANCEL: the child's answer is only useful
// to this parent, and cancellation (unlike termination) lets it stop
// between activities. Its scan budget is a loan from the investigation's
// (lendScan), shared with the sub-agents that run alongside it.
func (r *run) startBigQueryAgent(ctx workflow.Context, step, key string, c toolcall.Call, siblings int) workflow.Future {
	request, _ := c.Args["request"].(string)
	request = strings.TrimSpace(request)
	var refuse error
	switch {
	case request == "":
		refuse = temporal.NewNonRetryableApplicationError(toolcall.BigQueryAgent+` needs a "request": a concrete log question`, "BadArguments", nil)
	case r.scanLeft() < 0:
		refuse = temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the call did not run: the investigation's BigQuery scan budget of %s (--max-scan-bytes) is spent; answer from the results you have",
			size.Bytes(r.Input.Limits.MaxScanBytes)), "BudgetSpent", nil)
	}
	if refuse != nil {
		f, s := workflow.NewFuture(ctx)
		s.SetError(refuse)
		return f
	}
	deadline := r.budgetDeadline(ctx)
	opts := workflow.ChildWorkflowOptions{
		WorkflowID: childID(r.session, key),
		// The model's request, as Markdown the Web UI renders: never a
		// link (termtext.Markdown). A child's summary is user metadata of
		// its start command, which replay does not compare (the SDK
		// matches a start by workflow type only): no gate.
		StaticSummary:            termtext.MarkdownClipped("BigQuery: "+termtext.Line(request), 200),
		ParentClosePolicy:        enums.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WorkflowExecutionTimeout: max(deadline.Sub(workflow.Now(ctx)), 0) + subAgentAnswerAllowance,
		// Wait for a cancelled sub-agent to end (as Canceled), so the run
		// tree is closed when the investigation is.
		WaitForCancellation: true,
	}
	if slices.Contains(r.Input.SearchAttributes, investigation.SearchAttribute) {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(investigation.SearchAttribute).ValueSet(r.Input.AlertID))
	}
	return workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), investigation.BigQueryWorkflowName, bigquery.Request{
		Request:        request,
		ParentSession:  r.session,
		ResultKey:      key,
		CallID:         c.ID,
		MaxIterations:  bigQueryMaxIterations,
		MaxToolCalls:   bigQueryMaxToolCalls,
		MaxResultBytes: r.Input.Limits.MaxToolResultBytes,
		Deadline:       deadline,
		ScanBytesLeft:  r.lendScan(step, key, siblings),
	})
}

// childID is the workflow ID of the sub-agent run for one call: the
// parent's session and the call's transcript key.
func childID(parent, key string) string { return parent + "-bq-" + key }

// checkCaller refuses a sub-agent that its investigation did not start: it
// writes its answer into ParentSession's transcript under ResultKey (first
// write wins), so one started by anyone who may start workflows could
// answer for another investigation's future call. The server records the
// parent, which no client can name; ParentSession must be that parent's
// session and the run's ID the one the parent gives it (childID).
func checkCaller(info *workflow.Info, in bigquery.Request) error {
	parent := info.ParentWorkflowExecution
	switch {
	case parent == nil:
		return fmt.Errorf("the BigQuery sub-agent runs only as the child of an investigation; %s was started on its own", info.WorkflowExecution.ID)
	case in.ParentSession == "" || investigation.CheckSession(parent.ID, in.ParentSession) != nil:
		return fmt.Errorf("the BigQuery sub-agent %s names session %q, which is not its parent %s's", info.WorkflowExecution.ID, clip.String(in.ParentSession, 200), parent.ID)
	case in.ResultKey == "" || info.WorkflowExecution.ID != childID(in.ParentSession, in.ResultKey):
		return fmt.Errorf("the BigQuery sub-agent %s does not have the workflow ID its parent gives the call %q", info.WorkflowExecution.ID, clip.String(in.ResultKey, 200))
	}
	return nil
}

// BigQueryAgent answers one log question: it recalls memories relevant to
// the request, runs its own tool loop over BigQuery, introspects over the
// whole session to learn (best effort: a failure never fails the
// sub-agent), and stores its answer as the parent's tool result, linked to
// this run. At its deadline it cuts its calls short and answers from what
// it has, without learning; learning that begins before the deadline ends
// by it (learnOptions), since the parent waits for the answer. A stop signal from its parent (the analyst
// stopped the investigation) cuts its calls short too, lets a model turn in
// flight finish and answers from what it has without another model call;
// one that reaches it while it learns skips what has not begun (learn).
// A cancellation ends it as Canceled, with no model call and no answer: the
// parent that cancels it does not wait for one.
func BigQueryAgent(ctx workflow.Context, in bigquery.Request) (activities.ToolOutput, error) {
	info := workflow.GetInfo(ctx)
	// Refused before any command: every recorded sub-agent was started by
	// its investigation under childID, so no recorded history reaches the
	// refusal and no gate is needed (versioning.md).
	if err := checkCaller(info, in); err != nil {
		return activities.ToolOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrInvestigationFailed, nil)
	}
	h := &subAgent{session: info.WorkflowExecution.ID, in: in, log: workflow.GetLogger(ctx)}
	// Histories recorded before answered after a cancellation, with a
	// final model turn.
	h.cancelEnds = workflow.GetVersion(ctx, "sub-agent-cancel-is-cancel", workflow.DefaultVersion, 1) == 1
	if err := workflow.SetQueryHandler(ctx, investigation.ProgressQuery, progressQuery(func(after int) ([]investigation.Event, error) {
		return page(h.events, after), nil
	})); err != nil {
		return activities.ToolOutput{}, err
	}
	h.listen(ctx)
	if h.in.MaxIterations <= 0 {
		h.in.MaxIterations = bigQueryMaxIterations
	}
	if h.in.MaxResultBytes <= 0 {
		h.in.MaxResultBytes = investigation.DefaultMaxToolResultBytes
	}
	if h.in.MaxToolCalls <= 0 {
		h.in.MaxToolCalls = bigQueryMaxToolCalls
	}

	err := workflow.ExecuteActivity(bestEffortOptions(ctx, "recall memories"), bq.RecallMemories, bigquery.RecallInput{Request: in.Request}).Get(ctx, &h.recall)
	if err != nil {
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: "Memory recall failed, continuing without memories: " + message(err)})
	}
	// No gate for the embeddings' usage: see billedUsage.
	h.usage = h.usage.Add(billedUsage(h.recall.Usage, err))
	ids := make([]string, len(h.recall.Memories))
	for i, m := range h.recall.Memories {
		ids[i] = m.ID
	}
	h.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("Recalled %d memories", len(ids)), Notes: ids})

	l := &toolLoop{host: h, session: h.session, prefix: "bq", label: "bigquery", maxIter: h.in.MaxIterations, maxBytes: h.in.MaxResultBytes, results: &Reuse{}}
	res, err := l.run(ctx)
	switch {
	case ctx.Err() != nil && h.cancelEnds:
		return activities.ToolOutput{}, h.cancelled()
	case err != nil:
		// The failure carries what the sub-agent's model calls were billed
		// for, which the parent charges (billedUsage).
		return activities.ToolOutput{}, temporal.NewNonRetryableApplicationError(
			"the BigQuery sub-agent failed: "+message(err), ErrInvestigationFailed, nil, h.usage)
	case ctx.Err() != nil:
		h.emit(investigation.Event{Kind: investigation.EventStop, Text: "answered early: " + res.Cut})
		ctx, _ = workflow.NewDisconnectedContext(ctx) // deliver what it has
	case res.Cut != "":
		h.emit(investigation.Event{Kind: investigation.EventStop, Text: "answered early: " + res.Cut})
	default:
		h.learn(ctx, res) // only a whole session is worth learning from
		if ctx.Err() != nil && h.cancelEnds {
			return activities.ToolOutput{}, h.cancelled()
		}
	}

	// An answer no query backs is the model's alone, which the request
	// (alert text) may have steered: no evidence a verdict may cite.
	// Neither changes a command (an activity's input and this run's
	// result), so no gate.
	noQuery := !slices.Contains(res.Tools, toolcall.BigQueryQuery)
	var out activities.ToolOutput
	err = workflow.ExecuteActivity(storeOptions(ctx, "deliver answer"), bq.DeliverAnswer, bigquery.DeliverInput{
		ParentSession:  in.ParentSession,
		ResultKey:      in.ResultKey,
		CallID:         in.CallID,
		Tool:           toolcall.BigQueryAgent,
		Answer:         res.Text,
		Link:           activities.ChildLink{WorkflowID: h.session, RunID: info.WorkflowExecution.RunID},
		MaxResultBytes: in.MaxResultBytes,
		NoQuery:        noQuery,
	}).Get(ctx, &out)
	if ctx.Err() != nil && h.cancelEnds {
		return activities.ToolOutput{}, h.cancelled()
	}
	out.ScannedBytes, out.Usage = h.scanned, h.usage
	out.Unperformed = out.Unperformed || noQuery
	return out, err
}

// cancelled records that the sub-agent was cancelled and returns the error
// that ends it as Canceled.
func (h *subAgent) cancelled() error {
	h.emit(investigation.Event{Kind: investigation.EventStop, Text: "cancelled: no answer"})
	return temporal.NewCanceledError("the BigQuery sub-agent was cancelled")
}

// maxStopReason bounds the reason a stop signal carries.
const maxStopReason = 1 << 10

// listen takes the stop signal (investigation.UpdateStop, read like the
// investigation's: a JSON string or {"text": "..."}, the reason) that the
// parent sends when its loop must answer: from then on the sub-agent
// answers from what it has. `temporal workflow signal --name stop` does
// the same by hand.
func (h *subAgent) listen(ctx workflow.Context) {
	stops := workflow.GetSignalChannel(ctx, investigation.UpdateStop)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var in signalInput
			stops.Receive(ctx, &in)
			reason, err := signalText(in.value)
			switch {
			case in.refused != nil && !takesPayloadless(ctx, in.refused):
				h.noteSignal(fmt.Sprintf("%s signal refused: %v", investigation.UpdateStop, in.refused))
			case err != nil:
				h.noteSignal(fmt.Sprintf("%s signal ignored: %v", investigation.UpdateStop, err))
			case h.stopped == "":
				h.stopped = clip.String(cmp.Or(strings.TrimSpace(reason), "the investigation stopped waiting for this answer"), maxStopReason)
				h.emit(investigation.Event{Kind: investigation.EventStop, Text: h.stopped})
			}
		}
	})
}

// maxSignalNotes bounds the notes about stop signals the sub-agent refused
// or ignored: anyone who may signal workflows can send thousands, and its
// events (memory, each progress page) are otherwise bounded by its
// iterations and tool calls.
const maxSignalNotes = 10

// noteSignal notes a refused or ignored stop signal, the first
// maxSignalNotes of them, then once that later ones go unnoted. Events are
// only logged and served by the progress query, never an activity's input
// (the sub-agent writes no progress to the store): no command changes, so
// no gate.
func (h *subAgent) noteSignal(text string) {
	h.signalNotes++
	switch {
	case h.signalNotes <= maxSignalNotes:
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: text})
	case h.signalNotes == maxSignalNotes+1:
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf(
			"further stop signals that are refused or ignored are not noted (%d were)", maxSignalNotes)})
	}
}

// subAgent is the BigQuery sub-agent's run and its tool loop's host.
type subAgent struct {
	session string
	in      bigquery.Request
	recall  bigquery.Recall
	events  []investigation.Event
	log     log.Logger
	// loans is the scan budget lent to its queries still running.
	loans loans
	// scanned is what this run's queries scanned in BigQuery, usage what
	// its model calls used.
	scanned int64
	usage   investigation.Usage
	// stopped is why the parent told the sub-agent to answer now (its stop
	// signal); cancelEnds says a cancellation ends it without an answer.
	stopped    string
	cancelEnds bool
	// signalNotes counts the stop signals refused or ignored (noteSignal).
	signalNotes int
}

// learn introspects over the whole session and saves what it learned; both
// are best effort. A stop skips what has not begun: the parent concludes
// once the sub-agent answered, so its conclusion follows the stop by at
// most the model call in flight (durability.md). So does the deadline:
// learning ends by it (learnOptions).
func (h *subAgent) learn(ctx workflow.Context, res loopResult) {
	if h.stopSkipsLearning(ctx) {
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: "nothing learned: " + h.stopped})
		return
	}
	introCtx, ok := h.learnOptions(ctx, "introspect")
	if !ok {
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: "nothing learned: the investigation's time budget ran out"})
		return
	}
	var intro bigquery.Introspection
	err := workflow.ExecuteActivity(introCtx, bq.Introspect, bigquery.IntrospectInput{
		Session: h.session, Memories: h.recall.Memories, Transcript: res.Transcript,
	}).Get(ctx, &intro)
	h.usage = h.usage.Add(billedUsage(intro.Usage, err))
	if err != nil {
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: "Introspection failed; nothing learned this time: " + message(err)})
		return
	}
	if h.stopSkipsLearning(ctx) {
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: "what was learned is not saved: " + h.stopped})
		return
	}
	updateCtx, ok := h.learnOptions(ctx, "update memories")
	if !ok {
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: "what was learned is not saved: the investigation's time budget ran out"})
		return
	}
	var changes bigquery.MemoryChanges
	// ParentSession (the votes are the investigation's) needs no version
	// gate: it changes no command, only the activity's input, which replay
	// does not compare; an input recorded without it votes as the run.
	err = workflow.ExecuteActivity(updateCtx, bq.UpdateMemories, bigquery.MemoryUpdate{
		Session: h.session, ParentSession: h.in.ParentSession, Request: h.in.Request, Claims: intro.Claims, Helpful: intro.Helpful, Harmful: intro.Harmful,
	}).Get(ctx, &changes)
	h.usage = h.usage.Add(billedUsage(changes.Usage, err))
	if err != nil {
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: "Saving memories failed: " + message(err)})
		return
	}
	learned := fmt.Sprintf("Proposed %d claims for review (starter memory list --proposed)", len(changes.Saved))
	switch approved := changes.ApprovedCount(); {
	case approved == len(changes.Saved) && approved > 0:
		learned = fmt.Sprintf("Learned %d claims, approved automatically", approved)
	case approved > 0:
		learned = fmt.Sprintf("Learned %d claims, approved automatically; proposed %d for review (starter memory list --proposed)", approved, len(changes.Saved)-approved)
	}
	h.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("%s; %d helpful, %d harmful memories; %d pruned",
		learned, len(intro.Helpful), len(intro.Harmful), len(changes.Deleted))})
}

// stopSkipsLearning says the parent's stop came before learning (or its
// saving, UpdateMemories: embedding calls) began, and the sub-agent answers
// instead. Asked only once stopped; histories recorded before its gate
// learned on after a stop.
func (h *subAgent) stopSkipsLearning(ctx workflow.Context) bool {
	return h.stopped != "" && workflow.GetVersion(ctx, "stop-skips-learning", workflow.DefaultVersion, 1) == 1
}

// learnMinimum is the least time before the deadline that a learning
// activity begins with: a model call seldom answers in less.
const learnMinimum = 30 * time.Second

// learnOptions are the options of a learning activity (bestEffortOptions),
// its budget bounded by the time left before the deadline, so learning
// ends by it: the parent waits for the answer, which follows. ok false says
// too little is left to begin. An activity's options are no part of the
// command replay matches; the skip is, so it is asked only with too little
// left (histories recorded before its gate learned with the whole budget).
func (h *subAgent) learnOptions(ctx workflow.Context, summary string) (_ workflow.Context, ok bool) {
	ctx = bestEffortOptions(ctx, summary)
	if h.in.Deadline.IsZero() {
		return ctx, true
	}
	left := h.in.Deadline.Sub(workflow.Now(ctx))
	switch {
	case left >= bestEffortBudget:
		return ctx, true
	case left < learnMinimum:
		return ctx, workflow.GetVersion(ctx, "deadline-skips-learning", workflow.DefaultVersion, 1) == workflow.DefaultVersion
	}
	opts := workflow.GetActivityOptions(ctx)
	opts.ScheduleToCloseTimeout = left
	opts.StartToCloseTimeout = min(opts.StartToCloseTimeout, left)
	return workflow.WithActivityOptions(ctx, opts), true
}

func (h *subAgent) modelTurn(ctx workflow.Context, iter int, key string, transcript []activities.Ref, final bool) (activities.TurnOutput, error) {
	var out activities.TurnOutput
	err := workflow.ExecuteActivity(llmOptions(ctx, fmt.Sprintf("bigquery turn %d", iter)), bq.SubAgentTurn, bigquery.SubAgentTurnInput{
		Session:    h.session,
		Key:        key,
		Request:    h.in.Request,
		Memories:   h.recall.Memories,
		Transcript: transcript,
		Final:      final,
	}).Get(ctx, &out)
	h.usage = h.usage.Add(billedUsage(out.Usage, err))
	return out, err
}

// mustAnswer says why the sub-agent must answer now: its parent told it
// to, its deadline passed, or it used its tool calls. A cancelled sub-agent
// does not answer (histories recorded before did).
func (h *subAgent) mustAnswer(ctx workflow.Context, loopCalls int) string {
	switch {
	case ctx.Err() != nil && h.cancelEnds:
		return ""
	case ctx.Err() != nil:
		return "the investigation stopped waiting for this answer"
	case h.stopped != "":
		return h.stopped
	case !h.in.Deadline.IsZero() && !workflow.Now(ctx).Before(h.in.Deadline):
		return "the investigation's time budget ran out"
	case loopCalls >= h.in.MaxToolCalls:
		return fmt.Sprintf("the sub-agent used its %d tool calls", h.in.MaxToolCalls)
	}
	return ""
}

// answersAsIs: told by its parent to answer, the sub-agent answers from
// what it has, without another model call.
func (h *subAgent) answersAsIs(ctx workflow.Context) bool { return h.stopped != "" && ctx.Err() == nil }

// language is English: the sub-agent answers the parent's model, in the
// language of its own prompts.
func (h *subAgent) language() string { return "" }

func (h *subAgent) deadline(workflow.Context) (time.Time, bool) {
	return h.in.Deadline, !h.in.Deadline.IsZero()
}

func (h *subAgent) timeLeft(ctx workflow.Context) time.Duration {
	if h.in.Deadline.IsZero() {
		return 0
	}
	return max(h.in.Deadline.Sub(workflow.Now(ctx)), 0)
}

func (h *subAgent) callsLeft(loopCalls int) int { return h.in.MaxToolCalls - loopCalls }

func (h *subAgent) toolTimeout(string) time.Duration { return bigQueryToolAttempt }

func (h *subAgent) emit(e investigation.Event) {
	e.Seq = len(h.events) + 1
	h.events = append(h.events, e)
	logEvent(h.log, e)
}

func (h *subAgent) tool(name string) toolcall.Tool {
	return toolcall.Tool{Name: name, Kind: toolcall.Activity}
}

func (h *subAgent) toolset() string { return bigquery.Toolset }

// offers: every tool of the sub-agent's toolset is declared to its turns
// (SubAgentTurn), and CallTool answers any other name as unknown.
func (h *subAgent) offers(string) bool { return true }

// gate: the sub-agent's tools only read; none acts.
func (h *subAgent) gate(ctx workflow.Context, _ string, _ toolcall.Call, run func(workflow.Context, string) workflow.Future) workflow.Future {
	return run(ctx, "")
}

func (h *subAgent) scanLeft() int64 {
	if h.in.ScanBytesLeft <= 0 {
		return h.in.ScanBytesLeft
	}
	return bytesLeft(h.in.ScanBytesLeft, h.scanned)
}

func (h *subAgent) callStarted() {}

// callDone charges a query that failed after its retries its whole loan:
// its job may have run and been billed, and the bytes did not come back.
// No gate: the sub-agent's scan budget only sets its queries' inputs
// (scanFor), never which commands it emits.
func (h *subAgent) callDone(_ workflow.Context, key string, out activities.ToolOutput, err error) {
	lent := h.loans.end(key)
	h.scanned += out.ScannedBytes
	if err != nil {
		h.scanned += lent
	}
}

// scanFor lends each query a share of what the sub-agent may still scan,
// with the later queries of its turn, so queries that run together stay
// within it; other tools scan nothing.
func (h *subAgent) scanFor(key string, c toolcall.Call, siblings int) int64 {
	if c.Name != toolcall.BigQueryQuery {
		return h.scanLeft()
	}
	return h.loans.lend(key, "", h.scanLeft(), 1+siblings)
}

func (h *subAgent) startSpecial(ctx workflow.Context, _ string, _ toolcall.Tool, c toolcall.Call, _ int) workflow.Future {
	f, settle := workflow.NewFuture(ctx)
	settle.SetError(temporal.NewNonRetryableApplicationError("the sub-agent cannot run "+c.Name, "UnknownTool", nil))
	return f
}
