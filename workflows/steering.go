package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
)

// maxInputBytes bounds one analyst input (hint, feedback, answer, question).
const maxInputBytes = 8 << 10

// register installs the progress and status queries, the steering updates
// and their signals (signals.go). Each validator refuses an input that cannot apply now, with the
// reason; each handler records its input in the state and in a progress
// event and returns at once, so an input that arrives while an activity
// runs is seen by the next model call and nothing waits on a handler.
func (r *run) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, investigation.ProgressQuery, progressQuery(r.eventsAfter)); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, investigation.StatusQuery, r.status); err != nil {
		return err
	}
	var err error
	add := func(name string, handler, validator any) {
		if err == nil {
			err = workflow.SetUpdateHandlerWithOptions(ctx, name, handler, workflow.UpdateHandlerOptions{Validator: validator})
		}
	}
	add(recorded(r, investigation.UpdateHint, r.hint, r.checkHint))
	add(recorded(r, investigation.UpdateApprove,
		func(investigation.Approval) investigation.Ack { return r.approve() },
		func(investigation.Approval) error { return r.decisionOpen() }))
	add(recorded(r, investigation.UpdateRevise, r.revise, r.checkRevision))
	add(recorded(r, investigation.UpdateAnswer, r.answer, r.checkAnswer))
	add(recorded(r, investigation.UpdateStop, r.stop, r.checkStop))
	add(recorded(r, investigation.UpdateAsk, r.ask, r.checkQuestion))
	add(recorded(r, investigation.AlertsUpdate, r.arrive, r.checkAlerts))                      // intake.go
	add(recorded(r, investigation.UpdateApproveCall, r.approveCall, r.checkApproveCallUpdate)) // mcp.go
	add(recorded(r, investigation.UpdateDenyCall, r.denyCall, r.checkDenyCall))
	if err == nil {
		r.listen(ctx)
	}
	return err
}

// text checks one free-text input.
func text(what string) func(string) error {
	return func(s string) error {
		switch {
		case strings.TrimSpace(s) == "":
			return fmt.Errorf("the %s is empty", what)
		case len(s) > maxInputBytes:
			return fmt.Errorf("the %s is longer than %d bytes", what, maxInputBytes)
		}
		return nil
	}
}

// checkHint refuses a hint that no model call would read (hintUnread).
// An update's validator does not run in replay, so it needs no gate; a
// signal's check does (checkHintSignal).
func (r *run) checkHint(hint string) error {
	if r.hintUnread() {
		return errHintUnread
	}
	return text("hint")(hint)
}

var errHintUnread = errors.New("the investigation is closing: no model call would read the hint; start a new one")

// hintUnread says no model call of this run would read a hint given now:
// the run is closing, or it is stopped and its last model call (the
// conclusion, a direct answer's review) has begun, or it was stopped idle.
func (r *run) hintUnread() bool {
	stopped := r.Steering.StopReason != "" && (r.Phase == investigation.PhaseConcluding || r.Phase == investigation.PhaseIdle)
	return r.closingDown || stopped
}

// checkHintSignal is checkHint for a signal, which becomes a note "hint
// signal ignored: ..." instead of a hint no model call reads. Histories
// recorded before the unread-hint-signal gate recorded such a hint.
func (r *run) checkHintSignal(ctx workflow.Context) func(string) error {
	return func(hint string) error {
		if r.hintUnread() && workflow.GetVersion(ctx, "unread-hint-signal", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return text("hint")(hint)
		}
		return r.checkHint(hint)
	}
}

func (r *run) hint(hint string) investigation.Ack {
	hint = strings.TrimSpace(hint)
	seq := r.emit(investigation.Event{Kind: investigation.EventHint, Text: hint})
	r.Steering.HintCount++
	r.Steering.Said++
	r.addHint(hint)
	return investigation.Ack{Seq: seq, Message: fmt.Sprintf("hint %d recorded: taken into account from the next model call on", r.Steering.HintCount)}
}

func (r *run) approve() investigation.Ack {
	r.Steering.Approval = approvalGiven
	seq := r.emit(investigation.Event{Kind: investigation.EventApproval, Text: "approved"})
	return investigation.Ack{Seq: seq, Message: "plan approved: the investigation runs it now"}
}

func (r *run) revise(feedback string) investigation.Ack {
	r.Steering.Approval, r.Steering.Feedback = approvalRevise, strings.TrimSpace(feedback)
	r.Steering.Said++
	seq := r.emit(investigation.Event{Kind: investigation.EventApproval, Text: "revise: " + r.Steering.Feedback})
	return investigation.Ack{Seq: seq, Message: "revision recorded: the plan is being rewritten and will wait for approval again"}
}

func (r *run) answer(ans investigation.Answer) investigation.Ack {
	q := r.question(ans.QuestionID)
	q.Answered, q.Answer = true, strings.TrimSpace(ans.Text)
	r.Steering.Said++
	seq := r.emit(investigation.Event{Kind: investigation.EventAnswer, Text: q.Answer, QuestionID: q.ID})
	return investigation.Ack{Seq: seq, Message: fmt.Sprintf("answer to %s recorded: the step goes on with it", q.ID)}
}

func (r *run) checkRevision(feedback string) error {
	if r.Steering.StopReason != "" {
		return errStoppedRevision
	}
	return r.checkOpenRevision(feedback)
}

// errStoppedRevision refuses a revision once the investigation is stopped:
// a stop asks for the conclusion now, and a new plan would be a model call.
var errStoppedRevision = errors.New("the investigation is stopping: the plan is not revised, it concludes from what it has")

// checkOpenRevision is checkRevision without the stop: what histories
// recorded before stop-skips-planning checked.
func (r *run) checkOpenRevision(feedback string) error {
	if err := r.decisionOpen(); err != nil {
		return err
	}
	return text("revision request")(feedback)
}

// checkRevisionSignal is checkRevision for a signal. Unlike an update's
// validator, a signal's check runs again in replay, and histories recorded
// before stop-skips-planning took a revise signal after the stop.
func (r *run) checkRevisionSignal(ctx workflow.Context) func(string) error {
	return func(feedback string) error {
		if r.Steering.StopReason != "" && !stopSkipsPlanning(ctx) {
			return r.checkOpenRevision(feedback)
		}
		return r.checkRevision(feedback)
	}
}

// checkStop refuses a second stop, a stop once the run is closing, and a
// reason longer than any other input may be (it is copied into the stop
// event, the conclusion's input and the result). A closing run has nothing
// left to stop, and once its last progress write began a stop's event
// would be lost and its ack would name another event's number (emit). An
// update's validator does not run in replay: no gate.
func (r *run) checkStop(reason string) error {
	if r.closingDown {
		return errConcluded
	}
	if err := r.checkStopping(); err != nil {
		return err
	}
	if len(reason) > maxInputBytes {
		return fmt.Errorf("the stop reason is longer than %d bytes", maxInputBytes)
	}
	return nil
}

var errConcluded = errors.New("the investigation has already concluded and is closing: there is nothing left to stop")

// checkStopSignal is checkStop for a signal, which is ignored (a note)
// once the run is closing, as the update is refused: a closing run has
// nothing left to stop. Its check runs again in replay, and histories
// recorded before the closed-stop-signal gate applied it: its reason in
// the status made the last progress write one more (a StoreProgress
// marker). Asked only where the two part: closing and not yet stopped.
func (r *run) checkStopSignal(ctx workflow.Context) error {
	if r.closingDown && r.Steering.StopReason == "" &&
		workflow.GetVersion(ctx, "closed-stop-signal", workflow.DefaultVersion, 1) == 1 {
		workflow.GetLogger(ctx).Info("stop signal ignored: the investigation is closing", "phase", r.Phase, "turn", r.Turn, "progress_flushed", r.closed)
		return errConcluded
	}
	return r.checkStopping()
}

// checkStopping is checkStop for a signal, whose check runs again in
// replay and which cannot be refused for its length: stop clips it.
func (r *run) checkStopping() error {
	if r.Steering.StopReason != "" {
		return errors.New("the investigation is already stopping")
	}
	return nil
}

func (r *run) checkQuestion(question string) error {
	switch {
	case r.Steering.StopReason != "":
		return errors.New("the investigation is stopping: start a new one")
	case r.closingDown:
		return errors.New("the investigation is closing: start a new one")
	case len(r.Steering.FollowUps) >= maxFollowUps:
		return fmt.Errorf("%d follow-up questions are already queued: ask again once one is answered", maxFollowUps)
	}
	return text("question")(question)
}

func (r *run) checkAnswer(ans investigation.Answer) error {
	if r.question(ans.QuestionID) == nil {
		if ans.QuestionID != "" {
			return fmt.Errorf("no pending question %q", ans.QuestionID)
		}
		return errors.New("no question is waiting for an answer")
	}
	return text("answer")(ans.Text)
}

func (r *run) stop(reason string) investigation.Ack {
	// A stop signal's reason is clipped, not refused (an update's longer
	// one is refused: checkStop). No gate: the reason is only copied into
	// payloads (the stop event, EndedEarly, CutAnswer's input, the child's
	// stop signal), which replay does not compare, and no decision reads
	// its length, so a recorded history's commands stay the same.
	r.Steering.StopReason = activities.StoppedReason(strings.TrimSpace(clip.String(reason, maxInputBytes)))
	seq := r.emit(investigation.Event{Kind: investigation.EventStop, Text: r.Steering.StopReason})
	msg := "stop recorded: the investigation concludes from what it knows so far"
	if r.Phase == investigation.PhaseIdle {
		msg = "stop recorded: the investigation closes"
	}
	if n := len(r.Steering.FollowUps); n > 0 {
		msg += fmt.Sprintf("; the %d queued follow-up question(s) will not be answered", n)
	}
	return investigation.Ack{Seq: seq, Message: msg}
}

func (r *run) ask(question string) investigation.Ack {
	question = strings.TrimSpace(question)
	seq := r.queueFollowUp(question)
	msg := "question recorded: a new turn starts now"
	if r.Phase != investigation.PhaseIdle || len(r.Steering.FollowUps) > 1 {
		msg = fmt.Sprintf("question recorded: it runs after the current turn (%d queued)", len(r.Steering.FollowUps))
	}
	return investigation.Ack{Seq: seq, Message: msg}
}

// queueFollowUp queues a follow-up question and emits the note that says
// so, returning the note's number (an ask's ack). The turn that answers it
// names that number (Event.Queued): the client follows its own turn when
// the same question is queued twice. A note emit dropped (its number is
// not the note's) is named by no turn. Only an event's fields change, and
// progress is written per workflow task, not by size: no command changes.
func (r *run) queueFollowUp(question string) int {
	before := r.lastSeq() + len(r.Unwritten)
	seq := r.emit(investigation.Event{Kind: investigation.EventNote, Text: "follow-up question queued: " + question})
	queued := seq
	if seq <= before {
		queued = 0
	}
	s := &r.Steering
	if len(s.FollowUpSeqs) != len(s.FollowUps) {
		s.FollowUpSeqs = make([]int, len(s.FollowUps)) // carried from a run that kept none
	}
	s.FollowUps = append(s.FollowUps, question)
	s.FollowUpSeqs = append(s.FollowUpSeqs, queued)
	return seq
}

// nextFollowUp takes the oldest queued question off the queue, with the
// number of the note that queued it (0: unknown).
func (s *Steering) nextFollowUp() (string, int) {
	question, queued := s.FollowUps[0], 0
	if len(s.FollowUpSeqs) == len(s.FollowUps) {
		queued, s.FollowUpSeqs = s.FollowUpSeqs[0], s.FollowUpSeqs[1:]
	}
	s.FollowUps = s.FollowUps[1:]
	return question, queued
}

// decisionOpen says why the plan cannot take an approve or revise now, or
// nil. Updates that arrive in one workflow task are validated and handled
// one after the other before the main loop runs again, so a second decision
// would see the phase still awaiting approval and silently replace the
// first: it is refused instead.
func (r *run) decisionOpen() error {
	switch {
	case r.Phase != investigation.PhaseAwaitingApproval:
		return fmt.Errorf("the plan is not waiting for approval (the investigation is %s)", r.Phase)
	case r.Steering.Approval != "":
		return fmt.Errorf("the plan already has a decision (%s) that is being applied", r.Steering.Approval)
	}
	return nil
}

// The server admits at most 2,000 updates per run (history.maxTotalUpdates;
// since server 1.27 a rejected one does not count), then refuses every
// update, stop and ask included. An idle run that accepted maxIdleUpdates
// continues as new (updatesSpent); an exchange cannot, so from three times
// that it refuses all but the mustPass updates, leaving them 500.
const maxIdleUpdates = 500

// mustPass are the updates accepted past the busy bound: the analyst can
// always stop, ask, approve the plan, answer a question or decide an
// action. Each but ask needs something the run itself opened (a plan, a
// question, a call), and queued questions are bounded (maxFollowUps), so
// they fit in what the bound leaves. Hints, revisions (each one a new plan)
// and the alerts update (the intake sends a signal) are refused.
var mustPass = []string{investigation.UpdateStop, investigation.UpdateAsk, investigation.UpdateApprove,
	investigation.UpdateAnswer, investigation.UpdateApproveCall, investigation.UpdateDenyCall}

// updateBounds returns the updates a run accepts before it continues as new
// once idle, and before it refuses all but mustPass. Each update takes at
// least two events, so a low MaxHistoryEvents lowers both.
func updateBounds(l investigation.Limits) (idle, busy int) {
	idle = min(maxIdleUpdates, max(l.MaxHistoryEvents/2, 1))
	return idle, 3 * idle
}

// errTooManyUpdates refuses an update past the busy bound.
var errTooManyUpdates = errors.New("this run of the investigation took too many inputs: it takes no more hints, revisions or alerts until its exchange ends (stop, ask, approve and answers still work)")

// countUpdate counts an accepted update. The handler runs again in replay,
// so the count does too; the gate is asked where a run reaches the idle
// bound, so only such a run records its marker.
func (r *run) countUpdate(ctx workflow.Context) {
	r.Steering.RunUpdates++
	if idle, _ := updateBounds(r.Input.Limits); r.Steering.RunUpdates == idle {
		r.updatesSpent = workflow.GetVersion(ctx, "idle-update-bound", workflow.DefaultVersion, 1) == 1
	}
}

// recorded returns the update called name with its handler and validator
// wrapped so that a retry of an input that an earlier run recorded is
// acknowledged, not recorded again, and every other input is tracked. An
// input whose payload the codec refused is rejected with the reason, and
// one past the busy bound (updateBounds) unless it must pass. Every accepted
// update is counted, a retry's too: the server counts it.
func recorded[T any](r *run, name string, handle func(T) investigation.Ack, valid func(T) error) (string, any, any) {
	bounded := !slices.Contains(mustPass, name)
	handler := func(ctx workflow.Context, in input[T]) (investigation.Ack, error) {
		r.countUpdate(ctx)
		if r.recordedEarlier(ctx) {
			return earlierAck, nil
		}
		r.track(ctx)
		r.acking = true // a handler never blocks: nothing else runs meanwhile
		defer func() { r.acking = false }()
		return handle(in.value()), nil
	}
	validator := func(ctx workflow.Context, in input[T]) error {
		if in.refused != nil {
			return in.refused
		}
		// A retry of an input an earlier run recorded is acknowledged as
		// recorded, past the busy bound too: it was taken, and a refusal
		// would say it was not. A validator does not run in replay: no gate.
		if r.recordedEarlier(ctx) {
			return nil
		}
		if _, busy := updateBounds(r.Input.Limits); bounded && r.Steering.RunUpdates >= busy {
			return errTooManyUpdates
		}
		if r.unwrittenFull() {
			return errContinuing
		}
		return valid(in.v)
	}
	return name, handler, validator
}

// recordedEarlier says whether the current update is a client's retry of an
// input that an earlier run of this investigation recorded (the server
// deduplicates retries within one run only).
func (r *run) recordedEarlier(ctx workflow.Context) bool {
	info := workflow.GetCurrentUpdateInfo(ctx)
	return info != nil && slices.Contains(r.Steering.UpdateIDs[:r.Steering.Carried], info.ID)
}

// track notes the current update's ID, so that the next run recognises a
// retry of it.
func (r *run) track(ctx workflow.Context) {
	if info := workflow.GetCurrentUpdateInfo(ctx); info != nil {
		r.Steering.UpdateIDs = append(r.Steering.UpdateIDs, info.ID)
	}
}

// earlierAck answers a retried input that an earlier run recorded.
var earlierAck = investigation.Ack{Message: "already recorded before the investigation continued as new; not recorded again"}

// question returns the pending question with this ID, or the oldest pending
// one for an empty ID, or nil.
func (r *run) question(id string) *Question {
	for _, q := range r.Steering.Questions {
		if !q.Answered && (id == "" || q.ID == id) {
			return q
		}
	}
	return nil
}

func (r *run) status() (investigation.Status, error) {
	st := investigation.Status{
		Phase: r.Phase, Turn: r.Turn, Request: r.Request, Plan: r.Plan, Insights: r.Insights, Verdict: r.Verdict,
		Hints: r.Steering.Hints, FollowUps: r.Steering.FollowUps, Spend: r.Spend,
		LastSeq: r.lastSeq(), StopReason: r.Steering.StopReason, VerdictHistory: r.VerdictHistory, Intake: r.Intake.status(r.Input.Intake),
		Actions: r.actions(),
	}
	for _, q := range r.Steering.Questions {
		if !q.Answered {
			st.Questions = append(st.Questions, q.Question)
		}
	}
	return st, nil
}
