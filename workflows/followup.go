package workflows

import (
	"cmp"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// answerStepID is the step ID of the tool loop that answers a follow-up
// directly.
const answerStepID = "answer"

// followUp runs one follow-up question: the model decides between Plan &
// Execute (continuing the active plan unless the question is new) and a
// direct answer with tools. queued is the number of the note that queued
// the question, which its turn event names.
func (r *run) followUp(ctx workflow.Context, question string, queued int) error {
	var m activities.Mode
	if r.requestInContext {
		r.Request = question // the stored context carries it from here on
	}
	in := activities.ModeInput{AlertID: r.Input.AlertID, Question: question, Asker: r.asker(question), History: r.History, ActivePlan: planWithoutResults(r.ActivePlan)}
	if in.Context = r.context(ctx); in.Context != "" {
		in.Session, in.History, in.ActivePlan = r.session, nil, nil
		in.Question = r.withoutRequest(in.Context, in.Question)
	}
	err := workflow.ExecuteActivity(llmOptions(ctx, "decide mode"), a.DecideMode, in).Get(ctx, &m)
	r.charge(&r.ByPhase.Plan, billedUsage(m.Usage, err))
	switch {
	case ctx.Err() != nil:
		return cmp.Or(err, ctx.Err()) // cancelled: the investigation ends as Canceled
	case err != nil:
		m = activities.Mode{Mode: investigation.ModePlan, Reason: "the mode decision failed (" + message(err) + "); planning to be safe"}
	case m.Mode != investigation.ModePlan && m.Mode != investigation.ModeDirect:
		m = activities.Mode{Mode: investigation.ModePlan, Reason: "the mode decision was neither plan nor direct; planning to be safe"}
	}
	r.emit(investigation.Event{Kind: investigation.EventTurn, Text: question, Mode: m.Mode, Reason: m.Reason, Queued: queued})
	if m.Mode == investigation.ModePlan {
		r.followingUp = true
		defer func() { r.followingUp = false }()
		return r.planExchange(ctx, question)
	}
	return r.answerDirectly(ctx, question)
}

// answerDirectly answers a follow-up with one tool loop that sees the
// conversation and the standing verdict; the answer joins the conversation.
// Then ReviewVerdict decides whether the exchange changed the verdict (an
// answer cut short leaves it as it was).
func (r *run) answerDirectly(ctx workflow.Context, question string) error {
	r.beginExchange(ctx, question)
	r.Phase = investigation.PhaseExecuting
	step := plan.Step{ID: answerStepID, Description: answerDescription(r.asker(question), question), Expected: "A direct answer with the evidence for it."}
	res, err := r.runStep(ctx, step)
	if err != nil {
		return failure("answering failed", err)
	}
	// The review reads the context the answer read, plus the answer's step.
	var answered string
	if r.requestInContext {
		answered = r.context(ctx)
	}
	r.addRan(ctx, answerStepID, res)
	text := res.Text
	if res.Cut != "" {
		r.emit(investigation.Event{Kind: investigation.EventStop, Text: res.Cut})
		// The note says the workflow's reason in the run's language; res.Cut
		// stays English. No gate: only the answer's text changes (the
		// conclusion, its event, what is delivered), payloads replay does
		// not compare, and no decision reads it; in English it is unchanged.
		text += "\n\n" + activities.CutShortNote(r.Input.Language, res.Cut)
	}
	var changed *investigation.Verdict
	// Histories recorded before direct answers could change the verdict
	// have no review here.
	if workflow.GetVersion(ctx, "direct-answer-verdict", workflow.DefaultVersion, 1) == 1 && res.Cut == "" {
		var overruled string
		changed, overruled = r.reviewVerdict(ctx, question, res.Key, answered)
		if overruled != "" {
			// The answer may say the verdict changed: it leads with the
			// sentence that the change was not accepted, so the delivered
			// summary (SummaryOf) does too. No gate: only the answer's text
			// (a payload) changes, no command. Under maxConclusion it is as
			// long as before (investigation.Lead), so the stored context's
			// size, which decides its StoreContext marker, is the same;
			// over it the clip may land on another rune boundary, a few
			// bytes off, but the ~32 KiB answer puts the context far past
			// inlineContext (2 KiB) either way, so it is stored either way.
			text = investigation.Lead(text, overruled)
		}
	}
	r.Conclusion = boundedConclusion(text)
	r.deliverAnswer(ctx, changed) // intake.go: the admission workflow, and a changed verdict delivered
	r.emit(investigation.Event{Kind: investigation.EventConclusion, Text: r.Conclusion, Verdict: changed})
	r.setDetails(ctx, "answered")
	r.remember(question, r.Conclusion)
	return nil
}

// answerDescription is the direct answer's step as the events, later steps
// and action approvals show it: it says who asked, as the prompts do (a
// question the intake queued is no analyst's). An activity input's content
// is not compared on replay, so recorded histories replay as before.
func answerDescription(asker activities.Asker, question string) string {
	if asker == activities.AskerIntake {
		return "Answer the follow-up question the intake queued when an alert arrived (no analyst asked it): " + question
	}
	return "Answer the analyst's follow-up question: " + question
}

// reviewVerdict asks whether a direct answer changed the standing verdict,
// records the outcome and returns the verdict if the answer set or changed
// it, and, if the check did not keep the verdict the answer proposed, the
// sentence the answer ends with. A failed review is a note: the verdict
// stays. answered, if not "", is the stored context the answer read, before
// its step joined Ran.
func (r *run) reviewVerdict(ctx workflow.Context, question, answerKey, answered string) (*investigation.Verdict, string) {
	r.Phase = investigation.PhaseConcluding
	standing := r.Verdict
	var out activities.Review
	in := activities.ReviewInput{
		Session:   r.session,
		Question:  question,
		Asker:     r.asker(question),
		AnswerKey: answerKey,
		Language:  r.Input.Language,
		Hints:     r.Steering.Hints,
		Verdict:   r.verdictContext(),
	}
	if answered != "" {
		// The context predates the answer's step: only that step goes inline.
		in.Context, in.Verdict.Ran = answered, in.Verdict.Ran[len(in.Verdict.Ran)-1:]
	} else if in.Context = r.context(ctx); in.Context != "" {
		in.Verdict.Ran = nil
	}
	if in.Context != "" {
		in.Hints, in.Verdict.Standing = nil, nil
		in.Question = r.withoutRequest(in.Context, in.Question)
	}
	err := workflow.ExecuteActivity(llmOptions(ctx, "review the verdict"), a.ReviewVerdict, in).Get(ctx, &out)
	r.charge(&r.ByPhase.Conclusion, billedUsage(out.Usage, err))
	if err != nil {
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: "the verdict review failed; the verdict stays: " + message(err)})
		return nil, ""
	}
	r.checkNotes(out.Notes)
	if r.recordVerdict(ctx, withEvidence(out.Verdict, out.SameEvidence, standing), false) {
		return r.Verdict, out.Overruled
	}
	return nil, out.Overruled
}
