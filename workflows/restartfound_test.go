package workflows

import (
	"context"
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

// A start whose first round created the run but lost its answer (retries
// ran out) is tried again; a related alert joins while it waits. The next
// round finds the run it made (Found) and starts nothing, so its input,
// holding the related alert, went nowhere: the room signals that round's
// arrivals to the run instead of forgetting them.
func TestRetriedStartThatFindsItsRunSignalsTheArrivals(t *testing.T) {
	var mu sync.Mutex
	var rounds []activities.StartInput
	h := newAdmissionHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(ia.StartInvestigation, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.StartInput) (activities.StartOutput, error) {
			mu.Lock()
			defer mu.Unlock()
			rounds = append(rounds, in)
			if len(rounds) == 1 {
				// The run was made with this input; the answer never came
				// back, and the activity's retries ran out.
				return activities.StartOutput{}, temporal.NewNonRetryableApplicationError("start timed out", "timeout", nil)
			}
			return activities.StartOutput{Outcome: activities.StartStarted, Found: true}, nil
		})
	})
	s := intake.Settings{MaxRunning: 10}
	h.admit(time.Second, s, alertOf("a1", "id:1", "high", "ip:1"))
	h.admit(20*time.Second, s, alertOf("a2", "id:2", "high", "ip:1"))
	var st intake.Status
	h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 10*time.Minute)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 11*time.Minute)
	h.env.ExecuteWorkflow(intake.AdmissionWorkflowName, AdmissionInput{})
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(rounds), 2)
	require.Empty(t, rounds[0].Input.Intake.Arrived.Arrivals, "a2 came after the first round")
	require.Len(t, st.Open, 1)
	require.Equal(t, intake.StateRunning, st.Open[0].State)
	var sent []string
	h.sig.mu.Lock()
	for i, name := range h.sig.got {
		if b, ok := h.sig.arg[i].(investigation.ArrivalBatch); ok && name == intake.WorkflowID("id:1")+" "+investigation.AlertsUpdate {
			for _, a := range b.Arrivals {
				sent = append(sent, a.AlertID)
			}
		}
	}
	h.sig.mu.Unlock()
	require.Equal(t, []string{"a2"}, sent, "the related alert (acknowledged as grouped) reaches the run by a signal; signals: %q", h.sig.names())
}
