package workflows

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// askUser puts an ask_user question to the analyst and waits (in its own
// coroutine, so other calls of the turn go on) for an answer or the
// timeout; the answer, or a note that none came, becomes the call's result.
// Overlapping waits count once against the exchange's time budget.
func (r *run) askUser(ctx workflow.Context, c toolcall.Call, label string) workflow.Future {
	f, settle := workflow.NewFuture(ctx)
	question, _ := c.Args["question"].(string)
	if question = strings.TrimSpace(question); question == "" {
		settle.SetError(temporal.NewNonRetryableApplicationError(toolcall.AskUser+` needs a "question"`, "BadArguments", nil))
		return f
	}
	// The model writes it, maybe from the alert's text: it is kept in state
	// and in an event, so it is clipped (marked) like other model text.
	question = clip.String(question, maxQuestion)
	r.Steering.NextQID++
	q := &Question{Question: investigation.Question{ID: fmt.Sprintf("q-%d", r.Steering.NextQID), Step: label, Question: question}}
	r.Steering.Questions = append(r.Steering.Questions, q)
	r.keepQuestions()
	r.emit(investigation.Event{Kind: investigation.EventQuestion, Step: label, Text: question, QuestionID: q.ID})
	workflow.Go(ctx, func(ctx workflow.Context) {
		r.Phase = investigation.PhaseWaitingForAnswer
		r.setDetails(ctx, "waiting for the analyst's answer to "+q.ID)
		if r.Budget.Waiting == 0 {
			r.Budget.WaitStart = workflow.Now(ctx)
		}
		r.Budget.Waiting++
		timeout := r.Input.Limits.AnswerTimeout.Duration()
		got, err := wait(ctx, timeout, "waiting for the answer to "+q.ID, func() bool { return q.Answered || r.Steering.StopReason != "" })
		r.Budget.Waiting--
		if r.Budget.Waiting == 0 {
			// The span from the first question's start to the last one's
			// end counts once.
			r.Budget.Waited += workflow.Now(ctx).Sub(r.Budget.WaitStart)
			r.Phase = investigation.PhaseExecuting
		}
		result, unanswered := map[string]any{"answer": q.Answer}, true
		if err != nil || !q.Answered && r.Steering.StopReason != "" {
			// The turn was cut short (a stop, a spent budget) or the
			// investigation stopped: the question is withdrawn, and says why.
			q.Answered = true
			why := cmp.Or(r.exhausted(ctx), "the step was cut short")
			r.emit(investigation.Event{Kind: investigation.EventAnswer, Step: label, Text: "withdrawn: " + why, QuestionID: q.ID})
			if err != nil {
				settle.SetError(err)
				return
			}
			result = map[string]any{"answer": nil, "note": "the question was withdrawn before the analyst answered (" + why + "); go on without this fact"}
		} else if !got || !q.Answered {
			q.Answered = true // no longer pending
			result = map[string]any{"answer": nil, "note": fmt.Sprintf("the analyst did not answer within %s; go on without this fact", r.Input.Limits.AnswerTimeout)}
			r.emit(investigation.Event{Kind: investigation.EventAnswer, Step: label, Text: "no answer: going on without it", QuestionID: q.ID})
		} else {
			unanswered = false
		}
		raw, _ := json.Marshal(result)
		settle.Set(activities.ToolOutput{OK: true, Inline: string(raw), Bytes: len(raw), Unperformed: unanswered}, nil)
	})
	return f
}
