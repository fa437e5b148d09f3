package agentclient

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
)

func TestStatusCommand(t *testing.T) {
	f := newFakeStream("inv", &fakeRun{id: "A", status: running})
	f.st = investigation.Status{Phase: investigation.PhaseExecuting, Turn: 1, Request: "r", LastSeq: 3}
	f.st.Usage = investigation.Usage{Calls: 2, PromptTokens: 1_000_000, Model: "gemini-2.5-flash"}
	f.st.ByPhase.Plan = f.st.Usage
	var out strings.Builder
	c := testClient(f)
	c.prices = pricing.Default()
	require.NoError(t, c.ShowStatus(testCtx(t), &out, "inv", true))
	require.Contains(t, out.String(), `"phase": "executing"`)
	require.Contains(t, out.String(), `"last_seq": 3`)
	require.Regexp(t, `"cost": \{\s*"amount": 0.3,\s*"currency": "USD"`, out.String(), "the status carries its cost estimate: 1M prompt tokens at 0.30 USD")

	out.Reset()
	require.NoError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false))
	require.Contains(t, out.String(), "  phase:    executing\n")

	// The verdict and how it came to be, in text and JSON.
	f.st.Verdict = &investigation.Verdict{Verdict: "benign", Confidence: "medium", Reason: "approved pentest"}
	f.st.VerdictHistory = []investigation.VerdictChange{{Turn: 1, Verdict: "true_positive", Confidence: "high", Reason: "login after failures"},
		{Turn: 3, Verdict: "benign", Confidence: "medium", Reason: "approved pentest"}}
	out.Reset()
	require.NoError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false))
	require.Contains(t, out.String(), "VERDICT  benign (medium confidence)\n  why: approved pentest\n")
	require.Contains(t, out.String(), "Verdict history:\n  - turn 1: true_positive (high): login after failures\n  - turn 3: benign (medium): approved pentest\n")
	out.Reset()
	require.NoError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", true))
	require.Contains(t, out.String(), `"verdict_history": [`)

	f.stErr = serviceerror.NewNotFound("workflow not found")
	require.EqualError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false), "no investigation with ID inv")
	f.stErr = serviceerror.NewQueryFailed("unknown queryType status. KnownQueryTypes=[progress]")
	require.EqualError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false), "investigation inv does not answer status queries: it runs an older version of the workflow")
}

// storedOnly is a progress store holding only a stored status.
type storedOnly struct{ st investigation.Status }

func (s storedOnly) After(context.Context, string, int, int) ([]investigation.Event, error) {
	return nil, nil
}

func (s storedOnly) Watch(ctx context.Context, _ string, _ int, _ func([]investigation.Event)) error {
	<-ctx.Done()
	return nil
}

func (s storedOnly) Status(context.Context, string) (investigation.Status, time.Time, bool, error) {
	return s.st, time.Now(), true, nil
}

// A followed turn ends with the status its run stored with the conclusion
// when that is recent and idle (no query, which needs a worker); a stale or
// busy stored status leaves the answer to the query.
func TestTurnStatusPrefersTheStoredIdleStatus(t *testing.T) {
	f := newFakeStream("inv", &fakeRun{id: "A", status: running})
	f.st = investigation.Status{Phase: investigation.PhaseExecuting, LastSeq: 9, Request: "from the query"}
	c := testClient(f)
	for _, tc := range []struct {
		name   string
		stored investigation.Status
		want   string
	}{
		{"idle, with the conclusion", investigation.Status{Phase: investigation.PhaseIdle, LastSeq: 7, Request: "stored"}, "stored"},
		{"idle, stored before the conclusion", investigation.Status{Phase: investigation.PhaseIdle, LastSeq: 6, Request: "stored"}, "from the query"},
		{"busy", investigation.Status{Phase: investigation.PhaseConcluding, LastSeq: 7, Request: "stored"}, "from the query"},
	} {
		c.progress = storedOnly{tc.stored}
		st, err := c.turnStatus(testCtx(t), "inv", "inv", 7)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, st.Request, tc.name)
	}
}

// hangingStore is a progress store whose Firestore does not answer (the
// client waits for a connection until its context ends); its listener
// delivers events first.
type hangingStore struct {
	first     []investigation.Event
	delivered chan struct{} // closed once first was delivered
}

func (hangingStore) After(ctx context.Context, _ string, _, _ int) ([]investigation.Event, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s hangingStore) Watch(ctx context.Context, _ string, _ int, got func([]investigation.Event)) error {
	if len(s.first) > 0 {
		got(s.first)
		close(s.delivered)
	}
	<-ctx.Done()
	return ctx.Err()
}

func (hangingStore) Status(ctx context.Context, _ string) (investigation.Status, time.Time, bool, error) {
	<-ctx.Done()
	return investigation.Status{}, time.Time{}, false, ctx.Err()
}

// TestStoreCallsAreBounded: every read of a progress store that does not
// answer ends after the call timeout: status then says which store did
// not answer (when no worker answered either), a followed turn ends with
// the query's status, and a follower reads the events from Temporal.
func TestStoreCallsAreBounded(t *testing.T) {
	fastPolling(t)
	oldFirst, oldMax := quietFirst, quietMax
	quietFirst, quietMax = 10*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { quietFirst, quietMax = oldFirst, oldMax })
	down := "Firestore at 127.0.0.1:1 did not answer within 50ms; is the emulator running?"
	client := func(f *fakeStream, store ProgressStore) *Client {
		c := testClient(f)
		c.timeout, c.progress, c.progressDown = 50*time.Millisecond, store, func() string { return down }
		return c
	}
	noWorker := serviceerror.NewDeadlineExceeded("context deadline exceeded")
	for _, status := range []enums.WorkflowExecutionStatus{completed, running} {
		f := newFakeStream("inv", &fakeRun{id: "A", status: status})
		f.st = investigation.Status{Request: "from the query"}
		st, err := client(f, hangingStore{}).Status(testCtx(t), "inv")
		require.NoError(t, err, status)
		require.Equal(t, "from the query", st.Request, status)
		f.stErr = noWorker
		_, err = client(f, hangingStore{}).Status(testCtx(t), "inv")
		require.EqualError(t, err, down, status)
	}
	// A closed run that no worker ever ran fails its query at once: the
	// store asked first is what did not answer.
	f := newFakeStream("inv", &fakeRun{id: "A", status: enums.WORKFLOW_EXECUTION_STATUS_TERMINATED})
	f.stErr = serviceerror.NewFailedPrecondition("Workflow execution closed before WorkflowTaskStarted event")
	_, err := client(f, hangingStore{}).Status(testCtx(t), "inv")
	require.EqualError(t, err, down)

	f = newFakeStream("inv", &fakeRun{id: "A", status: running})
	f.st = investigation.Status{Request: "from the query"}
	st, err := client(f, hangingStore{}).turnStatus(testCtx(t), "inv", "inv", 7)
	require.NoError(t, err)
	require.Equal(t, "from the query", st.Request)

	// The listener delivers events 1-2 (no worker answers meanwhile); then
	// the run closes with 3, which only a read of the store (hanging) or
	// of Temporal finds.
	run := &fakeRun{id: "A", status: running, events: notes(1, 3), queryErr: noWorker}
	f = newFakeStream("inv", run)
	store := hangingStore{first: notes(1, 2), delivered: make(chan struct{})}
	f.onDescribe = func(n int) {
		switch n {
		case 2:
			<-store.delivered
		case 3:
			run.status, run.queryErr = completed, nil
		}
	}
	var out strings.Builder
	require.NoError(t, client(f, store).watch(testCtx(t), &out, "inv", 1))
	require.Equal(t, seqs(1, 3), printedNotes(out.String()))
	require.Contains(t, out.String(), "("+down+"; reading the events from Temporal)")
}

// TestStatusNoWorkerWhateverTheText: a status query no worker answers
// fails with DeadlineExceeded or Canceled and any of several texts (the
// server's, the SDK's deadline, the stream reset as it fires); each is
// "no worker answered": the stored status answers, or, with none, the
// sentence names the wait the query really took.
func TestStatusNoWorkerWhateverTheText(t *testing.T) {
	for _, noWorker := range []error{
		status.Error(codes.DeadlineExceeded, "query timed out before a worker could process it"),
		status.Error(codes.Canceled, "stream terminated by RST_STREAM with error code: CANCEL"),
		serviceerror.NewDeadlineExceeded("stream terminated by RST_STREAM with error code: CANCEL"),
		serviceerror.NewCanceled("context canceled"),
		fmt.Errorf("query: %w", serviceerror.NewDeadlineExceeded("query timed out before a worker could process it")),
	} {
		f := newFakeStream("inv", &fakeRun{id: "A", status: running})
		f.stErr, f.stDelay = noWorker, 300*time.Millisecond
		c := testClient(f)
		c.progress = storedOnly{investigation.Status{Request: "stored"}}
		var out strings.Builder
		require.NoError(t, c.ShowStatus(testCtx(t), &out, "inv", false), noWorker.Error())
		require.Contains(t, out.String(), "no worker answered for it", noWorker.Error())
		require.Contains(t, out.String(), "  request:  stored\n", noWorker.Error())

		err := testClient(f).ShowStatus(testCtx(t), &out, "inv", false)
		require.Error(t, err)
		require.Regexp(t, `^investigation inv did not answer within 3\d0ms: is a worker running on task queue "investigations"\?$`, err.Error())
	}
	// Canceled because the caller gave up is not a worker's silence.
	f := newFakeStream("inv", &fakeRun{id: "A", status: running})
	f.stErr = status.Error(codes.Canceled, "context canceled")
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	c := testClient(f)
	c.progress = storedOnly{investigation.Status{Request: "stored"}}
	_, err := c.Status(ctx, "inv")
	require.EqualError(t, err, "interrupted before investigation inv answered")
}
