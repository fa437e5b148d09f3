// Package workflows holds the orchestration: the Investigation workflow
// (Plan & Execute with reflection, steered by the analyst) and the BigQuery
// sub-agent it starts as a child workflow. Every phase is an activity; plan
// updates, budgets and steering are applied here, deterministically.
//
// The Investigation is split by concern: state.go (the one State struct),
// investigation.go (the run: start, idle, follow-ups, continue-as-new),
// plan.go, execute.go and conclude.go (the phases), followup.go (mode and
// direct answers), toolloop.go and pipeline.go (the tool-calling loop),
// steering.go and askuser.go (the analyst's input), budget.go, progress.go
// (events and the Web UI's details) and options.go (activity options and
// error text).
package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/log"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
)

// DefaultQuestion is the request when the analyst gives none.
const DefaultQuestion = "Investigate this alert thoroughly: establish what happened, whether it is malicious, its scope and impact, and what to do next."

// ErrInvestigationFailed is the error type of a failed investigation.
const ErrInvestigationFailed = "InvestigationFailed"

// a only names activity methods; the worker registers the real value.
var a *activities.Activities

// run is one Temporal run of an investigation: the State, carried across
// runs, plus what belongs to this run only.
type run struct {
	*State
	id      string                // the workflow ID
	session string                // the transcript and progress namespace: Input.Session, else the ID
	events  []investigation.Event // this run's latest progress, numbered from LastSeq+dropped+1
	dropped int                   // events of this run no longer kept (maxRunEvents)
	// ranTurn says this run has run an exchange (planned or answered).
	ranTurn bool
	// followingUp says the exchange answers a follow-up, not the first
	// request: its planning failure ends it, not the investigation.
	followingUp bool
	log         log.Logger
	// callsInFlight counts the tool calls running in the exchange's steps;
	// they are counted in Budget.TurnCalls once they finish.
	callsInFlight int
	// loans is the scan budget lent to the sub-agents still running
	// (lendScan).
	loans loans
	// storesContext says the run keeps its context in the store and
	// writes its progress there (the storesContext gate); contextWrites
	// is the latest context write.
	storesContext bool
	// requestInContext says the stored context holds the exchange's
	// request too (a follow-up's question, up to maxInputBytes), so inputs
	// that name it leave theirs out, and a direct answer's verdict review
	// reads the context the answer read, plus the answer's step (one write
	// less). Histories recorded before its gate carry the request in every
	// input.
	requestInContext bool
	contextWrites    map[string]workflow.Future
	// unstored are the events the progress writer has yet to store;
	// writing says a write is in flight, flushing that the run waits for
	// the last one (startProgressWriter).
	unstored          []investigation.Event
	writing, flushing bool
	statusStored      [32]byte // the hash of the status written last
	synced            int      // the latest event a waited-for write stored
	closed            bool     // the run emits no more events (flushProgress)
	// closingDown says the run takes no more questions or alerts: it is
	// closing (set once its last inputs were applied); late holds the
	// alerts signalled since, lateNotes the notes of those signalled once
	// the run was closed, closedReason what the admission was told
	// (intake.go, handBack).
	closingDown bool
	// updatesSpent says the run accepted its idle bound of updates
	// (updateBounds) under the idle-update-bound gate: once idle, it
	// continues as new even without a question.
	updatesSpent bool
	// continuing says the run continues as new: the events of inputs taken
	// during its last progress write go to the next run (State.Unwritten).
	continuing bool
	// acking says an accepted update's handler runs: its events are
	// carried whole (emit).
	acking bool
	// signalNotes counts the signals refused or ignored (noteSignal).
	signalNotes  int
	late         investigation.ArrivalBatch
	lateNotes    []investigation.Event
	closedReason string
}

// Investigation plans, executes each step with tools, reflects after each
// step and concludes; then it stays open for follow-up questions until it
// has been idle for Input.IdleTimeout, continuing as new when its history
// grows long (carried is then the state of the run before). The analyst
// steers it with updates or signals (hint, approve, revise, answer, stop,
// ask). It returns the last conclusion and the conversation; a cancelled
// investigation records why and ends as Canceled.
func Investigation(ctx workflow.Context, in investigation.Input, carried *State) (investigation.Result, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	in, err := checkInput(id, in)
	if err != nil {
		return investigation.Result{}, err
	}
	// Every recorded history has no Session: its session is its ID, as
	// before, so no command changes (no gate).
	r := &run{State: carried, id: id, session: cmp.Or(in.Session, id), log: workflow.GetLogger(ctx)}
	if r.State == nil {
		r.State = newState(in)
	}
	r.resultsHeldOnce()
	r.Input = in // each run's input is the investigation's, defaults filled
	r.storesContext = workflow.GetVersion(ctx, "store-context-and-progress", workflow.DefaultVersion, 1) == 1
	if r.storesContext {
		r.Results.hash()
	}
	r.requestInContext = r.storesContext && workflow.GetVersion(ctx, "request-in-context", workflow.DefaultVersion, 1) == 1
	r.startProgressWriter(ctx)
	if err := r.register(ctx); err != nil {
		return investigation.Result{}, err
	}
	r.emitUnwritten()
	r.arrivedWhileWaiting(carried == nil) // intake.go
	res, err := r.investigate(ctx, carried == nil)
	// Nothing yielded since the last inputs were applied: from here a
	// question or an alert would be acknowledged and never answered.
	r.closingDown = !isContinueAsNew(err)
	err = r.closing(ctx, err) // intake.go
	if ctx.Err() != nil && !isContinueAsNew(err) {
		err = r.cancelled(ctx)
		r.flushProgress(ctx)
		r.handBack(ctx)
		return investigation.Result{}, err
	}
	r.flushProgress(ctx)
	r.handBack(ctx) // intake.go
	return res, err
}

// emitUnwritten emits the events the run before took during its last
// progress write, under the numbers their inputs were acknowledged with.
func (r *run) emitUnwritten() {
	events := r.Unwritten
	r.Unwritten = nil
	for _, e := range events {
		r.emit(e)
	}
}

// investigate runs the first exchange (unless this run continues an
// earlier one), then answers follow-ups until the investigation is idle
// for too long or stopped.
func (r *run) investigate(ctx workflow.Context, first bool) (investigation.Result, error) {
	if first {
		// The default request is the workflow's (the intake starts with none).
		r.Steering.AnalystAsked = r.Input.Question != DefaultQuestion
		exchange := r.planExchange
		if r.Input.ConcludeFromAlert {
			exchange = r.alertOnlyExchange
		}
		if err := exchange(ctx, r.Input.Question); err != nil {
			return investigation.Result{}, err
		}
	}
	for {
		for r.Steering.StopReason == "" {
			r.Phase = investigation.PhaseIdle
			r.askAboutUnseen(ctx) // intake.go
			r.setDetails(ctx, "idle: waiting for follow-up questions")
			// A run continued for its updates waits until the run before
			// would have (IdleUntil): inputs do not keep an investigation open.
			idleFor := r.Input.IdleTimeout.Duration()
			if !r.IdleUntil.IsZero() {
				idleFor = max(r.IdleUntil.Sub(workflow.Now(ctx)), time.Second)
				r.IdleUntil = time.Time{}
			}
			until := workflow.Now(ctx).Add(idleFor)
			if len(r.Steering.FollowUps) == 0 {
				r.emit(investigation.Event{Kind: investigation.EventIdle, Text: fmt.Sprintf("waiting up to %s for follow-up questions", idleFor.Round(time.Second))})
			}
			got, err := wait(ctx, idleFor, "waiting for follow-up questions", func() bool {
				return len(r.Steering.FollowUps) > 0 || r.Steering.StopReason != "" || r.updatesSpent
			})
			if err != nil {
				return investigation.Result{}, err
			}
			if !got || r.Steering.StopReason != "" {
				break
			}
			// The server's bound on updates per run is near: hand over
			// now, question or not. The next run counts from zero, so it
			// cannot hand over again before it takes as many.
			if r.updatesSpent {
				if len(r.Steering.FollowUps) == 0 {
					r.IdleUntil = until
				}
				return investigation.Result{}, r.continueAsNew(ctx)
			}
			// A continued run first answers a question, so a low threshold
			// cannot make runs continue as new one after another.
			info := workflow.GetInfo(ctx)
			if r.ranTurn && (info.GetCurrentHistoryLength() > r.Input.Limits.MaxHistoryEvents || info.GetContinueAsNewSuggested()) {
				return investigation.Result{}, r.continueAsNew(ctx)
			}
			question, queued := r.Steering.nextFollowUp()
			r.Steering.AnalystAsked = !r.Steering.unqueue(question)
			if err := r.followUp(ctx, question, queued); err != nil {
				return investigation.Result{}, err
			}
		}
		// Let every input handler finish before completing, so no input is
		// lost; a question that arrived meanwhile is still answered.
		if err := r.drainInputs(ctx); err != nil {
			return investigation.Result{}, err
		}
		if r.Steering.StopReason != "" || len(r.Steering.FollowUps) == 0 {
			break
		}
	}
	if r.Steering.StopReason != "" && len(r.Steering.FollowUps) > 0 {
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: "not answered, the investigation was stopped:", Notes: r.Steering.FollowUps})
	}
	return r.result(), nil
}

// cancelled records, in a context of its own, that the investigation was
// cancelled (its children are cancelled with it) and returns the error that
// ends it as Canceled.
func (r *run) cancelled(ctx workflow.Context) error {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	r.Phase = investigation.PhaseCancelled
	r.Plan.SkipPending("not run: the investigation was cancelled")
	r.emit(investigation.Event{Kind: investigation.EventStop, Text: "the investigation was cancelled"})
	r.setDetails(dctx, "cancelled")
	workflow.GetLogger(dctx).Info("investigation cancelled", "turn", r.Turn, "phase", r.Phase)
	return temporal.NewCanceledError("the investigation was cancelled")
}

func isContinueAsNew(err error) bool {
	var can *workflow.ContinueAsNewError
	return errors.As(err, &can)
}

// checkInput fills defaults and refuses input the workflow cannot run.
func checkInput(id string, in investigation.Input) (investigation.Input, error) {
	in.Limits = in.Limits.WithDefaults()
	if in.Language == "" {
		in.Language = "en"
	}
	if strings.TrimSpace(in.Question) == "" {
		in.Question = DefaultQuestion
	}
	if in.IdleTimeout <= 0 {
		in.IdleTimeout = investigation.Duration(investigation.DefaultIdleTimeout)
	}
	switch _, ok := investigation.Languages[in.Language]; {
	case in.AlertID == "":
		return in, temporal.NewNonRetryableApplicationError("the investigation has no alert ID", ErrInvestigationFailed, nil)
	case !ok:
		return in, temporal.NewNonRetryableApplicationError(fmt.Sprintf("unsupported conclusion language %q", in.Language), ErrInvestigationFailed, nil)
	}
	if err := investigation.CheckSession(id, in.Session); err != nil {
		return in, temporal.NewNonRetryableApplicationError(err.Error(), ErrInvestigationFailed, nil)
	}
	return in, nil
}

// continueAsNew hands the whole state to a fresh run of this workflow,
// after every input handler finished and the run's progress is written.
func (r *run) continueAsNew(ctx workflow.Context) error {
	if err := r.drainInputs(ctx); err != nil {
		return err
	}
	// The last progress write comes before the state is encoded: an input
	// taken while it is in flight is applied to the state carried (its
	// event too, in Unwritten), not acknowledged and lost. The commands are
	// those of every recorded history (no gate): the same StoreProgress
	// marker right before the continue-as-new, with no command between
	// (Investigation no longer flushes once more on this path); applying
	// the buffered signals adds only state, and a GetVersion an input's
	// check may ask, which replays its default where no marker was recorded.
	r.continuing = true
	r.flushProgress(ctx)
	r.applyBuffered(ctx)
	workflow.GetLogger(ctx).Info("continuing as new", "turn", r.Turn, "last_seq", r.lastSeq())
	// A pinned investigation (Worker Deployment Versioning) moves to the
	// current worker version here, and only here.
	return workflow.NewContinueAsNewErrorWithOptions(ctx,
		workflow.ContinueAsNewErrorOptions{InitialVersioningBehavior: workflow.ContinueAsNewVersioningBehaviorAutoUpgrade},
		investigation.WorkflowName, r.Input, r.carried(r.lastSeq()))
}
