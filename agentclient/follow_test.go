package agentclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/payloadcodec"
)

var (
	noteLine      = regexp.MustCompile(`(?m)^  note: e(\d+)$`)
	childNoteLine = regexp.MustCompile(`(?m)^    \[bigquery\]   note: c(\d+)$`)
)

// printedNotes returns the numbers of the note events printed, in order.
func printedNotes(out string) []string { return numbers(noteLine, out) }

// numbers returns the numbers that re's lines in out hold, in order.
func numbers(re *regexp.Regexp, out string) []string {
	var got []string
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		got = append(got, m[1])
	}
	return got
}

func seqs(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

// TestWatchAcrossContinueAsNew: the watcher drains a run that continued as
// new before it reads the next one (event 5 comes only from the old run, and
// the new run would answer "after 4" with 6 and on), and walks several runs
// that started between two polls.
func TestWatchAcrossContinueAsNew(t *testing.T) {
	fastPolling(t)
	a := &fakeRun{id: "A", events: notes(1, 3), status: running}
	f := newFakeStream("inv", a)
	f.onDescribe = func(n int) {
		switch n {
		case 2:
			a.events = notes(1, 4)
		case 3: // A records 5, then continues as new as B, which goes on at 6
			a.events, a.status, a.next = notes(1, 5), canStatus, "B"
			f.add("inv", &fakeRun{id: "B", events: notes(6, 7), status: running})
		case 5: // B records 8 and continues as new twice before the next poll
			b := f.wfs["inv"][1]
			b.events, b.status, b.next = notes(6, 8), canStatus, "C"
			f.add("inv", &fakeRun{id: "C", events: notes(9, 10), status: canStatus, next: "D"})
			f.add("inv", &fakeRun{id: "D", events: notes(11, 11), status: running})
		case 7:
			d := f.wfs["inv"][3]
			d.events, d.status = notes(11, 12), completed
		}
	}
	f.result = investigation.Result{Spend: spend(4, investigation.Usage{Calls: 1, PromptTokens: 100, OutputTokens: 10, Model: "gemini-2.5-flash"},
		investigation.Usage{Calls: 8, PromptTokens: 800, OutputTokens: 70, ThoughtTokens: 10, Model: "gemini-2.5-flash"})}
	var out strings.Builder
	err := testClient(f).watch(testCtx(t), &out, "inv", 1)
	require.NoError(t, err, out.String())
	require.Equal(t, seqs(1, 12), printedNotes(out.String()), out.String())
	require.Contains(t, out.String(), "Watching investigation inv")
	require.True(t, strings.HasSuffix(out.String(), "\ninvestigation inv completed: 4 tool calls, 9 model calls (900 prompt + 90 output tokens; by phase: plan 110, steps 880, reflection 0, conclusion 0, sub-agent 0); estimated cost 0.0005 USD\n"), out.String())
	require.NotContains(t, out.String(), "no longer available")
}

// TestWatchFrom re-attaches after a disconnect: from event 6, across runs,
// without repeating what was seen.
func TestWatchFrom(t *testing.T) {
	fastPolling(t)
	f := newFakeStream("inv",
		&fakeRun{id: "A", events: notes(1, 5), status: canStatus, next: "B"},
		&fakeRun{id: "B", events: notes(6, 8), status: canStatus, next: "C"},
		&fakeRun{id: "C", events: notes(9, 10), status: completed},
	)
	var out strings.Builder
	require.NoError(t, testClient(f).watch(testCtx(t), &out, "inv", 7))
	require.Equal(t, seqs(7, 10), printedNotes(out.String()), out.String())
}

// TestWatchLostEvents: events no run holds any more (retention) are named
// once, and the watch goes on.
func TestWatchLostEvents(t *testing.T) {
	fastPolling(t)
	f := newFakeStream("inv", &fakeRun{id: "A", events: notes(5, 6), status: completed})
	var out strings.Builder
	require.NoError(t, testClient(f).watch(testCtx(t), &out, "inv", 1))
	require.Equal(t, seqs(5, 6), printedNotes(out.String()))
	require.Equal(t, 1, strings.Count(out.String(), "(events 1 to 4 are no longer available)"), out.String())
}

// TestWatchChildRun: an event naming a child run makes the watcher read the
// child's events too, prefixed, while the parent's events keep coming.
func TestWatchChildRun(t *testing.T) {
	fastPolling(t)
	parent := &fakeRun{id: "P", status: running, events: []investigation.Event{
		{Seq: 1, Kind: investigation.EventNote, Text: "e1"},
		{Seq: 2, Kind: investigation.EventToolCall, Text: "bigquery_agent logins", Child: "inv/bq-1"},
	}}
	f := newFakeStream("inv", parent)
	child := &fakeRun{id: "K", status: running, events: []investigation.Event{
		{Seq: 1, Kind: investigation.EventNote, Text: "c1"},
	}}
	f.add("inv/bq-1", child)
	f.onDescribe = func(n int) {
		switch n {
		case 3: // the parent goes on while the child still runs
			parent.events = append(parent.events, notes(3, 3)...)
		case 5:
			child.events = append(child.events, investigation.Event{Seq: 2, Kind: investigation.EventNote, Text: "c2"})
			child.status = completed
			parent.events = append(parent.events, investigation.Event{Seq: 4, Kind: investigation.EventToolResult, Text: "bigquery_agent: 3 logins"})
		case 7:
			parent.status = completed
		}
	}
	var out strings.Builder
	require.NoError(t, testClient(f).watch(testCtx(t), &out, "inv", 1))
	s := out.String()
	for _, line := range []string{"  note: e1\n", "  -> bigquery_agent logins\n", "    [bigquery]   note: c1\n", "  note: e3\n", "    [bigquery]   note: c2\n", "  <- bigquery_agent: 3 logins\n"} {
		require.Equal(t, 1, strings.Count(s, line), "%q once in:\n%s", line, s)
	}
	require.Less(t, strings.Index(s, "note: c1"), strings.Index(s, "note: e3"), s)
	require.Less(t, strings.Index(s, "note: e3"), strings.Index(s, "note: c2"), "the parent does not wait for the child:\n%s", s)
}

func TestWatchFailedInvestigation(t *testing.T) {
	fastPolling(t)
	f := newFakeStream("inv", &fakeRun{id: "A", events: notes(1, 2), status: failed})
	f.resultErr = temporal.NewApplicationError("planning failed: Gemini rejected the credentials (HTTP 401)", "InvestigationFailed")
	var out strings.Builder
	err := testClient(f).watch(testCtx(t), &out, "inv", 1)
	require.EqualError(t, err, "investigation inv failed: planning failed: Gemini rejected the credentials (HTTP 401)")
	require.Equal(t, seqs(1, 2), printedNotes(out.String()))
}

// A cancelled investigation is said to be cancelled, not failed.
func TestWatchCancelledInvestigation(t *testing.T) {
	fastPolling(t)
	f := newFakeStream("inv", &fakeRun{id: "A", events: notes(1, 2), status: enums.WORKFLOW_EXECUTION_STATUS_CANCELED})
	f.resultErr = temporal.NewCanceledError()
	var out strings.Builder
	err := testClient(f).watch(testCtx(t), &out, "inv", 1)
	require.EqualError(t, err, "investigation inv was cancelled: it ended without a conclusion")
	require.Equal(t, seqs(1, 2), printedNotes(out.String()))
}

// A terminated or timed-out investigation is said to be so, not to have
// failed: no failure of its own ended it.
func TestWatchTerminatedOrTimedOutInvestigation(t *testing.T) {
	fastPolling(t)
	for _, c := range []struct {
		status    enums.WorkflowExecutionStatus
		resultErr error
		want      string
	}{
		{enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, &temporal.TerminatedError{}, "investigation inv was terminated"},
		{enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_START_TO_CLOSE, nil), "investigation inv timed out"},
	} {
		f := newFakeStream("inv", &fakeRun{id: "A", events: notes(1, 2), status: c.status})
		f.resultErr = c.resultErr
		var out strings.Builder
		require.EqualError(t, testClient(f).watch(testCtx(t), &out, "inv", 1), c.want)
		require.EqualError(t, testClient(f).followText(testCtx(t), &out, "inv", 0, firstConclusion), c.want)
	}
}

// TestWatchClosedRunNoWorkerAnswers: a closed run answers progress
// queries only through a worker replaying it; when none answers within
// the call timeout, following ends with one sentence naming how the run
// closed (a completed one with its result), where it used to wait for
// ever, with or without the progress store.
func TestWatchClosedRunNoWorkerAnswers(t *testing.T) {
	fastPolling(t)
	noWorker := serviceerror.NewDeadlineExceeded("context deadline exceeded")
	for _, c := range []struct {
		status    enums.WorkflowExecutionStatus
		resultErr error
		want      string
	}{
		{enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, &temporal.TerminatedError{}, "investigation inv was terminated, and its progress cannot be read: no worker answered for its run"},
		{enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, temporal.NewTimeoutError(enums.TIMEOUT_TYPE_START_TO_CLOSE, nil), "investigation inv timed out, and its progress cannot be read: no worker answered for its run"},
		{enums.WORKFLOW_EXECUTION_STATUS_CANCELED, temporal.NewCanceledError(), "investigation inv was cancelled, and its progress cannot be read: no worker answered for its run"},
		{failed, temporal.NewApplicationError("planning failed", "InvestigationFailed"), "investigation inv failed (planning failed), and its progress cannot be read: no worker answered for its run"},
		{completed, nil, ""},
	} {
		for _, withStore := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s store=%v", statusWord(c.status), withStore), func(t *testing.T) {
				f := newFakeStream("inv", &fakeRun{id: "A", status: c.status, queryErr: noWorker})
				f.resultErr = c.resultErr
				f.result = investigation.Result{Conclusion: "benign"}
				cl := testClient(f)
				cl.timeout = 50 * time.Millisecond
				if withStore {
					cl.progress = &lossyStore{}
				}
				var out strings.Builder
				err := cl.watch(testCtx(t), &out, "inv", 1)
				if c.want == "" {
					require.NoError(t, err)
					require.Contains(t, out.String(), "(events from 1 on cannot be read: no worker answered for its run)")
					require.Contains(t, out.String(), "investigation inv completed")
					return
				}
				require.EqualError(t, err, c.want)
			})
		}
	}
}

// TestWatchClosedRunGivesUpAfterFewQueries: with the default call timeout
// (30s), five failed queries of the closed run are enough.
func TestWatchClosedRunGivesUpAfterFewQueries(t *testing.T) {
	fastPolling(t)
	f := newFakeStream("inv", &fakeRun{id: "A", status: enums.WORKFLOW_EXECUTION_STATUS_TERMINATED,
		queryErr: serviceerror.NewDeadlineExceeded("context deadline exceeded")})
	f.resultErr = &temporal.TerminatedError{}
	ctx, cancel := context.WithTimeout(testCtx(t), 3*time.Second)
	defer cancel()
	var out strings.Builder
	err := testClient(f).watch(ctx, &out, "inv", 1)
	require.EqualError(t, err, "investigation inv was terminated, and its progress cannot be read: no worker answered for its run")

	// Terminated before any worker took it: the server says so at once.
	f.wfs["inv"][0].queryErr = serviceerror.NewFailedPrecondition("Workflow execution closed before WorkflowTaskStarted event")
	err = testClient(f).watch(ctx, &out, "inv", 1)
	require.EqualError(t, err, "investigation inv was terminated, and its progress cannot be read: it closed before a worker ran it")
}

func TestWatchUnknownInvestigation(t *testing.T) {
	f := newFakeStream("inv")
	var out strings.Builder
	err := testClient(f).watch(testCtx(t), &out, "nope", 1)
	require.EqualError(t, err, "no investigation with ID nope")
}

// TestInterruptedFollowingNamesTheResumePoint: Ctrl-C in watch and in
// investigate (and ask) is an error (no exit code 0, which a script would
// take for a conclusion) saying which --from resumes after the last event
// shown.
func TestInterruptedFollowingNamesTheResumePoint(t *testing.T) {
	watchFrom := func(from int) func(context.Context, stream, io.Writer) error {
		return func(ctx context.Context, src stream, out io.Writer) error {
			return testClient(src).watch(ctx, out, "inv", from)
		}
	}
	investigate := func(ctx context.Context, src stream, out io.Writer) error {
		return testClient(src).followText(ctx, out, "inv", 0, firstConclusion)
	}
	investigateJSON := func(ctx context.Context, src stream, out io.Writer) error {
		return testClient(src).followTurn(ctx, NewJSONRenderer(out, io.Discard, pricing.Default()), "inv", 0, firstConclusion)
	}
	for _, c := range []struct {
		name   string
		events []investigation.Event
		follow func(context.Context, stream, io.Writer) error
		want   string
	}{
		{"watch", notes(1, 1), watchFrom(1), "after event 1; the investigation goes on (resume with: starter watch inv --from 2)"},
		{"watch with nothing new", notes(1, 4), watchFrom(5), "before any new event; the investigation goes on (resume with: starter watch inv --from 5)"},
		{"investigate", notes(1, 3), investigate, "after event 3; the investigation goes on (resume with: starter watch inv --from 4)"},
		{"investigate --json", notes(1, 3), investigateJSON, "after event 3; the investigation goes on (resume with: starter watch inv --from 4 --json)"},
		{"investigate before the first event", nil, investigate, "before any new event; the investigation goes on (resume with: starter watch inv --from 1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fastPolling(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := newFakeStream("inv", &fakeRun{id: "A", events: c.events, status: running})
			f.onDescribe = func(n int) {
				if n == 3 {
					cancel()
				}
			}
			var out strings.Builder
			err := c.follow(ctx, f, &out)
			require.EqualError(t, err, "stopped watching "+c.want)
			require.IsType(t, &InterruptedError{}, err)
			require.NotContains(t, out.String(), "stopped watching", "said once, as the error")
		})
	}
}

// TestWatchPagesThroughAClosedRun: a query answers at most
// MaxProgressEvents events; the watcher reads the next page at once and ends
// only after a page that is not full.
func TestWatchPagesThroughAClosedRun(t *testing.T) {
	fastPolling(t)
	f := newFakeStream("inv", &fakeRun{id: "A", events: notes(1, 450), status: completed})
	var out strings.Builder
	require.NoError(t, testClient(f).watch(testCtx(t), &out, "inv", 1))
	require.Equal(t, seqs(1, 450), printedNotes(out.String()))
	require.True(t, strings.HasSuffix(out.String(), "\ninvestigation inv completed: 0 tool calls, 0 model calls (0 prompt + 0 output tokens; by phase: plan 0, steps 0, reflection 0, conclusion 0, sub-agent 0); estimated cost 0.0000 USD\n"), out.String())
	require.Equal(t, []string{"inv/A>0", "inv/A>200", "inv/A>400"}, f.queries)
	require.Equal(t, 2, f.describes, "one tick after the start")
}

// TestWatchPagesAcrossContinueAsNew: full pages from a closed run and from
// the running latest one are read at once, and a latest run that closed with
// more than a page left is read to its end.
func TestWatchPagesAcrossContinueAsNew(t *testing.T) {
	fastPolling(t)
	var out strings.Builder
	b := &fakeRun{id: "B", events: notes(451, 900), status: running}
	f := newFakeStream("inv", &fakeRun{id: "A", events: notes(1, 450), status: canStatus, next: "B"}, b)
	var atSecondTick []string
	f.onDescribe = func(n int) {
		if n == 3 {
			atSecondTick = printedNotes(out.String())
			b.events, b.status = notes(451, 1150), completed
		}
	}
	require.NoError(t, testClient(f).watch(testCtx(t), &out, "inv", 1))
	require.Equal(t, seqs(1, 900), atSecondTick, "the first tick read every page")
	require.Equal(t, seqs(1, 1150), printedNotes(out.String()))
	require.Contains(t, out.String(), "\ninvestigation inv completed")
}

// TestWatchPagesThroughAChildRun: a closed child run with more than a page
// of events is printed to its end.
func TestWatchPagesThroughAChildRun(t *testing.T) {
	fastPolling(t)
	f := newFakeStream("inv", &fakeRun{id: "P", status: completed, events: []investigation.Event{
		{Seq: 1, Kind: investigation.EventToolCall, Text: "bigquery_agent logins", Child: "inv/bq-1"},
	}})
	f.add("inv/bq-1", &fakeRun{id: "K", status: completed, events: notesNamed("c", 1, 450)})
	var out strings.Builder
	require.NoError(t, testClient(f).watch(testCtx(t), &out, "inv", 1))
	require.Equal(t, seqs(1, 450), numbers(childNoteLine, out.String()), out.String())
}

// TestWatchWaitsForOldRun: when the old run cannot be queried for a while
// (no worker), the watcher keeps asking it rather than skipping to the new
// run and losing its last events.
func TestWatchWaitsForOldRun(t *testing.T) {
	fastPolling(t)
	a := &fakeRun{id: "A", events: notes(1, 3), status: canStatus, next: "B", queryErr: errors.New("no poller")}
	f := newFakeStream("inv", a, &fakeRun{id: "B", events: notes(4, 4), status: running})
	f.onDescribe = func(n int) {
		switch n {
		case 4:
			a.queryErr = nil
		case 6:
			f.wfs["inv"][1].status = completed
		}
	}
	var out strings.Builder
	require.NoError(t, testClient(f).watch(testCtx(t), &out, "inv", 1))
	require.Equal(t, seqs(1, 4), printedNotes(out.String()), out.String())
}

// TestFollowTurnStopsAtTheConclusion: investigate stops once the first
// conclusion is printed, although the investigation stays open.
func TestFollowTurnStopsAtTheConclusion(t *testing.T) {
	fastPolling(t)
	evs := append(notes(1, 2),
		investigation.Event{Seq: 3, Kind: investigation.EventConclusion, Text: "## Summary\nBenign."},
		investigation.Event{Seq: 4, Kind: investigation.EventIdle, Text: "waiting up to 30m0s for follow-up questions"},
	)
	f := newFakeStream("inv", &fakeRun{id: "A", events: evs, status: running})
	f.st = investigation.Status{Phase: investigation.PhaseIdle, Spend: spend(2, investigation.Usage{Calls: 4, PromptTokens: 40, OutputTokens: 4})}
	var out strings.Builder
	require.NoError(t, testClient(f).followText(testCtx(t), &out, "inv", 0, firstConclusion))
	s := out.String()
	require.Equal(t, 1, strings.Count(s, "CONCLUSION"))
	require.Contains(t, s, "\n0 steps, 2 tool calls, 4 model calls (40 prompt + 4 output tokens; by phase: plan 44, steps 0, reflection 0, conclusion 0, sub-agent 0); no cost estimate (no price for (model not recorded): starter --prices)\n")
	require.Equal(t, 1, strings.Count(s, `(the investigation stays open for follow-up questions: starter ask inv "...")`), s)
}

// TestFollowTurnFailure: a failed investigation is one sentence and an error.
func TestFollowTurnFailure(t *testing.T) {
	fastPolling(t)
	f := newFakeStream("inv", &fakeRun{id: "A", events: notes(1, 1), status: failed})
	f.resultErr = temporal.NewApplicationError("planning failed: boom", "InvestigationFailed")
	var out strings.Builder
	err := testClient(f).followText(testCtx(t), &out, "inv", 0, firstConclusion)
	require.EqualError(t, err, "investigation inv failed: planning failed: boom")
}

// TestAskFollowsFromAnEarlierRun: the question was recorded (event 5) by a
// run that continued as new right after; following starts at the latest run,
// finds it starts later, and steps back to the run that holds event 5. It
// prints through a queued turn and stops at the asked question's conclusion.
func TestAskFollowsFromAnEarlierRun(t *testing.T) {
	fastPolling(t)
	q := "Did they get in?"
	turn := func(seq, n int, text string) investigation.Event {
		return investigation.Event{Seq: seq, Kind: investigation.EventTurn, Turn: n, Text: text, Mode: "plan"}
	}
	concl := func(seq, n int, text string) investigation.Event {
		return investigation.Event{Seq: seq, Kind: investigation.EventConclusion, Turn: n, Text: text}
	}
	f := newFakeStream("inv",
		&fakeRun{id: "A", events: append(notes(1, 5), notes(6, 6)...), status: canStatus, next: "B"},
		&fakeRun{id: "B", status: running, events: []investigation.Event{
			turn(7, 2, "An earlier question"), concl(8, 2, "earlier answer"),
			turn(9, 3, q), concl(10, 3, "They did not."),
			{Seq: 11, Kind: investigation.EventIdle},
		}},
	)
	f.st = investigation.Status{Phase: investigation.PhaseIdle}
	var out strings.Builder
	require.NoError(t, testClient(f).followText(testCtx(t), &out, "inv", 4, turnConclusion(" "+q+" ", 0)))
	s := out.String()
	require.Equal(t, seqs(5, 6), printedNotes(s), s)
	require.Contains(t, s, "earlier answer")
	require.Contains(t, s, "=== FOLLOW-UP (turn 3, mode plan): Did they get in?")
	require.True(t, strings.Index(s, "They did not.") < strings.Index(s, "stays open"), s)
	require.Equal(t, 2, strings.Count(s, "CONCLUSION"))
	require.Contains(t, f.queries, "inv/B>4")
	require.Contains(t, f.queries, "inv/A>4", "stepped back to the run that holds event 5")
}

// TestFollowingGivesUpWhenTemporalStaysDown: a follower retries a failed
// describe at every tick, but not past the call timeout.
func TestFollowingGivesUpWhenTemporalStaysDown(t *testing.T) {
	fastPolling(t)
	f := newFakeStream("inv", &fakeRun{id: "A", status: running, events: notes(1, 2)})
	f.downFrom = 3 // start and the first tick work, then Temporal is gone
	c := testClient(f)
	c.cfg.Address = "temporal.example:7233"
	c.timeout = 50 * time.Millisecond
	var out strings.Builder
	err := c.watch(testCtx(t), &out, "inv", 1)
	require.EqualError(t, err, "Temporal at temporal.example:7233 did not answer within 50ms; is the server running?")
	require.Contains(t, out.String(), "note: e2", "what was read before is printed")
}

// TestWatchStopsOnKeyProblems: a payload that cannot be decrypted ends
// following at once with its sentence, where other query errors are waited
// out.
func TestWatchStopsOnKeyProblems(t *testing.T) {
	fastPolling(t)
	own := &payloadcodec.KeyError{KeyID: "k1", Reason: payloadcodec.ReasonNoKeyFile}
	f := newFakeStream("inv", &fakeRun{id: "A", status: running, queryErr: fmt.Errorf("decode: %w", own)})
	var out strings.Builder
	err := testClient(f).watch(testCtx(t), &out, "inv", 1)
	require.EqualError(t, err, "cannot follow investigation inv: "+own.Error())
	require.Len(t, f.queries, 1, "no retries")

	// The worker could not decrypt the input, so the run failed and answers
	// no query: its failure says why.
	f = newFakeStream("inv", &fakeRun{id: "A", status: failed, queryErr: errors.New("unknown queryType progress")})
	f.resultErr = errors.New("workflow execution error (type: Investigation): " + own.Error() + " (type: KeyError, retryable: true)")
	err = testClient(f).watch(testCtx(t), &out, "inv", 1)
	require.EqualError(t, err, "investigation inv failed: the worker reports: "+own.Error())

	// The worker cannot decrypt the input, so its workflow tasks fail (a
	// keyed worker may still take it) and the server refuses queries: the
	// last task failure says why.
	f = newFakeStream("inv", &fakeRun{id: "A", status: running,
		queryErr: serviceerror.NewWorkflowNotReady("Unable to query workflow due to Workflow Task in failed state.")})
	f.taskFailed = own.Error()
	err = testClient(f).watch(testCtx(t), &out, "inv", 1)
	require.EqualError(t, err, "cannot follow investigation inv: the worker reports: "+own.Error())
	// A task that fails for another reason is waited out, as before.
	f.taskFailed = "workflow panic: index out of range"
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	require.ErrorAs(t, testClient(f).watch(ctx, &out, "inv", 1), new(*InterruptedError))
}

// TestAskFollowsOnlyNewEvents: a follow-up question is followed from the
// event after the one that recorded it (the update's Ack.Seq): neither the
// conversation before it nor the recording event is shown again, even when
// an earlier turn asked the same question.
func TestAskFollowsOnlyNewEvents(t *testing.T) {
	fastPolling(t)
	q := "Did they get in?"
	events := append(notes(1, 2),
		investigation.Event{Seq: 3, Kind: investigation.EventTurn, Turn: 2, Text: q, Mode: "direct"},
		investigation.Event{Seq: 4, Kind: investigation.EventConclusion, Turn: 2, Text: "the old answer"},
		investigation.Event{Seq: 5, Kind: investigation.EventNote, Turn: 2, Text: "follow-up question queued: " + q},
		investigation.Event{Seq: 6, Kind: investigation.EventTurn, Turn: 3, Text: q, Mode: "plan"},
		investigation.Event{Seq: 7, Kind: investigation.EventNote, Turn: 3, Text: "e7"},
		investigation.Event{Seq: 8, Kind: investigation.EventConclusion, Turn: 3, Text: "the new answer"},
		investigation.Event{Seq: 9, Kind: investigation.EventIdle, Turn: 3},
	)
	f := newFakeStream("inv", &fakeRun{id: "A", events: events, status: running})
	f.st = investigation.Status{Phase: investigation.PhaseIdle, LastSeq: 9}
	var out strings.Builder
	require.NoError(t, testClient(f).FollowAnswer(testCtx(t), NewTextRenderer(&out, "inv", pricing.Default()), "inv", q, investigation.Ack{Seq: 5}))
	s := out.String()
	require.Equal(t, []string{"7"}, printedNotes(s), s)
	require.NotContains(t, s, "the old answer")
	require.NotContains(t, s, "follow-up question queued", "the recording event is the ack's, printed already")
	require.Contains(t, s, "=== FOLLOW-UP (turn 3, mode plan): Did they get in?")
	require.Contains(t, s, "the new answer")
	require.Equal(t, "inv/A>5", f.queries[0])
}

// TestAskRecordedByAnEarlierRun: a retried question that an earlier run
// recorded is acknowledged without an event number; following starts at
// the investigation's latest event and stops at the next conclusion.
func TestAskRecordedByAnEarlierRun(t *testing.T) {
	fastPolling(t)
	events := append(notes(1, 7), investigation.Event{Seq: 8, Kind: investigation.EventConclusion, Text: "the answer"})
	f := newFakeStream("inv", &fakeRun{id: "A", events: events, status: running})
	f.st = investigation.Status{Phase: investigation.PhaseIdle, LastSeq: 6}
	var out strings.Builder
	require.NoError(t, testClient(f).FollowAnswer(testCtx(t), NewTextRenderer(&out, "inv", pricing.Default()), "inv", "q", investigation.Ack{Message: "already recorded"}))
	require.Equal(t, []string{"7"}, printedNotes(out.String()), out.String())
	require.Contains(t, out.String(), "the answer")
}

// TestAskNotAnsweredIsAnError: the question was queued behind a running
// turn (event 5), then a stop ended the investigation with it unanswered.
// The earlier turn's conclusion is printed as what it is, an event, and
// ask fails with one sentence; --json gives no result line that would
// present that conclusion as the answer.
func TestAskNotAnsweredIsAnError(t *testing.T) {
	fastPolling(t)
	q := "Did they get in?"
	events := append(notes(1, 4),
		investigation.Event{Seq: 5, Kind: investigation.EventNote, Text: "follow-up question queued: " + q},
		investigation.Event{Seq: 6, Kind: investigation.EventStop, Text: "stopped by the analyst: enough"},
		investigation.Event{Seq: 7, Kind: investigation.EventConclusion, Text: "the first turn's answer"},
		investigation.Event{Seq: 8, Kind: investigation.EventNote, Text: "not answered, the investigation was stopped:", Notes: []string{q}},
	)
	f := newFakeStream("inv", &fakeRun{id: "A", events: events, status: enums.WORKFLOW_EXECUTION_STATUS_COMPLETED})
	f.result = investigation.Result{Conclusion: "the first turn's answer"}
	const want = "investigation inv closed without answering the question: stopped by the analyst: enough"
	var out strings.Builder
	err := testClient(f).FollowAnswer(testCtx(t), NewTextRenderer(&out, "inv", pricing.Default()), "inv", q, investigation.Ack{Seq: 5})
	require.EqualError(t, err, want)
	require.Equal(t, 1, strings.Count(out.String(), "the first turn's answer"), "printed once, as the event it is:\n%s", out.String())
	require.Contains(t, out.String(), "  note: not answered, the investigation was stopped: "+q)

	var lines, info strings.Builder
	err = testClient(f).FollowAnswer(testCtx(t), NewJSONRenderer(&lines, &info, pricing.Default()), "inv", q, investigation.Ack{Seq: 5})
	require.EqualError(t, err, want)
	require.NotContains(t, lines.String(), `"kind":"`+FinalKind+`"`, "no result line:\n%s", lines.String())

	// Without a stop seen (a retry whose event number is unknown), the
	// sentence says only that it was not answered.
	f = newFakeStream("inv", &fakeRun{id: "A", events: notes(1, 3), status: enums.WORKFLOW_EXECUTION_STATUS_COMPLETED})
	f.st = investigation.Status{LastSeq: 2}
	err = testClient(f).FollowAnswer(testCtx(t), NewTextRenderer(&out, "inv", pricing.Default()), "inv", q, investigation.Ack{})
	require.EqualError(t, err, "investigation inv closed without answering the question")
}

// TestAskTheSameQuestionTwice: the same question queued twice (events 5
// and 6) is answered by two turns; the second ask follows its own turn,
// the one that names its note (Queued), not the first one's conclusion.
// A turn recorded before turns named their note is matched by its text.
func TestAskTheSameQuestionTwice(t *testing.T) {
	fastPolling(t)
	q := "Did they get in?"
	events := append(notes(1, 4),
		investigation.Event{Seq: 5, Kind: investigation.EventNote, Turn: 1, Text: "follow-up question queued: " + q},
		investigation.Event{Seq: 6, Kind: investigation.EventNote, Turn: 1, Text: "follow-up question queued: " + q},
		investigation.Event{Seq: 7, Kind: investigation.EventTurn, Turn: 2, Text: q, Mode: "direct", Queued: 5},
		investigation.Event{Seq: 8, Kind: investigation.EventConclusion, Turn: 2, Text: "the first answer"},
		investigation.Event{Seq: 9, Kind: investigation.EventTurn, Turn: 3, Text: q, Mode: "direct", Queued: 6},
		investigation.Event{Seq: 10, Kind: investigation.EventConclusion, Turn: 3, Text: "the second answer"},
		investigation.Event{Seq: 11, Kind: investigation.EventIdle, Turn: 3},
	)
	f := newFakeStream("inv", &fakeRun{id: "A", events: events, status: running})
	f.st = investigation.Status{Phase: investigation.PhaseIdle, LastSeq: 11}
	var out strings.Builder
	require.NoError(t, testClient(f).FollowAnswer(testCtx(t), NewTextRenderer(&out, "inv", pricing.Default()), "inv", q, investigation.Ack{Seq: 6}))
	s := out.String()
	require.Contains(t, s, "the second answer", "followed to its own turn's conclusion:\n%s", s)
	require.True(t, strings.Index(s, "the first answer") < strings.Index(s, "the second answer"), s)

	match := turnConclusion(q, 6)
	require.False(t, match(investigation.Event{Kind: investigation.EventTurn, Text: q, Queued: 5}))
	require.False(t, match(investigation.Event{Kind: investigation.EventConclusion}), "another note's turn")
	match = turnConclusion(q, 6)
	require.False(t, match(investigation.Event{Kind: investigation.EventTurn, Text: q}))
	require.True(t, match(investigation.Event{Kind: investigation.EventConclusion}), "a turn recorded before: by its text")
}
