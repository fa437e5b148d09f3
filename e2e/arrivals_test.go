package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/gemini/standin"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// TestIntakeLateArrivals records the late-arrivals gate's fixtures
// (design/versioning.md): a related alert arrives while the conclusion's
// model call is held (no model call sees it; the investigation asks
// whether it changes the verdict once idle), then an alert is signalled
// while the investigation closes (it goes back to the admission workflow). Recorded before the
// gate (UPDATE_TESTDATA=pre-late-arrivals) it shows the same arrivals with
// no follow-up and no hand-back, and its last checks fail.
func TestIntakeLateArrivals(t *testing.T) {
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	std := standin.Handler()
	model.use(t, func(r *geminitest.Request) geminitest.Reply {
		if r.Phase() == geminitest.PhaseConclude {
			held := false
			once.Do(func() { held = true })
			if held {
				close(reached)
				<-release
			}
		}
		return std(r)
	})
	e := newIntakeEnv(t)
	e.startIntake("--subscription", e.sub(intake.SubscriptionIntake), "--idle-timeout", "1h", "--results-topic", e.topic(intake.TopicVerdicts))
	g := guardDuty{Account: "111122224444", ID: e.nonce + "-late", RemoteIP: "198.51.100.41", Instance: "i-late", Count: 3, Severity: 5, Title: "late"}
	wf := intake.WorkflowID(g.identity())
	dumpOnFailure(t, wf, intake.AdmissionID(e.queue))
	e.publish(g.json())
	select {
	case <-reached:
	case <-time.After(2 * time.Minute):
		t.Fatal("the conclusion's model call never came")
	}
	// A related alert (another finding from the same address) while the
	// conclusion is being written.
	related := g
	related.ID, related.Instance, related.Title = e.nonce+"-late-related", "i-late-2", "late related"
	e.publish(related.json())
	require.Eventually(t, func() bool { return len(signalsIn(t, wf, investigation.AlertsUpdate)) == 1 }, time.Minute, 200*time.Millisecond,
		"the related alert reaches the investigation during its conclusion")
	close(release)

	// Idle with nothing left to do (after the follow-up, from the gate on).
	require.Eventually(t, func() bool {
		d, err := tc.DescribeWorkflowExecution(t.Context(), wf, "")
		if err != nil || len(d.GetPendingActivities()) > 0 {
			return false
		}
		v, err := tc.QueryWorkflow(t.Context(), wf, "", investigation.StatusQuery)
		var st investigation.Status
		return err == nil && v.Get(&st) == nil && st.Phase == investigation.PhaseIdle && len(st.FollowUps) == 0
	}, 2*time.Minute, 250*time.Millisecond, "the investigation goes idle")

	// Closing: the worker is frozen while it takes the stop, so an alert
	// signalled meanwhile (as the admission workflow would if the two
	// crossed) reaches the run after it began closing.
	var again investigation.ArrivalBatch
	require.NoError(t, json.Unmarshal(signalsIn(t, wf, investigation.AlertsUpdate)[0].GetInput().GetPayloads()[0].GetData(), &again))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stopped := make(chan error, 1)
	e.frozenDuring(wf, func() {
		go func() {
			_, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: wf, UpdateName: investigation.UpdateStop,
				Args: []any{"done here"}, WaitForStage: client.WorkflowUpdateStageCompleted})
			stopped <- err
		}()
	}, func() {
		require.NoError(t, tc.SignalWorkflow(ctx, wf, "", investigation.AlertsUpdate, again))
	})
	require.NoError(t, <-stopped)
	require.NoError(t, tc.GetWorkflow(ctx, wf, "").Get(ctx, nil))
	require.True(t, signalledWhileClosing(history(t, wf)), "the alert reached the run after it began closing")
	hist := history(t, wf)
	saveHistory(t, hist, "intake-late-arrivals.history.json")

	// From the gate on (the checks below fail before it): the first
	// arrival was asked about, and the second went back to the admission
	// workflow, which gave it an investigation of its own.
	asked := false
	for _, ev := range hist.GetEvents() {
		asked = asked || ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "DecideMode"
	}
	require.True(t, asked, "a follow-up asked whether the arrival changes the verdict")
	require.Len(t, signalsSent(t, wf, investigation.ClosedSignal), 2, "closed, then the late alert handed back")
	require.Eventually(t, func() bool { return e.investigations()[intake.WorkflowID(related.identity())] == 1 }, time.Minute, time.Second,
		"the handed-back alert gets an investigation of its own")
}

// TestIntakeDeliveryFailsAfterClose records the readmit-after-close gate's
// fixtures: the admission workflow signals a related alert to an
// investigation that has ended, and receives its close while the signal is
// on its way. The investigation is terminated (it says nothing) and the
// test signals the close for it while the admission takes the delivery
// (frozenDuring), so the close arrives before the failed signal. From the gate on the alert gets an
// investigation of its own; recorded before it
// (UPDATE_TESTDATA=pre-readmit) it was lost, and the last check fails.
func TestIntakeDeliveryFailsAfterClose(t *testing.T) {
	model.use(t, standin.Handler())
	e := newIntakeEnv(t)
	e.startIntake("--subscription", e.sub(intake.SubscriptionIntake), "--idle-timeout", "1h", "--results-topic", e.topic(intake.TopicVerdicts))
	g := guardDuty{Account: "111122225555", ID: e.nonce + "-gone", RemoteIP: "198.51.100.42", Instance: "i-gone", Count: 3, Severity: 5, Title: "gone"}
	wf := intake.WorkflowID(g.identity())
	admission := intake.AdmissionID(e.queue)
	dumpOnFailure(t, wf, admission)
	e.publish(g.json())
	e.waitSettled(1, 2*time.Minute)
	require.NoError(t, tc.TerminateWorkflow(t.Context(), wf, "", "e2e: ends without telling the admission workflow"))

	related := g
	related.ID, related.Instance, related.Title = e.nonce+"-gone-related", "i-gone-2", "gone related"
	e.frozenDuring(admission, func() { e.publish(related.json()) }, func() {
		require.NoError(t, tc.SignalWorkflow(t.Context(), admission, "", investigation.ClosedSignal,
			investigation.Closed{WorkflowID: wf, Reason: "completed"}))
	})

	// The delivery failed after the close was received, and the admission
	// workflow has handled it.
	require.Eventually(t, func() bool {
		failed := false
		for _, ev := range history(t, admission).GetEvents() {
			if ev.GetSignalExternalWorkflowExecutionFailedEventAttributes() != nil {
				failed = true
			}
			if failed && ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				return true
			}
		}
		return false
	}, time.Minute, 250*time.Millisecond, "the delivery fails")
	hist := history(t, admission)
	require.True(t, failedAfterClose(hist), "the close was received before the failure")
	saveHistory(t, hist, "intake-readmit.history.json")
	require.Eventually(t, func() bool { return e.investigations()[intake.WorkflowID(related.identity())] == 1 }, time.Minute, time.Second,
		"the related alert gets an investigation of its own")
}

// failedAfterClose says whether an alerts signal the admission sent failed
// after it received an investigation's close.
func failedAfterClose(h *historypb.History) bool {
	closed := false
	for _, ev := range h.GetEvents() {
		if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.ClosedSignal {
			closed = true
		}
		if closed && ev.GetSignalExternalWorkflowExecutionFailedEventAttributes() != nil {
			return true
		}
	}
	return false
}

// signalsIn are the named signals a workflow received.
func signalsIn(t *testing.T, wf, name string) []*historypb.WorkflowExecutionSignaledEventAttributes {
	var out []*historypb.WorkflowExecutionSignaledEventAttributes
	for _, ev := range history(t, wf).GetEvents() {
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a.GetSignalName() == name {
			out = append(out, a)
		}
	}
	return out
}

// signalsSent are the named signals a workflow sent to others.
func signalsSent(t *testing.T, wf, name string) []*historypb.SignalExternalWorkflowExecutionInitiatedEventAttributes {
	var out []*historypb.SignalExternalWorkflowExecutionInitiatedEventAttributes
	for _, ev := range history(t, wf).GetEvents() {
		if a := ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes(); a.GetSignalName() == name {
			out = append(out, a)
		}
	}
	return out
}

// frozenDuring freezes the test's worker (SIGSTOP), runs trigger, waits
// until the frozen worker's poll has taken the workflow task trigger
// caused (it stays started), runs meanwhile, and thaws the worker: what
// meanwhile sends reaches the workflow after that task, whatever the
// task decided. The worker is frozen for well under the task's 10 s
// timeout.
func (e *intakeEnv) frozenDuring(wf string, trigger, meanwhile func()) {
	t := e.t
	t.Helper()
	require.NoError(t, e.worker.Process.Signal(syscall.SIGSTOP))
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			require.NoError(t, e.worker.Process.Signal(syscall.SIGCONT))
		}
	}
	defer thaw()
	trigger()
	require.Eventually(t, func() bool {
		d, err := tc.DescribeWorkflowExecution(t.Context(), wf, "")
		return err == nil && d.GetPendingWorkflowTask().GetState() == enums.PENDING_WORKFLOW_TASK_STATE_STARTED
	}, 5*time.Second, 10*time.Millisecond, "the frozen worker took the workflow task")
	meanwhile()
	thaw()
}

// signalledWhileClosing says whether an investigation received an alerts
// signal after it signalled the admission workflow that it closed.
func signalledWhileClosing(h *historypb.History) bool {
	closing := false
	for _, ev := range h.GetEvents() {
		if ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName() == investigation.ClosedSignal {
			closing = true
		}
		if closing && ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.AlertsUpdate {
			return true
		}
	}
	return false
}

// dumpOnFailure writes the workflows' histories to E2E_DUMP_DIR, if set,
// when the test fails.
func dumpOnFailure(t *testing.T, wfs ...string) {
	dir := os.Getenv("E2E_DUMP_DIR")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, wf := range wfs {
			raw, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(history(t, wf))
			if err == nil {
				_ = os.WriteFile(filepath.Join(dir, wf+".json"), raw, 0o644)
			}
		}
	})
}
