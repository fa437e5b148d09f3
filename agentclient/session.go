package agentclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/enums/v1"

	"github.com/secops-agent/investigator/investigation"
)

// Watch renders an investigation's events from event number from (the
// first is 1), across follow-ups, continue-as-new and child runs, until the
// workflow closes or ctx ends (Ctrl-C: the ending names the --from that
// resumes). A failed investigation is an error of one sentence.
func (c *Client) Watch(ctx context.Context, r Renderer, id string, from int) error {
	f := c.newFollower(id, r)
	f.seq = from - 1
	if err := f.start(ctx, false); err != nil {
		return err
	}
	r.Notice("", fmt.Sprintf("Watching investigation %s (Ctrl-C stops watching, not the investigation)\nWeb UI: %s\n", id, c.WorkflowURL(id)))
	end, err := f.run(ctx)
	if err != nil {
		return err
	}
	return c.finish(ctx, f, end, true)
}

// FollowInvestigation renders a new investigation's events until its first
// conclusion, then its totals; the investigation stays open for follow-ups.
func (c *Client) FollowInvestigation(ctx context.Context, r Renderer, id string) error {
	return c.followTurn(ctx, r, id, 0, firstConclusion)
}

// FollowAnswer renders the events that follow a follow-up question, from
// the one after the event that recorded it (ack, from Steer), until the
// conclusion of the turn that answers it. Turns queued before the question
// are rendered and followed past.
//
// A workflow that completes before that conclusion (a stop drops the
// questions queued) did not answer it: that is an error, and no result
// follows, so neither a person nor a script reading --json takes an
// earlier turn's conclusion for the answer.
func (c *Client) FollowAnswer(ctx context.Context, r Renderer, id, question string, ack investigation.Ack) error {
	after, until := ack.Seq, turnConclusion(question, ack.Seq)
	if ack.Seq == 0 {
		// An earlier run recorded the question (this was a retry across
		// continue-as-new), so its event number is unknown: follow from
		// now to the next conclusion.
		if st, err := c.src.status(ctx, id); err == nil {
			after = st.LastSeq
		}
		until = firstConclusion
	}
	stopped, reason := false, ""
	f, end, err := c.follow(ctx, r, id, after, func(e investigation.Event) bool {
		if e.Kind == investigation.EventStop {
			stopped, reason = true, e.Text
		}
		return until(e)
	})
	if err != nil {
		return err
	}
	if end.how == endClosed && end.status == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		switch {
		case end.unread != nil:
			return fmt.Errorf("investigation %s completed, and whether it answered the question cannot be read: %s", id, unreadWhy(end.unread))
		case stopped:
			// The stop's reason reads "stopped by the analyst[: what they said]".
			return fmt.Errorf("investigation %s closed without answering the question: %s", id, cmp.Or(oneLine(reason), "it was stopped"))
		}
		return fmt.Errorf("investigation %s closed without answering the question", id)
	}
	return c.finish(ctx, f, end, false)
}

// FollowStop renders the events that follow a stop (ack, from Steer) until
// the conclusion it leads to, then the totals; a stop while idle closes the
// investigation, which then ends the following with its last conclusion.
func (c *Client) FollowStop(ctx context.Context, r Renderer, id string, ack investigation.Ack) error {
	after := ack.Seq
	if ack.Seq == 0 { // recorded by an earlier run: follow from now
		if st, err := c.src.status(ctx, id); err == nil {
			after = st.LastSeq
		}
	}
	return c.followTurn(ctx, r, id, after, firstConclusion)
}

// turnConclusion is met by the conclusion of the turn that answers
// question, queued by the note numbered queued: the first conclusion after
// the turn event that names that note (turns run one after the other, so
// it is that turn's). A turn that names no note (recorded before turns
// did) is matched by its text: the same question queued twice then stops
// at the first one's conclusion.
func turnConclusion(question string, queued int) func(investigation.Event) bool {
	q := strings.TrimSpace(question)
	matched := false
	ours := func(e investigation.Event) bool {
		if e.Queued != 0 {
			return e.Queued == queued
		}
		return strings.TrimSpace(e.Text) == q
	}
	return func(e investigation.Event) bool {
		switch {
		case !matched && e.Kind == investigation.EventTurn && ours(e):
			matched = true
		case matched && e.Kind == investigation.EventConclusion:
			return true
		}
		return false
	}
}

// firstConclusion is met by the first conclusion rendered.
func firstConclusion(e investigation.Event) bool { return e.Kind == investigation.EventConclusion }

// followTurn follows an investigation from event after+1 (starting at its
// latest run) until until is met, the investigation closes, or ctx ends.
func (c *Client) followTurn(ctx context.Context, r Renderer, id string, after int, until func(investigation.Event) bool) error {
	f, end, err := c.follow(ctx, r, id, after, until)
	if err != nil {
		return err
	}
	return c.finish(ctx, f, end, false)
}

// follow is followTurn without its ending: how following ended, to be
// finished by the caller.
func (c *Client) follow(ctx context.Context, r Renderer, id string, after int, until func(investigation.Event) bool) (*follower, followEnd, error) {
	f := c.newFollower(id, r)
	f.seq = after
	f.until = until
	if err := f.start(ctx, true); err != nil {
		return nil, followEnd{}, err
	}
	end, err := f.run(ctx)
	return f, end, err
}

// finish renders how following ended, with the investigation's totals, or
// returns its failure as one sentence.
func (c *Client) finish(ctx context.Context, f *follower, end followEnd, watch bool) error {
	e := Ending{ID: f.id, Watch: watch}
	switch end.how {
	case endInterrupted:
		// Not a success: a script reading `investigate --json` must not
		// take a killed follower for a concluded investigation.
		return f.interrupted()
	case endUntil:
		if st, err := c.turnStatus(ctx, f.id, f.session, f.seq); err == nil {
			e.Status = &st
		} else if d, err := c.src.describe(ctx, f.id, ""); err == nil && d.status == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			// An investigation without the status query: the totals come
			// with its result once it completed.
			if res, err := c.src.outcome(ctx, f.id, d.runID); err == nil {
				e.Result = &res
			}
		}
		f.r.End(e)
		return nil
	}
	res, err := c.src.outcome(ctx, f.id, end.runID)
	if end.unread != nil {
		if end.status != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED || err != nil {
			return fmt.Errorf("investigation %s %s, and its progress cannot be read: %s", f.id, howClosed(end.status, err), unreadWhy(end.unread))
		}
		f.r.Notice("", fmt.Sprintf("(events from %d on cannot be read: %s)", f.seq+1, unreadWhy(end.unread)))
	}
	if end.status != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED || err != nil && !watch {
		switch end.status {
		case enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
			return fmt.Errorf("investigation %s was cancelled: it ended without a conclusion", f.id)
		case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
			// Not a failure of the investigation's own: "was terminated".
			return fmt.Errorf("investigation %s %s", f.id, howClosed(end.status, err))
		}
		if err == nil {
			err = errors.New("it " + statusWord(end.status))
		}
		return fmt.Errorf("investigation %s failed: %s", f.id, FailureMessage(err))
	}
	e.Closed = true
	if err == nil {
		e.Result = &res
	}
	f.r.End(e)
	return nil
}

// turnStatus is the status to end a followed turn with. The status the run
// stored with the events just printed answers without a trip through a
// worker (the status query's), when it is that recent and the run was idle
// when it stored it, as the query would find it; else the query answers.
func (c *Client) turnStatus(ctx context.Context, id, session string, seq int) (investigation.Status, error) {
	if st, _, ok, _ := c.storedStatus(ctx, session); ok && st.LastSeq >= seq && st.Phase == investigation.PhaseIdle {
		return st, nil
	}
	return c.src.status(ctx, id)
}

// howClosed says how a closed run ended, from its status and the error its
// result gave: "was terminated", "timed out", "failed: <reason>".
func howClosed(st enums.WorkflowExecutionStatus, err error) string {
	switch st {
	case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "was " + statusWord(st)
	case enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	case enums.WORKFLOW_EXECUTION_STATUS_FAILED:
		if err != nil {
			return "failed (" + FailureMessage(err) + ")"
		}
		return "failed"
	}
	return statusWord(st)
}

// unreadWhy is why a closed run's progress query failed, for people.
func unreadWhy(err error) string {
	switch {
	// The follower checked its context was live when the query failed.
	case noAnswer(context.Background(), err):
		return "no worker answered for its run"
	case strings.Contains(err.Error(), "closed before WorkflowTaskStarted"):
		return "it closed before a worker ran it" // the server's words for it
	}
	return "its progress query failed (" + err.Error() + ")"
}
