package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
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
