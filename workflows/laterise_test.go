package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// An alert seen again at a higher severity that reaches its investigation
// too late (handed back by the closing run, or its delivery refused after
// the admission took the close) is investigated again, as the same alert
// arriving after the close would be: a new run of its identity. Seen again
// at the same severity, it starts nothing.
func TestLateRiseIsInvestigatedAgain(t *testing.T) {
	for _, via := range []string{"handed back", "delivery failed after the close"} {
		for _, severity := range []string{"high", "low"} {
			t.Run(via+" at "+severity, func(t *testing.T) {
				h := newAdmissionHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
					if via == "delivery failed after the close" {
						env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, investigation.AlertsUpdate, mock.Anything).After(time.Minute).
							Return(errors.New("workflow execution already completed")).Once()
					}
				})
				s := intake.Settings{MaxRunning: 10}
				wf := intake.WorkflowID("id:1")
				h.admit(time.Second, s, alertOf("a1", "id:1", "low"))
				h.admit(time.Minute, s, alertOf("a1b", "id:1", severity))
				closed := investigation.Closed{WorkflowID: wf, Reason: investigation.ClosedCompleted}
				h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(investigation.ClosedSignal, closed) }, time.Minute+30*time.Second)
				if via == "handed back" {
					back := closed
					back.WorkflowID = wf + "~1"
					back.Returned = investigation.ArrivalBatch{Arrivals: []investigation.Arrival{{Kind: investigation.ArrivalSeenAgain,
						AlertID: "a1b", Identity: "id:1", Source: "generic", Severity: severity, PrevSeverity: "low", Times: 1}}}
					h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(investigation.ClosedSignal, back) }, 2*time.Minute)
				}
				var st intake.Status
				h.env.RegisterDelayedCallback(func() { st = h.status(t) }, 5*time.Minute)
				h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 6*time.Minute)
				h.env.ExecuteWorkflow(intake.AdmissionWorkflowName, AdmissionInput{})
				require.True(t, h.env.IsWorkflowCompleted())
				require.Equal(t, intake.OutcomeSeenAgain, h.results[1].Outcomes[0].Kind)
				if severity == "low" {
					require.Len(t, h.starts, 1, "the same severity again starts nothing")
					require.Empty(t, st.Open)
					return
				}
				require.Len(t, h.starts, 2, "the rise is investigated again")
				require.Equal(t, wf, h.starts[1].WorkflowID)
				require.Equal(t, "a1b", h.starts[1].Input.AlertID)
				require.Equal(t, "high", h.starts[1].Severity)
				require.True(t, h.starts[1].Reinvestigate, "a new run, though the last one closed within the repeat window")
				require.Equal(t, int64(1), st.Reinvested)
			})
		}
	}
}

// A rise still queued when its investigation's close arrives never
// reached it either; one that is no alert an admit request could carry
// (the signal is not validated) is not admitted.
func TestRoomCloseInvestigatesQueuedRiseAgain(t *testing.T) {
	for _, severity := range []string{"critical", "medium"} {
		r := newRoom(t0)
		s := roomSettings(10)
		o := r.admit(t0, s, alertOf("a1", "id:1", "medium"))
		r.take(r.byWorkflow[o.WorkflowID])
		r.started(o.WorkflowID)
		r.admit(t0.Add(time.Second), s, alertOf("a1b", "id:1", severity))
		r.closed(t0.Add(2*time.Second), investigation.Closed{WorkflowID: o.WorkflowID, Reason: investigation.ClosedCompleted})
		if severity == "medium" {
			require.Empty(t, r.Entities, "the same severity again starts nothing")
			continue
		}
		require.Len(t, r.Entities, 1)
		e := r.Entities[0]
		require.Equal(t, "a1b", e.AlertID)
		require.Equal(t, intake.StateStarting, e.State)
		require.True(t, e.Reinvestigate)
		require.Equal(t, "critical", e.Severity)
	}

	r := newRoom(t0)
	r.Settings = roomSettings(10)
	r.readmit(t0, []investigation.Arrival{{Kind: investigation.ArrivalSeenAgain, AlertID: "x", Identity: "id:<forged>\u2028", Severity: "critical", PrevSeverity: "low"}})
	require.Empty(t, r.Entities, "an identity no admit request could carry")
}
