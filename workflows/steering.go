package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// maxInputBytes bounds one analyst input (hint, feedback, answer, question).
const maxInputBytes = 8 << 10

// pendingQuestion is an ask_user question and, once given, its answer.
type pendingQuestion struct {
	investigation.Question
	answered bool
	answer   string
}

// registerHandlers installs the status query and the steering updates. Each
// validator rejects an input that cannot apply now, with the reason; each
// handler records its input in workflow state and in a progress event, and
// returns at once, so an input that arrives while an activity runs is seen
// by the next model call and nothing waits on a handler.
func (r *run) registerHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, investigation.StatusQuery, r.status); err != nil {
		return err
	}
	text := func(what string) func(string) error {
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
	var err error
	add := func(name string, handler, validator any) {
		if err == nil {
			err = workflow.SetUpdateHandlerWithOptions(ctx, name, handler, workflow.UpdateHandlerOptions{Validator: validator})
		}
	}
	add(guard(r, func(hint string) (investigation.Ack, error) {
		r.hints = append(r.hints, strings.TrimSpace(hint))
		seq := r.emit(investigation.Event{Kind: investigation.EventHint, Text: strings.TrimSpace(hint)})
		return investigation.Ack{Seq: seq, Message: fmt.Sprintf("hint %d recorded: taken into account from the next model call on", len(r.hints))}, nil
	}, text("hint"), investigation.UpdateHint))
	add(investigation.UpdateApprove, func(ctx workflow.Context) (investigation.Ack, error) {
		if r.recordedEarlier(ctx) {
			return earlierAck, nil
		}
		r.track(ctx)
		r.approval = "approved"
		seq := r.emit(investigation.Event{Kind: investigation.EventApproval, Text: "approved"})
		return investigation.Ack{Seq: seq, Message: "plan approved: the investigation runs it now"}, nil
	}, func(ctx workflow.Context) error {
		if r.recordedEarlier(ctx) {
			return nil
		}
		return r.decisionOpen()
	})
	add(guard(r, func(feedback string) (investigation.Ack, error) {
		r.approval, r.feedback = "revise", strings.TrimSpace(feedback)
		seq := r.emit(investigation.Event{Kind: investigation.EventApproval, Text: "revise: " + r.feedback})
		return investigation.Ack{Seq: seq, Message: "revision recorded: the plan is being rewritten and will wait for approval again"}, nil
	}, func(feedback string) error {
		if err := r.decisionOpen(); err != nil {
			return err
		}
		return text("revision request")(feedback)
	}, investigation.UpdateRevise))
	add(guard(r, func(ans investigation.Answer) (investigation.Ack, error) {
		q := r.question(ans.QuestionID)
		q.answered, q.answer = true, strings.TrimSpace(ans.Text)
		seq := r.emit(investigation.Event{Kind: investigation.EventAnswer, Text: q.answer, Items: []string{q.ID}})
		return investigation.Ack{Seq: seq, Message: fmt.Sprintf("answer to %s recorded: the step goes on with it", q.ID)}, nil
	}, func(ans investigation.Answer) error {
		if r.question(ans.QuestionID) == nil {
			if ans.QuestionID != "" {
				return fmt.Errorf("no pending question %q", ans.QuestionID)
			}
			return errors.New("no question is waiting for an answer")
		}
		return text("answer")(ans.Text)
	}, investigation.UpdateAnswer))
	add(guard(r, func(reason string) (investigation.Ack, error) {
		r.stopReason = "stopped by the analyst"
		if reason = strings.TrimSpace(reason); reason != "" {
			r.stopReason += ": " + reason
		}
		seq := r.emit(investigation.Event{Kind: investigation.EventStop, Text: r.stopReason})
		msg := "stop recorded: the investigation concludes from what it knows so far"
		if r.phase == investigation.PhaseIdle {
			msg = "stop recorded: the investigation closes"
		}
		if n := len(r.followUps); n > 0 {
			msg += fmt.Sprintf("; the %d queued follow-up question(s) will not be answered", n)
		}
		return investigation.Ack{Seq: seq, Message: msg}, nil
	}, func(string) error {
		if r.stopReason != "" {
			return errors.New("the investigation is already stopping")
		}
		return nil
	}, investigation.UpdateStop))
	add(guard(r, func(question string) (investigation.Ack, error) {
		r.followUps = append(r.followUps, strings.TrimSpace(question))
		seq := r.emit(investigation.Event{Kind: investigation.EventNote, Text: "follow-up question queued: " + strings.TrimSpace(question)})
		msg := "question recorded: a new turn starts now"
		if r.phase != investigation.PhaseIdle || len(r.followUps) > 1 {
			msg = fmt.Sprintf("question recorded: it runs after the current turn (%d queued)", len(r.followUps))
		}
		return investigation.Ack{Seq: seq, Message: msg}, nil
	}, func(question string) error {
		if r.stopReason != "" {
			return errors.New("the investigation is stopping: start a new one")
		}
		return text("question")(question)
	}, investigation.UpdateAsk))
	return err
}

// decisionOpen says why the plan cannot take an approve or revise now, or
// nil. Updates that arrive in one workflow task are validated and handled
// one after the other before the main loop runs again, so a second decision
// would see the phase still awaiting approval and silently replace the
// first: it is refused instead.
func (r *run) decisionOpen() error {
	switch {
	case r.phase != investigation.PhaseAwaitingApproval:
		return fmt.Errorf("the plan is not waiting for approval (the investigation is %s)", r.phase)
	case r.approval != "":
		return fmt.Errorf("the plan already has a decision (%s) that is being applied", r.approval)
	}
	return nil
}

// recordedEarlier says whether the current update is a client's retry of an
// input that an earlier run of this investigation recorded (the server
// deduplicates retries within one run only).
func (r *run) recordedEarlier(ctx workflow.Context) bool {
	info := workflow.GetCurrentUpdateInfo(ctx)
	return info != nil && slices.Contains(r.updateIDs[:r.carried], info.ID)
}

// track notes the current update's ID, so that the next run recognises a
// retry of it.
func (r *run) track(ctx workflow.Context) {
	if info := workflow.GetCurrentUpdateInfo(ctx); info != nil {
		r.updateIDs = append(r.updateIDs, info.ID)
	}
}

// guard returns the update called name with its handler and validator
// wrapped so that a retry of an input that an earlier run recorded is
// acknowledged, not recorded again, and every other input is tracked.
func guard[T any](r *run, handle func(T) (investigation.Ack, error), valid func(T) error, name string) (string, any, any) {
	handler := func(ctx workflow.Context, v T) (investigation.Ack, error) {
		if r.recordedEarlier(ctx) {
			return earlierAck, nil
		}
		r.track(ctx)
		return handle(v)
	}
	validator := func(ctx workflow.Context, v T) error {
		if r.recordedEarlier(ctx) {
			return nil
		}
		return valid(v)
	}
	return name, handler, validator
}

// earlierAck answers a retried input that an earlier run recorded.
var earlierAck = investigation.Ack{Message: "already recorded before the investigation continued as new; not recorded again"}

// question returns the pending question with this ID, or the oldest pending
// one for an empty ID, or nil.
func (r *run) question(id string) *pendingQuestion {
	for _, q := range r.questions {
		if !q.answered && (id == "" || q.ID == id) {
			return q
		}
	}
	return nil
}

func (r *run) status() (investigation.Status, error) {
	st := investigation.Status{
		Phase: r.phase, Turn: r.turn, Request: r.request, Plan: r.plan, Insights: r.insights, Verdict: r.verdict, Hints: r.hints,
		FollowUps: r.followUps, Usage: r.usage, ToolCalls: r.calls, LastSeq: r.firstSeq + len(r.events), StopReason: r.stopReason,
	}
	for _, q := range r.questions {
		if !q.answered {
			st.Questions = append(st.Questions, q.Question)
		}
	}
	return st, nil
}

// awaitApproval holds a new plan until the analyst approves it, or re-plans
// with the analyst's feedback and waits again. Waiting does not count against
// the run's time budget.
func (r *run) awaitApproval(ctx workflow.Context, request string) error {
	for {
		r.phase, r.approval = investigation.PhaseAwaitingApproval, ""
		r.emit(investigation.Event{Kind: investigation.EventApproval, Text: "awaiting"})
		r.setDetails(ctx, "plan awaits approval")
		start := workflow.Now(ctx)
		if err := workflow.Await(ctx, func() bool { return r.approval != "" || r.stopReason != "" }); err != nil {
			return err
		}
		r.waited += workflow.Now(ctx).Sub(start)
		r.phase = investigation.PhaseExecuting
		if r.approval != "revise" {
			r.feedback = ""
			return nil
		}
		if err := r.makePlan(ctx, request); err != nil {
			return failure("re-planning failed", err)
		}
		r.feedback = ""
	}
}

// exhausted says why the current run must stop early: the analyst's stop,
// the tool-call cap or the time budget (waiting for the analyst excluded).
func (r *run) exhausted(ctx workflow.Context, loopCalls int) string {
	if !r.conversation {
		return ""
	}
	switch lim := r.in.Limits; {
	case r.stopReason != "":
		return r.stopReason
	case r.turnCalls+loopCalls >= lim.MaxToolCalls:
		return fmt.Sprintf("the run used its %d tool calls", lim.MaxToolCalls)
	case workflow.Now(ctx).Sub(r.turnStart)-r.waited >= lim.TimeBudget:
		return fmt.Sprintf("the run used its time budget of %s", lim.TimeBudget)
	}
	return ""
}

// askUser puts an ask_user question to the analyst and waits (in its own
// coroutine, so other calls of the turn go on) for an answer or the timeout;
// the answer, or a note that none came, becomes the call's result.
func (r *run) askUser(ctx workflow.Context, c toolcall.Call, label string) workflow.Future {
	f, settle := workflow.NewFuture(ctx)
	question, _ := c.Args["question"].(string)
	if question = strings.TrimSpace(question); question == "" {
		settle.SetError(temporal.NewNonRetryableApplicationError(`ask_user needs a "question"`, "BadArguments", nil))
		return f
	}
	r.nextQID++
	q := &pendingQuestion{Question: investigation.Question{ID: fmt.Sprintf("q-%d", r.nextQID), Step: label, Question: question}}
	r.questions = append(r.questions, q)
	r.emit(investigation.Event{Kind: investigation.EventQuestion, Step: label, Text: question, Items: []string{q.ID}})
	workflow.Go(ctx, func(ctx workflow.Context) {
		r.phase = investigation.PhaseWaitingForAnswer
		r.setDetails(ctx, "waiting for the analyst's answer to "+q.ID)
		start := workflow.Now(ctx)
		if r.waiting == 0 {
			r.waitStart = start
		}
		r.waiting++
		got, err := workflow.AwaitWithTimeout(ctx, r.in.Limits.AnswerTimeout, func() bool { return q.answered || r.stopReason != "" })
		r.waiting--
		switch {
		case !r.guarded:
			r.waited += workflow.Now(ctx).Sub(start)
		case r.waiting == 0:
			// Overlapping questions: the span from the first one's start to
			// the last one's end counts once.
			r.waited += workflow.Now(ctx).Sub(r.waitStart)
		}
		if r.waiting == 0 {
			r.phase = investigation.PhaseExecuting
		}
		result := map[string]any{"answer": q.answer}
		if err != nil || !got || !q.answered {
			q.answered = true // no longer pending
			result = map[string]any{"answer": nil, "note": fmt.Sprintf("the analyst did not answer within %s; go on without this fact", r.in.Limits.AnswerTimeout)}
			r.emit(investigation.Event{Kind: investigation.EventAnswer, Step: label, Text: "no answer: going on without it", Items: []string{q.ID}})
		}
		raw, _ := json.Marshal(result)
		settle.Set(investigation.ToolOutput{OK: true, Inline: string(raw), Bytes: len(raw)}, nil)
	})
	return f
}

// followUp runs one follow-up question: the model decides between Plan &
// Execute (continuing the active plan unless the question is new) and a
// direct answer with tools.
func (r *run) followUp(ctx workflow.Context, question string) (investigation.Conclusion, error) {
	var m investigation.Mode
	if err := workflow.ExecuteActivity(llmOptions(ctx, "decide mode"), a.DecideMode, investigation.ModeInput{
		AlertID: r.in.AlertID, Question: question, History: r.in.History, ActivePlan: r.activePlan,
	}).Get(ctx, &m); err != nil || (m.Mode != investigation.ModePlan && m.Mode != investigation.ModeDirect) {
		m = investigation.Mode{Mode: investigation.ModePlan, Reason: "the mode decision failed; planning to be safe"}
	}
	r.usage = r.usage.Add(m.Usage)
	r.emit(investigation.Event{Kind: investigation.EventTurn, Text: question, Items: []string{m.Mode, m.Reason}})
	if m.Mode == investigation.ModePlan {
		return r.planTurn(ctx, question)
	}
	r.beginTurn(ctx, question)
	r.phase = investigation.PhaseExecuting
	step := plan.Step{ID: answerStepID, Description: "Answer the analyst's follow-up question: " + question, Expected: "A direct answer with the evidence for it."}
	text, _, cut, err := r.executeStep(ctx, step)
	if err != nil {
		return investigation.Conclusion{}, failure("answering failed", err)
	}
	if cut != "" && r.guarded {
		r.emit(investigation.Event{Kind: investigation.EventStop, Text: cut})
		text += "\n\n(This answer was cut short: " + cut + ".)"
	}
	r.conclusion = text
	r.emit(investigation.Event{Kind: investigation.EventConclusion, Text: text})
	r.setDetails(ctx, "answered")
	r.remember(question, text)
	return investigation.Conclusion{Markdown: text}, nil
}
