package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// A start's answer that comes after its entity ended acts on nothing: the
// run its lost first attempt started failed fast and said so, ending the
// entity; a newer alert of the identity made a new entity while the retry
// was in flight. The retry's "started" must not mark the newer one running:
// it gets a start of its own once the old one is done. Nor may a stale
// "repeat" answer end it or count a repeat.
func TestStaleStartAnswerLeavesTheNewerEntity(t *testing.T) {
	for _, stale := range []string{activities.StartStarted, activities.StartRepeat} {
		t.Run(stale, func(t *testing.T) { staleStartAnswer(t, stale) })
	}
}

func staleStartAnswer(t *testing.T, stale string) {
	var mu sync.Mutex
	var starts []string
	var admitted time.Time
	attempts := 0
	h := newAdmissionHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(ia.StartInvestigation, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.StartInput) (activities.StartOutput, error) {
			mu.Lock()
			defer mu.Unlock()
			attempts++
			if in.Input.AlertID == "a1" {
				admitted = in.Admitted
				if attempts <= 3 {
					return activities.StartOutput{}, errors.New("context deadline exceeded") // the run started, the answer was lost
				}
				starts = append(starts, in.Input.AlertID)
				return activities.StartOutput{Outcome: stale}, nil
			}
			starts = append(starts, in.Input.AlertID)
			return activities.StartOutput{Outcome: activities.StartStarted}, nil // a run started since Admitted
		})
	})
	s := intake.Settings{MaxRunning: 10}
	wf := intake.WorkflowID("id:1")
	h.admit(time.Second, s, alertOf("a1", "id:1", "high"))
	// The run the first attempt started failed fast and said so.
	h.env.RegisterDelayedCallback(func() {
		mu.Lock()
		session := investigation.IntakeSession(wf, admitted)
		mu.Unlock()
		h.env.SignalWorkflow(investigation.ClosedSignal, investigation.Closed{WorkflowID: wf, Session: session, Reason: "failed: boom"})
	}, 3*time.Second)
	h.admit(3500*time.Millisecond, s, alertOf("a1-next", "id:1", "high"))
	var st intake.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 2*time.Minute)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 3*time.Minute)
	h.env.ExecuteWorkflow(intake.AdmissionWorkflowName, AdmissionInput{})
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, st.Open, 1)
	require.Equal(t, "a1-next", st.Open[0].AlertID)
	require.Equal(t, []string{"a1", "a1-next"}, starts, "the newer entity is %s; it must have a start of its own", st.Open[0].State)
	require.Zero(t, st.Counters.Repeats)
}

// A failed start puts the arrivals its input took back in front of those
// queued meanwhile, within the queue bounds: repeated failures while
// related alerts keep joining must not grow the room (its state is carried
// whole across continue-as-new); what is left out is counted as dropped.
func TestFailedStartsKeepTheQueueBounds(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(20)
	long := func(prefix string, i, n int) string {
		p := fmt.Sprintf("%s%d-", prefix, i)
		return p + strings.Repeat("x", n-len(p))
	}
	var es []*Entity
	for i := range 20 {
		o := r.admit(t0, s, alertOf(fmt.Sprint("a", i), fmt.Sprint("id:", i), "high", fmt.Sprint("ip:10.0.0.", i)))
		es = append(es, r.byWorkflow[o.WorkflowID])
	}
	now, n := t0, 0
	for attempt := 1; attempt < maxStartAttempts; attempt++ {
		var batches []investigation.ArrivalBatch
		for _, e := range es {
			require.Equal(t, intake.StateStarting, e.State)
			batches = append(batches, r.take(e)) // the start input
		}
		for i := range es { // related alerts join while the starts are in flight
			for range maxEntityQueue {
				n++
				a := alertOf(long("r", n, 100), long("generic:id:", n, intake.MaxIdentityBytes), "high", fmt.Sprint("ip:10.0.0.", i))
				a.Title = strings.Repeat("t", intake.MaxTitleBytes)
				r.admit(now, s, a)
			}
		}
		for i, e := range es {
			r.startFailed(now, e, batches[i])
			require.LessOrEqual(t, len(e.Queue), maxEntityQueue)
			require.LessOrEqual(t, r.pending, maxPending)
		}
		now = now.Add(startBackoff(attempt) + time.Second)
		r.tick(now)
		r.schedule()
	}
	pending, dropped := 0, 0
	for _, e := range es {
		pending += len(e.Queue)
		dropped += e.Dropped
	}
	require.Equal(t, r.pending, pending)
	require.Equal(t, n, pending+dropped, "every related alert is queued or counted as dropped")
	// The first arrivals stay: the oldest are kept, as enqueue keeps them.
	require.Equal(t, "generic:id:1-", es[0].Queue[0].Identity[:len("generic:id:1-")])
	raw, err := json.Marshal(AdmissionInput{Room: r})
	require.NoError(t, err)
	require.Less(t, len(raw), maxRoomBytes)
}

// A start that finds its run open puts the entity's first alert in front
// of the arrivals its input took, within the same bounds.
func TestAttachedKeepsTheQueueBounds(t *testing.T) {
	r := newRoom(t0)
	s := roomSettings(1)
	o := r.admit(t0, s, alertOf("a1", "id:1", "high", "ip:10.0.0.1"))
	e := r.byWorkflow[o.WorkflowID]
	for i := range maxEntityQueue {
		r.admit(t0, s, alertOf(fmt.Sprint("r", i), fmt.Sprint("id:r", i), "high", "ip:10.0.0.1"))
	}
	b := r.take(e)
	require.Len(t, b.Arrivals, maxEntityQueue)
	r.attached(e, b, "")
	require.Equal(t, intake.StateRunning, e.State)
	require.Len(t, e.Queue, maxEntityQueue)
	require.Equal(t, r.pending, len(e.Queue))
	require.Equal(t, "a1", e.Queue[0].AlertID, "its first alert goes first")
	require.Equal(t, 1, e.Dropped)
}

// handBack returns the alerts signalled while the run closed in signals of
// at most maxReturned arrivals, all the admission keeps of one: two alerts
// signals of 60 related alerts during the close lose none.
func TestHandBackIsChunked(t *testing.T) {
	c := closingHarness(t, false)
	h := c.h
	batch := func(k int) investigation.ArrivalBatch {
		b := investigation.ArrivalBatch{Dropped: 1}
		for i := range 60 {
			b.Arrivals = append(b.Arrivals, investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: fmt.Sprintf("r%d-%d", k, i),
				Identity: fmt.Sprintf("generic:id:%d-%d", k, i), Source: "generic", Severity: "high", Times: 1})
		}
		return b
	}
	// Signalled while the run's close is told (the signal takes a minute).
	for k := range 2 {
		h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(investigation.AlertsUpdate, batch(k)) }, 10*time.Minute+time.Duration(30+k)*time.Second)
	}
	_, err := h.run(t, investigation.Input{AlertID: "a1", IdleTimeout: investigation.Duration(10 * time.Minute),
		Intake: &investigation.IntakeInput{Identity: "guardduty:1:f", Admission: "intake-admission-q"}})
	require.NoError(t, err)
	r := newRoom(t0)
	r.Settings = roomSettings(10)
	total, dropped, handBacks := 0, 0, 0
	for _, cl := range c.closed {
		require.LessOrEqual(t, len(cl.Returned.Arrivals), maxReturned)
		if len(cl.Returned.Arrivals)+cl.Returned.Dropped > 0 {
			handBacks++
		}
		total += len(cl.Returned.Arrivals)
		dropped += cl.Returned.Dropped
		r.closed(t0, cl)
		r.handedBack(cl)
		r.readmit(t0, cl.Returned.Arrivals)
	}
	require.Equal(t, 2, handBacks)
	require.Equal(t, 120, total)
	require.Equal(t, 2, dropped)
	require.Zero(t, r.Counters.ReadmitsLost, "acknowledged related alerts counted lost by the admission")
	require.Equal(t, int64(2), r.Counters.HandBackDropped)
}

// Alerts signalled after the run's last progress write, more than one
// signal takes, are handed back in two signals; their notes are written
// once both went, in one write as for one signal.
func TestChunkedHandBackIsNoted(t *testing.T) {
	c := closingHarness(t, true)
	h := c.h
	batch := func(k, n int) investigation.ArrivalBatch {
		var b investigation.ArrivalBatch
		for i := range n {
			b.Arrivals = append(b.Arrivals, investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: fmt.Sprintf("r%d-%d", k, i),
				Identity: fmt.Sprintf("generic:id:%d-%d", k, i), Source: "generic", Severity: "high", Times: 1})
		}
		return b
	}
	// The close is told from 10m to 11m; the first hand-back from 11m to
	// 12m, while two signals of 60 come after the last progress write.
	h.signal(10*time.Minute+30*time.Second, investigation.AlertsUpdate, batch(0, 1))
	h.signal(11*time.Minute+30*time.Second, investigation.AlertsUpdate, batch(1, 60))
	h.signal(11*time.Minute+31*time.Second, investigation.AlertsUpdate, batch(2, 60))
	writesAtClose := c.writesAt(10*time.Minute + 45*time.Second)
	_, err := h.run(t, investigation.Input{AlertID: "a1", IdleTimeout: investigation.Duration(10 * time.Minute),
		Intake: &investigation.IntakeInput{Identity: "guardduty:1:f", Admission: "intake-admission-q"}})
	require.NoError(t, err)
	var sizes []int
	for _, cl := range c.closed[1:] {
		sizes = append(sizes, len(cl.Returned.Arrivals))
	}
	require.Equal(t, []int{1, maxReturned, 120 - maxReturned}, sizes)
	const note = "60 alerts arrived as the investigation closed: handed back to the intake"
	n := 0
	for _, e := range c.stored {
		if e.Kind == investigation.EventNote && e.Text == note {
			n++
		}
	}
	require.Equal(t, 2, n, "both notes reach the progress store")
	require.Equal(t, h.events(t), c.stored, "every event stored, in order")
	require.Equal(t, *writesAtClose+1, c.writes, "one write after the close, once all 120 went back")
}

// An entity attached to an older run its room forgot (concluded, idle,
// forgotten to make room) is charged only what that run spends beyond what
// it had reported: the run reports a running total, whose earlier part
// the forgotten entity was charged. A run the room does not remember is
// charged whole, as before.
func TestAttachedIsChargedOnlyTheOldRunsNewSpend(t *testing.T) {
	spend := func(calls int) investigation.Spend {
		var sp investigation.Spend
		sp.ByPhase.Plan = investigation.Usage{Calls: calls, PromptTokens: calls * 100000, Model: "gemini-2.5-flash"}
		return sp
	}
	for _, remembered := range []bool{true, false} {
		t.Run(fmt.Sprint("remembered=", remembered), func(t *testing.T) {
			r := newRoom(t0)
			s := roomSettings(10)
			conclude := func(e *Entity) string {
				r.started(e.WorkflowID)
				session := investigation.IntakeSession(e.WorkflowID, e.Admitted)
				r.concluded(investigation.Concluded{WorkflowID: e.WorkflowID, Session: session, Spend: spend(1)})
				return session
			}
			o := r.admit(t0, s, alertOf("a1", "id:1", "medium"))
			e0 := r.byWorkflow[o.WorkflowID]
			old := conclude(e0)
			one := r.Spent
			require.Greater(t, one, 0.0)
			conclude(r.byWorkflow[r.admit(t0, s, alertOf("f0", "id:f0", "low")).WorkflowID])
			for i := 1; len(r.Entities) < maxOpen; i++ {
				r.admit(t0, s, alertOf(fmt.Sprint("f", i), fmt.Sprint("id:f", i), "low"))
			}
			// The room is full: a new alert forgets e0, its run open and idle.
			r.admit(t0.Add(time.Minute), s, alertOf("b", "id:b", "low"))
			require.Nil(t, r.byWorkflow[o.WorkflowID])
			if !remembered {
				r.Forgotten = nil
			}
			// Its alert seen higher: a reinvestigation, whose start finds the old run open.
			o2 := r.admit(t0.Add(2*time.Minute), s, alertOf("a2", "id:1", "high"))
			e1 := r.byWorkflow[o2.WorkflowID]
			require.True(t, e1.Reinvestigate)
			spent := r.Spent
			r.attached(e1, r.take(e1), old)
			// The old run answers the follow-up: its Concluded carries its running total (1 + 1 calls).
			r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Session: old, Spend: spend(2)})
			want := one
			if !remembered {
				want = 2 * one
			}
			require.InDelta(t, want, r.Spent-spent, 1e-9, "the old run spent one more unit; the day counts %.1f more", (r.Spent-spent)/one)
			// Its close charges nothing more.
			r.closed(t0.Add(3*time.Minute), investigation.Closed{WorkflowID: o.WorkflowID, Session: old, Reason: investigation.ClosedCompleted, Spend: spend(2)})
			require.InDelta(t, want, r.Spent-spent, 1e-9)
			require.False(t, slices.ContainsFunc(r.Forgotten, func(f ForgottenRun) bool { return f.Hash == hashOf(old) }), "the attached entity holds the run")
		})
	}
}

// Counters.Started counts each run a start made, once: not a start that
// found the identity's run closed within the repeat window (a repeat) or
// open (attached), nor one given up; a run made by a round whose answer
// was lost counts once, whether a later round finds it (Found) or its
// close comes first.
func TestStartedCountsEachRunOnce(t *testing.T) {
	var mu sync.Mutex
	admitted := map[string]time.Time{}
	tries := map[string]int{}
	h := newAdmissionHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(ia.StartInvestigation, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.StartInput) (activities.StartOutput, error) {
			mu.Lock()
			defer mu.Unlock()
			id := in.Input.AlertID
			admitted[id] = in.Admitted
			tries[id]++
			switch {
			case id == "repeat":
				return activities.StartOutput{Outcome: activities.StartRepeat}, nil
			case id == "open":
				return activities.StartOutput{Outcome: activities.StartRunning, Session: "someone-else"}, nil
			case id == "given-up":
				return activities.StartOutput{}, temporal.NewNonRetryableApplicationError("temporal unreachable", "test", nil)
			case id == "lost" && tries[id] == 1, id == "closed-first":
				// The run started, the answer was lost (each round fails at once).
				return activities.StartOutput{}, temporal.NewNonRetryableApplicationError("context deadline exceeded", "test", nil)
			case id == "lost":
				return activities.StartOutput{Outcome: activities.StartStarted, Found: true}, nil
			}
			return activities.StartOutput{Outcome: activities.StartStarted}, nil
		})
	})
	s := intake.Settings{MaxRunning: 10}
	h.admit(time.Second, s, alertOf("new", "id:1", "high"), alertOf("repeat", "id:2", "high"), alertOf("open", "id:3", "high"),
		alertOf("given-up", "id:4", "high"), alertOf("lost", "id:5", "high"), alertOf("closed-first", "id:6", "high"))
	// The run the lost first round of closed-first made closes while it waits.
	h.env.RegisterDelayedCallback(func() {
		mu.Lock()
		wf := intake.WorkflowID("id:6")
		session := investigation.IntakeSession(wf, admitted["closed-first"])
		mu.Unlock()
		h.env.SignalWorkflow(investigation.ClosedSignal, investigation.Closed{WorkflowID: wf, Session: session, Reason: "completed"})
	}, 10*time.Second)
	var st intake.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 40*time.Minute)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 41*time.Minute)
	h.env.ExecuteWorkflow(intake.AdmissionWorkflowName, AdmissionInput{})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, maxStartAttempts, tries["given-up"], "given up")
	require.Equal(t, 2, tries["lost"])
	require.Equal(t, int64(3), st.Counters.Started, "new, lost and closed-first: %+v", st.Counters)
	require.Equal(t, int64(1), st.Counters.Repeats)
	require.Equal(t, int64(1), st.Counters.StartsFailed)
}
