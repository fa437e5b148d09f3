package agentclient

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/investigation"
)

// sessionStore is a progress store of several sessions; it records which
// sessions were read.
type sessionStore struct {
	mu     sync.Mutex
	events map[string][]investigation.Event
	status map[string]investigation.Status
	read   []string
}

func (s *sessionStore) after(session string, after int) []investigation.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.read = append(s.read, session)
	var out []investigation.Event
	for _, e := range s.events[session] {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return out
}

func (s *sessionStore) After(_ context.Context, session string, after, _ int) ([]investigation.Event, error) {
	return s.after(session, after), nil
}

func (s *sessionStore) Watch(ctx context.Context, session string, after int, got func([]investigation.Event)) error {
	got(s.after(session, after))
	<-ctx.Done()
	return ctx.Err()
}

func (s *sessionStore) Status(_ context.Context, session string) (investigation.Status, time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.read = append(s.read, session)
	st, ok := s.status[session]
	return st, time.Now(), ok, nil
}

// TestReinvestigationIsReadFromItsSession: the intake's new run under the
// ID of a closed investigation stores its progress and status under the
// session its memo names; watch and status read them there, not the closed
// run's under the bare ID, whose numbers start at 1 too. A memo naming
// another investigation's session is not followed.
func TestReinvestigationIsReadFromItsSession(t *testing.T) {
	oldFirst, oldMax := quietFirst, quietMax
	quietFirst, quietMax = time.Millisecond, 5*time.Millisecond
	t.Cleanup(func() { quietFirst, quietMax = oldFirst, oldMax })
	const id = "intake-x-0123456789ab"
	session := intakeSession(id, time.Date(2026, 11, 30, 10, 15, 0, 0, time.UTC))
	require.Equal(t, id+"~20261130T101500.000000000Z", session)
	require.NoError(t, investigation.CheckSession(id, session), "the workflow accepts the session the intake gives it")
	newStore := func() *sessionStore {
		return &sessionStore{
			events: map[string][]investigation.Event{
				id:                      {{Seq: 1, Kind: investigation.EventNote, Text: "the closed run's conclusion"}},
				session:                 {{Seq: 1, Kind: investigation.EventNote, Text: "the new run's conclusion"}},
				"intake-y-0123456789ab": {{Seq: 1, Kind: investigation.EventNote, Text: "another investigation's conclusion"}},
			},
			status: map[string]investigation.Status{
				id:                      {Phase: investigation.PhaseIdle, LastSeq: 1, Request: "the closed run's question"},
				session:                 {Phase: investigation.PhaseIdle, LastSeq: 1, Request: "the new run's question"},
				"intake-y-0123456789ab": {Phase: investigation.PhaseIdle, LastSeq: 1, Request: "another investigation's question"},
			},
		}
	}
	for _, tc := range []struct{ name, memo, want string }{
		{"its own session", session, "the new run's"},
		{"another investigation's session", "intake-y-0123456789ab", "the closed run's"},
	} {
		run := &fakeRun{id: "B", status: running, session: tc.memo}
		f := newFakeStream(id, run)
		f.onDescribe = func(n int) {
			if n == 5 { // the store's events reach the follower while the run is open
				run.status = completed
			}
		}
		c := testClient(f)
		store := newStore()
		c.progress = store

		var out strings.Builder
		require.NoError(t, c.watch(testCtx(t), &out, id, 1), tc.name)
		require.Contains(t, out.String(), tc.want+" conclusion", tc.name)
		require.NotContains(t, out.String(), "another investigation's", tc.name)

		out.Reset()
		require.NoError(t, c.ShowStatus(testCtx(t), &out, id, false), tc.name)
		require.Contains(t, out.String(), tc.want+" question", tc.name)

		d, err := f.describe(testCtx(t), id, "")
		require.NoError(t, err)
		st, err := c.turnStatus(testCtx(t), id, d.session(id), 1)
		require.NoError(t, err)
		require.Equal(t, tc.want+" question", st.Request, tc.name)
	}
}

// TestIntakeReinvestigationGetsItsOwnSession: on a dev server, the intake's
// second run under an identity's workflow ID (the first one closed) gets a
// session of its own in its input and memo, the same for a retry of its
// start; a CLI start never reuses a closed investigation's ID.
func TestIntakeReinvestigationGetsItsOwnSession(t *testing.T) {
	tc := bareTemporal(t)
	c, err := New(tc, Options{Temporal: config.Temporal{Namespace: "default", TaskQueue: "sessions"}})
	require.NoError(t, err)
	const id = "intake-x-0123456789ab"
	start := func(admitted time.Time) IntakeStart {
		return IntakeStart{Start: Start{ID: id, Summary: "x", Input: investigation.Input{AlertID: "a1", Intake: &investigation.IntakeInput{Identity: "x"}}},
			Admitted: admitted, Severity: "high", Reinvestigate: true, RepeatWindow: time.Hour}
	}
	// inputSession is the Session the run's start input holds.
	inputSession := func(runID string) string {
		it := tc.GetWorkflowHistory(t.Context(), id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		e, err := it.Next()
		require.NoError(t, err)
		var in investigation.Input
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(e.GetWorkflowExecutionStartedEventAttributes().GetInput(), &in))
		return in.Session
	}
	sessions := map[string]bool{}
	for i := range 2 {
		admitted := time.Now()
		outcome, runID, _, found, err := c.StartIntake(t.Context(), start(admitted), io.Discard)
		require.NoError(t, err)
		require.Equal(t, IntakeStarted, outcome)
		require.False(t, found, "this call started the run")
		session := inputSession(runID)
		require.Equal(t, intakeSession(id, admitted), session)
		require.NoError(t, investigation.CheckSession(id, session))
		d, err := c.src.describe(t.Context(), id, "")
		require.NoError(t, err)
		require.Equal(t, session, d.session(id), "run %d: followers read the session from the memo", i+1)
		sessions[session] = true

		again, againRun, _, found, err := c.StartIntake(t.Context(), start(admitted), io.Discard)
		require.NoError(t, err)
		require.Equal(t, IntakeStarted, again, "a retry of the start finds its run")
		require.True(t, found, "a retry that finds its run says its input reached no run")
		require.Equal(t, runID, againRun)
		// A later admission's start finds the run open and learns its
		// session, so the admission can tell a run that said it closed.
		later, _, open, _, err := c.StartIntake(t.Context(), start(admitted.Add(time.Hour)), io.Discard)
		require.NoError(t, err)
		require.Equal(t, IntakeRunning, later)
		require.Equal(t, session, open)
		require.NoError(t, tc.TerminateWorkflow(t.Context(), id, runID, "closed"))
		closedAgain, _, _, found, err := c.StartIntake(t.Context(), start(admitted), io.Discard)
		require.NoError(t, err)
		require.Equal(t, IntakeStarted, closedAgain, "a retry finds its run closed already")
		require.True(t, found, "nor did this retry's input reach a run")
	}
	require.Len(t, sessions, 2, "each run under the ID has its own session")

	err = c.Start(t.Context(), Start{ID: id, Input: investigation.Input{AlertID: "a1"}}, io.Discard)
	require.EqualError(t, err, "investigation "+id+" exists already (open or closed), and an ID is never used twice", "a CLI start under a closed investigation's ID")
}

// A run of the identity that was terminated (or failed, or was cancelled)
// investigated nothing: the next alert of the identity starts a new run
// instead of being a repeat of it.
func TestIntakeEndedRunIsNoRepeat(t *testing.T) {
	tc := bareTemporal(t)
	c, err := New(tc, Options{Temporal: config.Temporal{Namespace: "default", TaskQueue: "sessions"}})
	require.NoError(t, err)
	const id = "intake-y-0123456789ab"
	start := func(admitted time.Time) IntakeStart {
		return IntakeStart{Start: Start{ID: id, Summary: "y", Input: investigation.Input{AlertID: "a1", Intake: &investigation.IntakeInput{Identity: "y"}}},
			Admitted: admitted, Severity: "high", RepeatWindow: time.Hour}
	}
	outcome, runID, _, _, err := c.StartIntake(t.Context(), start(time.Now()), io.Discard)
	require.NoError(t, err)
	require.Equal(t, IntakeStarted, outcome)
	require.NoError(t, tc.TerminateWorkflow(t.Context(), id, runID, "e2e: the run fails"))

	outcome, again, _, found, err := c.StartIntake(t.Context(), start(time.Now().Add(time.Second)), io.Discard)
	require.NoError(t, err)
	require.Equal(t, IntakeStarted, outcome, "a terminated run makes no repeat")
	require.False(t, found)
	require.NotEqual(t, runID, again)
}

// A start finds its own run by the session in the run's memo, not by its
// start time: an old run of the ID that continued as new after this
// admission (an analyst's follow-up to a forgotten idle run) started since
// then, but it is another run, so the start attaches to it (running, its
// session) and, once it closed, starts a run of its own. A run whose memo
// names no session (started before sessions) is still told by start time.
func TestIntakeFoundIsTheRunOfItsSession(t *testing.T) {
	tc := bareTemporal(t)
	c, err := New(tc, Options{Temporal: config.Temporal{Namespace: "default", TaskQueue: "sessions"}})
	require.NoError(t, err)
	const id = "intake-z-0123456789ab"
	start := func(admitted time.Time) IntakeStart {
		return IntakeStart{Start: Start{ID: id, Summary: "z", Input: investigation.Input{AlertID: "a1", Intake: &investigation.IntakeInput{Identity: "z"}}},
			Admitted: admitted, Severity: "critical", Reinvestigate: true, RepeatWindow: time.Hour}
	}
	admitted := time.Now().Add(-time.Minute)
	oldAdmitted := admitted.Add(-2 * time.Hour)
	// The old run as its continued run looks: started now, its memo the
	// old admission's session.
	outcome, oldRun, _, _, err := c.StartIntake(t.Context(), start(oldAdmitted), io.Discard)
	require.NoError(t, err)
	require.Equal(t, IntakeStarted, outcome)

	outcome, runID, session, found, err := c.StartIntake(t.Context(), start(admitted), io.Discard)
	require.NoError(t, err)
	require.Equal(t, IntakeRunning, outcome, "another session's run is open: the start attaches to it")
	require.False(t, found, "the run found is not this start's")
	require.Equal(t, oldRun, runID)
	require.Equal(t, intakeSession(id, oldAdmitted), session)

	require.NoError(t, tc.TerminateWorkflow(t.Context(), id, oldRun, "closed"))
	outcome, runID, _, found, err = c.StartIntake(t.Context(), start(admitted), io.Discard)
	require.NoError(t, err)
	require.Equal(t, IntakeStarted, outcome)
	require.False(t, found, "a closed run of another session is not this start's: it starts one")
	require.NotEqual(t, oldRun, runID)
	require.NoError(t, tc.TerminateWorkflow(t.Context(), id, runID, "closed"))

	// A run without a session in its memo, started since the admission.
	legacy, err := tc.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: "sessions",
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}, investigation.WorkflowName, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	outcome, runID, _, found, err = c.StartIntake(t.Context(), start(admitted), io.Discard)
	require.NoError(t, err)
	require.Equal(t, IntakeStarted, outcome)
	require.True(t, found, "without a session in its memo, a run started since the admission is taken for this start's")
	require.Equal(t, legacy.GetRunID(), runID)
}
