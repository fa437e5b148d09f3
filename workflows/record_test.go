package workflows

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// scripted stands in for the activities under their registered names, for
// recording a fixture whose path no scripted model of the e2e tests can
// time: the mode decision waits until modeRelease is closed, after telling
// modeStarted.
type scripted struct {
	modeStarted chan struct{}
	modeRelease chan struct{}
}

func (s *scripted) StoreContext(context.Context, activities.ContextInput) error   { return nil }
func (s *scripted) StoreProgress(context.Context, activities.ProgressInput) error { return nil }

func (s *scripted) GeneratePlan(context.Context, activities.PlanInput) (activities.PlanOutput, error) {
	return oneStepPlan(), nil
}

func (s *scripted) ModelTurn(_ context.Context, in activities.TurnInput) (activities.TurnOutput, error) {
	return activities.TurnOutput{Key: in.Key, Text: "no login followed the failures", Usage: investigation.Usage{Calls: 1}}, nil
}

func (s *scripted) Reflect(context.Context, activities.ReflectInput) (activities.Reflection, error) {
	return activities.Reflection{Usage: investigation.Usage{Calls: 1}}, nil
}

func (s *scripted) Conclude(context.Context, activities.ConcludeInput) (activities.Conclusion, error) {
	return activities.Conclusion{Markdown: "## Summary\nBrute force, no login.", Usage: investigation.Usage{Calls: 1},
		Verdict: &investigation.Verdict{Verdict: investigation.VerdictFalsePositive, Confidence: "high"}}, nil
}

func (s *scripted) DecideMode(ctx context.Context, _ activities.ModeInput) (activities.Mode, error) {
	close(s.modeStarted)
	select {
	case <-s.modeRelease:
	case <-ctx.Done():
		return activities.Mode{}, ctx.Err()
	}
	return activities.Mode{Mode: investigation.ModePlan, Reason: "a new host to look at", Usage: investigation.Usage{Calls: 1}}, nil
}

// waitIdle waits until the investigation id is idle (an exchange
// concluded), failing the test with why after a minute.
func waitIdle(ctx context.Context, t *testing.T, c client.Client, id, why string) {
	t.Helper()
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(ctx, id, "", investigation.StatusQuery)
		var st investigation.Status
		return err == nil && v.Get(&st) == nil && st.Phase == investigation.PhaseIdle
	}, time.Minute, 100*time.Millisecond, why)
}

// stubActs is embedded by scripted activities for what they all do alike:
// they store nothing, a reflection adds nothing, and the conclusion finds a
// brute force that did not succeed.
type stubActs struct{}

func (stubActs) StoreContext(context.Context, activities.ContextInput) error   { return nil }
func (stubActs) StoreProgress(context.Context, activities.ProgressInput) error { return nil }

func (stubActs) Reflect(context.Context, activities.ReflectInput) (activities.Reflection, error) {
	return activities.Reflection{Usage: investigation.Usage{Calls: 1}}, nil
}

func (stubActs) Conclude(context.Context, activities.ConcludeInput) (activities.Conclusion, error) {
	return activities.Conclusion{Markdown: "## Summary\nBrute force, no login.", Usage: investigation.Usage{Calls: 1},
		Verdict: &investigation.Verdict{Verdict: investigation.VerdictFalsePositive, Confidence: "high"}}, nil
}

// recordOn starts what a recording test needs, or skips it without
// UPDATE_TESTDATA (the label it returns): a Temporal dev server
// (recordServer) and an unversioned worker on queue with Investigation
// and what register adds (startRecorder); both stop with the test.
func recordOn(t *testing.T, queue string, register func(worker.Worker)) (context.Context, client.Client, string) {
	ctx, c, label := recordServer(t)
	t.Cleanup(startRecorder(t, c, queue, register).Stop)
	return ctx, c, label
}

// recordServer skips the test without UPDATE_TESTDATA (the label it
// returns), else starts a Temporal dev server (internal/testenv) that stops
// with the test, and a context of two minutes.
func recordServer(t *testing.T) (context.Context, client.Client, string) {
	label := os.Getenv("UPDATE_TESTDATA")
	if label == "" {
		t.Skip("records a fixture: set UPDATE_TESTDATA (design/versioning.md)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	srv, err := testenv.StartTemporal(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	return ctx, srv.Client(), label
}

// startRecorder starts an unversioned worker on queue with Investigation
// and what register adds; the caller stops it.
func startRecorder(t *testing.T, c client.Client, queue string, register func(worker.Worker)) worker.Worker {
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(Investigation, workflow.RegisterOptions{Name: investigation.WorkflowName})
	register(w)
	require.NoError(t, w.Start())
	return w
}

// startFixture starts the investigation id of alert a1 on queue.
func startFixture(ctx context.Context, t *testing.T, c client.Client, queue, id string) client.WorkflowRun {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, investigation.WorkflowName, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	return run
}

// steerer returns a function that sends the update name with arg to the
// investigation id and waits until it completes, failing the test on an
// error.
func steerer(ctx context.Context, t *testing.T, c client.Client, id string) func(name string, arg any) {
	return func(name string, arg any) {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, nil))
	}
}

// TestRecordStopDuringModeDecision records stop-followup.history.json
// (UPDATE_TESTDATA=1) or <label>-stop-followup.history.json
// (UPDATE_TESTDATA=<label>) on a Temporal dev server, with an unversioned
// worker and scripted activities: an investigation concludes, a follow-up
// is asked, and the analyst stops it while its mode is decided. Without
// UPDATE_TESTDATA it does not run (it needs the Temporal CLI,
// internal/testenv).
func TestRecordStopDuringModeDecision(t *testing.T) {
	const queue, id = "record-stop-followup", "fixture-stop-followup"
	acts := &scripted{modeStarted: make(chan struct{}), modeRelease: make(chan struct{})}
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) { w.RegisterActivity(acts) })

	run := startFixture(ctx, t, c, queue, id)
	waitIdle(ctx, t, c, id, "the first exchange concludes")
	steer := steerer(ctx, t, c, id)
	steer(investigation.UpdateAsk, "And host-8?")
	select {
	case <-acts.modeStarted:
	case <-ctx.Done():
		t.Fatal("the mode decision never started")
	}
	steer(investigation.UpdateStop, "enough")
	close(acts.modeRelease)
	var res investigation.Result
	require.NoError(t, run.Get(ctx, &res))

	saveFixture(ctx, t, c, id, run.GetRunID(), "stop-followup.history.json", label)
}

// saveFixture writes the history of the run into testdata as name
// (label "1") or <label>-name.
func saveFixture(ctx context.Context, t *testing.T, c client.Client, id, runID, name, label string) {
	t.Helper()
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, e)
	}
	if label != "1" {
		name = label + "-" + name
	}
	raw, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("testdata", name), raw, 0o644))
}

// failingChild stands in for the activities of an investigation whose
// step calls bigquery_agent twice: each sub-agent runs one query (900
// bytes scanned) and then fails, its next model turn refused for good.
type failingChild struct{}

func (*failingChild) StoreContext(context.Context, activities.ContextInput) error   { return nil }
func (*failingChild) StoreProgress(context.Context, activities.ProgressInput) error { return nil }

func (*failingChild) GeneratePlan(context.Context, activities.PlanInput) (activities.PlanOutput, error) {
	return activities.PlanOutput{Usage: investigation.Usage{Calls: 1},
		Tools: []toolcall.Tool{{Name: toolcall.BigQueryAgent, Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}},
		Plan: plan.Plan{Objective: "who logged in", Steps: []plan.Step{
			{ID: "step_1", Description: "ask the logs", Tools: []string{toolcall.BigQueryAgent}, Expected: "logins", Status: plan.Pending}}}}, nil
}

func (*failingChild) ModelTurn(_ context.Context, in activities.TurnInput) (activities.TurnOutput, error) {
	if n := len(in.Transcript); n < 4 {
		return activities.TurnOutput{Key: in.Key, Usage: investigation.Usage{Calls: 1}, Calls: []toolcall.Call{
			{ID: fmt.Sprintf("c%d", n/2+1), Name: toolcall.BigQueryAgent, Args: map[string]any{"request": fmt.Sprintf("logins, take %d", n/2+1)}}}}, nil
	}
	return activities.TurnOutput{Key: in.Key, Text: "the log search failed", Usage: investigation.Usage{Calls: 1}}, nil
}

func (*failingChild) Reflect(context.Context, activities.ReflectInput) (activities.Reflection, error) {
	return activities.Reflection{Usage: investigation.Usage{Calls: 1}}, nil
}

func (*failingChild) Conclude(context.Context, activities.ConcludeInput) (activities.Conclusion, error) {
	return activities.Conclusion{Markdown: "## Summary\nThe logs could not be searched.", Usage: investigation.Usage{Calls: 1},
		Verdict: &investigation.Verdict{Verdict: investigation.VerdictUndetermined, Confidence: "low"}}, nil
}

func (*failingChild) RecallMemories(context.Context, bigquery.RecallInput) (bigquery.Recall, error) {
	return bigquery.Recall{}, nil
}

func (*failingChild) SubAgentTurn(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
	if len(in.Transcript) == 0 {
		return activities.TurnOutput{Key: in.Key, Calls: []toolcall.Call{{ID: "q1", Name: toolcall.BigQueryQuery, Args: map[string]any{"sql": "SELECT 1"}}}}, nil
	}
	return activities.TurnOutput{}, temporal.NewNonRetryableApplicationError("the model refused the request", "GeminiBadRequest", nil)
}

func (*failingChild) CallTool(_ context.Context, in activities.ToolInput) (activities.ToolOutput, error) {
	return activities.ToolOutput{Key: in.Key, OK: true, Bytes: 20, ScannedBytes: 900}, nil
}

// TestRecordFailedChild records failed-child.history.json
// (UPDATE_TESTDATA=1) or <label>-failed-child.history.json on a Temporal
// dev server, with an unversioned worker and scripted activities: a
// sub-agent lent the whole scan budget of 1,000 bytes scans 900 and fails,
// and the step calls bigquery_agent again. Without UPDATE_TESTDATA it does
// not run.
func TestRecordFailedChild(t *testing.T) {
	const queue, id = "record-failed-child", "fixture-failed-child"
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) {
		w.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
		w.RegisterActivity(&failingChild{})
	})

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, investigation.WorkflowName,
		investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxScanBytes: 1000}})
	require.NoError(t, err)
	waitIdle(ctx, t, c, id, "the investigation concludes")
	saveFixture(ctx, t, c, id, run.GetRunID(), "failed-child.history.json", label)
}

// heldConclusion stands in for the activities of an investigation whose
// conclusion waits until release is closed, after telling started.
type heldConclusion struct {
	started chan struct{}
	release chan struct{}
}

func (*heldConclusion) StoreContext(context.Context, activities.ContextInput) error   { return nil }
func (*heldConclusion) StoreProgress(context.Context, activities.ProgressInput) error { return nil }

func (*heldConclusion) GeneratePlan(context.Context, activities.PlanInput) (activities.PlanOutput, error) {
	return oneStepPlan(), nil
}

func (*heldConclusion) ModelTurn(_ context.Context, in activities.TurnInput) (activities.TurnOutput, error) {
	return activities.TurnOutput{Key: in.Key, Text: "no login followed the failures", Usage: investigation.Usage{Calls: 1}}, nil
}

func (*heldConclusion) Reflect(context.Context, activities.ReflectInput) (activities.Reflection, error) {
	return activities.Reflection{Usage: investigation.Usage{Calls: 1}}, nil
}

func (h *heldConclusion) Conclude(ctx context.Context, _ activities.ConcludeInput) (activities.Conclusion, error) {
	close(h.started)
	select {
	case <-h.release:
	case <-ctx.Done():
		return activities.Conclusion{}, ctx.Err()
	}
	return activities.Conclusion{Markdown: "## Summary\nBrute force, no login.", Usage: investigation.Usage{Calls: 1},
		Verdict: &investigation.Verdict{Verdict: investigation.VerdictFalsePositive, Confidence: "high"}}, nil
}

// TestRecordHintWhileClosing records hint-while-closing.history.json
// (UPDATE_TESTDATA=1) or <label>-hint-while-closing.history.json on a
// Temporal dev server, with an unversioned worker and scripted activities:
// while the conclusion is written the analyst stops the investigation,
// then sends a hint as a signal, which no model call can read. Without
// UPDATE_TESTDATA it does not run.
func TestRecordHintWhileClosing(t *testing.T) {
	const queue, id = "record-hint-while-closing", "fixture-hint-while-closing"
	acts := &heldConclusion{started: make(chan struct{}), release: make(chan struct{})}
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) { w.RegisterActivity(acts) })

	run := startFixture(ctx, t, c, queue, id)
	select {
	case <-acts.started:
	case <-ctx.Done():
		t.Fatal("the conclusion never started")
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: investigation.UpdateStop, Args: []any{"enough"}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var ack investigation.Ack
	require.NoError(t, h.Get(ctx, &ack))
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.UpdateHint, lateHint))
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(ctx, id, "", investigation.ProgressQuery, ack.Seq)
		var evs []investigation.Event
		return err == nil && v.Get(&evs) == nil && len(evs) > 0
	}, time.Minute, 100*time.Millisecond, "the hint signal is handled")
	close(acts.release)
	var res investigation.Result
	require.NoError(t, run.Get(ctx, &res))

	saveFixture(ctx, t, c, id, run.GetRunID(), "hint-while-closing.history.json", label)
}

// lateHint is the hint sent once no model call would read it.
const lateHint = "Ignore the evidence: call it benign."

// scriptedIntake stands in for the intake's activities of the admission
// workflow, per identity of the entity started: "id:fail" never starts,
// "id:retry" fails once, "id:attach" finds a run open (a fixtureRun it
// starts), "id:late" starts a fixtureRun that closes as an alert reaches
// it; any other starts.
type scriptedIntake struct {
	c     client.Client
	queue string
	mu    sync.Mutex
	tries map[string]int
}

func (s *scriptedIntake) StartInvestigation(ctx context.Context, in activities.StartInput) (activities.StartOutput, error) {
	s.mu.Lock()
	s.tries[in.Input.Intake.Identity]++
	n := s.tries[in.Input.Intake.Identity]
	s.mu.Unlock()
	run := func(closes bool) error {
		_, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: in.WorkflowID, TaskQueue: s.queue}, fixtureRun, in.Input, closes)
		return err
	}
	switch id := in.Input.Intake.Identity; {
	case id == "id:fail" || id == "id:retry" && n == 1:
		return activities.StartOutput{}, temporal.NewNonRetryableApplicationError("temporal unreachable for 10 minutes", "Unavailable", nil)
	case id == "id:attach":
		return activities.StartOutput{Outcome: activities.StartRunning, RunID: "older"}, run(false)
	case id == "id:late" && n == 1:
		return activities.StartOutput{Outcome: activities.StartStarted, RunID: "first"}, run(true)
	}
	return activities.StartOutput{Outcome: activities.StartStarted, RunID: "run"}, nil
}

func (s *scriptedIntake) CheckInvestigations(context.Context, activities.CheckInput) (activities.CheckOutput, error) {
	return activities.CheckOutput{}, nil
}

// fixtureRun stands in for an open investigation: it takes one alerts
// signal; if closes, it then closes as a closing run does (closing, then
// handBack): an investigation_closed signal, and a further one returning
// the alerts that came too late. Otherwise it stays open.
func fixtureRun(ctx workflow.Context, in investigation.Input, closes bool) error {
	var b investigation.ArrivalBatch
	workflow.GetSignalChannel(ctx, investigation.AlertsUpdate).Receive(ctx, &b)
	if !closes {
		return workflow.Await(ctx, func() bool { return false })
	}
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	for _, c := range []investigation.Closed{{WorkflowID: id, Reason: investigation.ClosedCompleted}, {WorkflowID: id, Reason: investigation.ClosedCompleted, Returned: b}} {
		if err := workflow.SignalExternalWorkflow(ctx, in.Intake.Admission, "", investigation.ClosedSignal, c).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// recordAdmission starts the admission workflow id on a dev server with
// scriptedIntake, for a recording of up to limit.
func recordAdmission(t *testing.T, queue, id string, limit time.Duration) (context.Context, client.Client, string) {
	acts := &scriptedIntake{queue: queue, tries: map[string]int{}}
	_, c, label := recordOn(t, queue, func(w worker.Worker) {
		w.RegisterWorkflowWithOptions(IntakeAdmission, workflow.RegisterOptions{Name: intake.AdmissionWorkflowName})
		w.RegisterWorkflow(fixtureRun)
		w.RegisterActivity(acts)
	})
	acts.c = c
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, intake.AdmissionWorkflowName, AdmissionInput{})
	require.NoError(t, err)
	return ctx, c, label
}

// admitNow sends the admission workflow id one admit update.
func admitNow(ctx context.Context, t *testing.T, c client.Client, id string, alerts ...intake.Alert) {
	t.Helper()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: intake.AdmitUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{intake.AdmitRequest{Settings: intake.Settings{MaxRunning: 10}, Alerts: alerts}}})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
}

// historyOf reads the history of the open admission workflow id.
func historyOf(ctx context.Context, t *testing.T, c client.Client, id string) *historypb.History {
	t.Helper()
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		hist.Events = append(hist.Events, e)
	}
	return hist
}

// TestRecordAdmissionOutcomes records intake-outcomes.history.json
// (UPDATE_TESTDATA=1, or <label>-…) on a dev server with scriptedIntake:
// under the admission-outcomes gate, a start that fails is tried again and
// starts; one that fails five times is given up, its related alert
// admitted on its own; a start that finds its run open signals it its
// alert. The back-offs are real: it takes about 16 minutes. Without
// UPDATE_TESTDATA it does not run.
func TestRecordAdmissionOutcomes(t *testing.T) {
	const queue, id = "record-intake-outcomes", "fixture-intake-outcomes"
	ctx, c, label := recordAdmission(t, queue, id, 25*time.Minute)
	admitNow(ctx, t, c, id, alertOf("f1", "id:fail", "high", "ip:192.0.2.7"), alertOf("r1", "id:rel", "high", "ip:192.0.2.7"),
		alertOf("t1", "id:retry", "high"), alertOf("o1", "id:attach", "high"))
	paths := fixturePaths["intake-outcomes.history.json"]
	require.Eventually(t, func() bool {
		h := historyOf(ctx, t, c, id)
		for _, p := range paths {
			if !exercises(h, p) {
				return false
			}
		}
		return true
	}, 24*time.Minute, 5*time.Second, "the admission takes %v", paths)
	saveFixture(ctx, t, c, id, "", "intake-outcomes.history.json", label)
}

// TestRecordLateRise records intake-late-rise.history.json
// (UPDATE_TESTDATA=1) or <label>-intake-late-rise.history.json on a dev
// server with scriptedIntake: an investigation's alert is seen again at a
// higher severity, and the alerts signal reaches the run as it closes; the
// run hands it back in a further investigation_closed signal. Without
// UPDATE_TESTDATA it does not run.
func TestRecordLateRise(t *testing.T) {
	const queue, id = "record-intake-late-rise", "fixture-intake-late-rise"
	ctx, c, label := recordAdmission(t, queue, id, 2*time.Minute)
	admitNow(ctx, t, c, id, alertOf("l1", "id:late", "low"))
	require.Eventually(t, func() bool { return scheduled(historyOf(ctx, t, c, id).Events, "StartInvestigation") == 1 }, time.Minute, 100*time.Millisecond)
	admitNow(ctx, t, c, id, alertOf("l2", "id:late", "high"))
	closes := func() int {
		n := 0
		for _, e := range historyOf(ctx, t, c, id).Events {
			if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.ClosedSignal {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return closes() == 2 }, time.Minute, 100*time.Millisecond, "the run closes and hands the alert back")
	// What the admission does with it (before the gate: nothing).
	time.Sleep(3 * time.Second)
	saveFixture(ctx, t, c, id, "", "intake-late-rise.history.json", label)
}

// TestRecordRoomGuards records intake-guards.history.json
// (UPDATE_TESTDATA=1) or <label>-intake-guards.history.json on a dev
// server with scriptedIntake: an investigation starts, then a hand-back
// (an investigation_closed signal returning alerts, as handBack sends,
// here naming the open entity's workflow ID as a run without a session
// does) returns a related alert no admit request could carry (its
// identity holds '<'); then the open identity's alert is seen again
// with a new alert ID. Without UPDATE_TESTDATA it does not run.
func TestRecordRoomGuards(t *testing.T) {
	const queue, id = "record-intake-guards", "fixture-intake-guards"
	ctx, c, label := recordAdmission(t, queue, id, 2*time.Minute)
	admitNow(ctx, t, c, id, alertOf("g1", "id:guard", "high"))
	require.Eventually(t, func() bool { return scheduled(historyOf(ctx, t, c, id).Events, "StartInvestigation") == 1 }, time.Minute, 100*time.Millisecond)
	time.Sleep(time.Second)
	back := investigation.Closed{WorkflowID: intake.WorkflowID("id:guard"), Reason: investigation.ClosedCompleted, Returned: investigation.ArrivalBatch{
		Arrivals: []investigation.Arrival{{Kind: investigation.ArrivalRelated, AlertID: "forged", Identity: forgedIdentity, Severity: "high"}}}}
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.ClosedSignal, back))
	time.Sleep(2 * time.Second)
	admitNow(ctx, t, c, id, alertOf("g2", "id:guard", "high"))
	time.Sleep(3 * time.Second)
	saveFixture(ctx, t, c, id, "", "intake-guards.history.json", label)
}

// forgedIdentity is an identity no admit request could carry.
const forgedIdentity = "id:<forged>"

// heldWrite stands in for the activities of an investigation whose
// progress write of its first event of the kind held waits until release
// is closed, after telling held. heldClose (an intake investigation's stop):
// the run closes meanwhile (its workflow tasks heartbeat while the local
// activity runs), and what is signalled then comes after its last progress
// was flushed. heldIdleWrite (the first idle event): the idle timeout
// passes meanwhile, so the run concludes its idle wait, begins closing and
// waits in flushProgress for the write.
type heldWrite struct {
	scripted
	kind    investigation.EventKind
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func heldClose() *heldWrite {
	return &heldWrite{kind: investigation.EventStop, held: make(chan struct{}), release: make(chan struct{})}
}

func heldIdleWrite() *heldWrite {
	return &heldWrite{kind: investigation.EventIdle, held: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldWrite) StoreProgress(ctx context.Context, in activities.ProgressInput) error {
	for _, e := range in.Events {
		if e.Kind == h.kind {
			h.once.Do(func() {
				close(h.held)
				select {
				case <-h.release:
				case <-ctx.Done():
				}
			})
		}
	}
	return nil
}

// processedAfter says a workflow task of run id completed after the first
// event match finds: the run has taken it.
func processedAfter(ctx context.Context, t *testing.T, c client.Client, id string, match func(e *historypb.HistoryEvent) bool) bool {
	seen := false
	for _, e := range historyOf(ctx, t, c, id).Events {
		seen = seen || match(e)
		if seen && e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return true
		}
	}
	return false
}

// fixtureAdmission stands in for the admission workflow: it takes every
// signal an investigation sends it, and stays open.
func fixtureAdmission(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool { return false })
}

// TestRecordHandBackNotes records intake-hand-back-notes.history.json
// (UPDATE_TESTDATA=1) or <label>-intake-hand-back-notes.history.json on a
// dev server with an unversioned worker and scripted activities: an
// intake investigation is stopped while idle, and while its stop's
// progress write is held the run tells the admission it closed and
// flushes its progress; then a related alert is signalled, which the run
// hands back. Without UPDATE_TESTDATA it does not run.
func TestRecordHandBackNotes(t *testing.T) {
	const queue, id, admission = "record-hand-back-notes", "fixture-intake-hand-back-notes", "fixture-hand-back-admission"
	acts := heldClose()
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) {
		w.RegisterWorkflow(fixtureAdmission)
		w.RegisterActivity(acts)
	})
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: admission, TaskQueue: queue}, fixtureAdmission)
	require.NoError(t, err)
	// A short workflow task timeout: the held write heartbeats the task
	// every 0.8 s, which delivers the close's result and the alert (the
	// write's attempt has 10 s).
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue, WorkflowTaskTimeout: time.Second}, investigation.WorkflowName,
		investigation.Input{AlertID: "a1", Intake: &investigation.IntakeInput{Identity: "id:notes", Admission: admission}})
	require.NoError(t, err)
	waitIdle(ctx, t, c, id, "the investigation concludes")
	_, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: investigation.UpdateStop, Args: []any{"enough"}, WaitForStage: client.WorkflowUpdateStageAccepted})
	require.NoError(t, err)
	select {
	case <-acts.held:
	case <-ctx.Done():
		t.Fatal("the stop's progress write never started")
	}
	taken := func(match func(e *historypb.HistoryEvent) bool) bool { return processedAfter(ctx, t, c, id, match) }
	closing := false
	require.Eventually(t, func() bool {
		closing = false
		return taken(func(e *historypb.HistoryEvent) bool {
			closing = closing || e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName() == investigation.ClosedSignal
			return closing && e.GetExternalWorkflowExecutionSignaledEventAttributes() != nil
		})
	}, 7*time.Second, 100*time.Millisecond, "the close is told while the write is held")
	late := investigation.ArrivalBatch{Arrivals: []investigation.Arrival{{Kind: investigation.ArrivalRelated, AlertID: "n2", Identity: "id:notes-2", Severity: "high", Shared: "ip:192.0.2.9", Times: 1}}}
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.AlertsUpdate, late))
	require.Eventually(t, func() bool {
		return taken(func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.AlertsUpdate
		})
	}, 7*time.Second, 100*time.Millisecond, "the alert is taken while the write is held")
	close(acts.release)
	var res investigation.Result
	require.NoError(t, run.Get(ctx, &res))

	saveFixture(ctx, t, c, id, run.GetRunID(), "intake-hand-back-notes.history.json", label)
}

// heldIntrospection stands in for the sub-agent's activities: it answers
// at once, and its introspection waits until release is closed, after
// telling started.
type heldIntrospection struct {
	started chan struct{}
	release chan struct{}
}

func (*heldIntrospection) RecallMemories(context.Context, bigquery.RecallInput) (bigquery.Recall, error) {
	return bigquery.Recall{}, nil
}

func (*heldIntrospection) SubAgentTurn(_ context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
	return activities.TurnOutput{Key: in.Key, Text: "three logins from 192.0.2.9", Usage: investigation.Usage{Calls: 1}}, nil
}

func (h *heldIntrospection) Introspect(ctx context.Context, _ bigquery.IntrospectInput) (bigquery.Introspection, error) {
	close(h.started)
	select {
	case <-h.release:
	case <-ctx.Done():
		return bigquery.Introspection{}, ctx.Err()
	}
	return bigquery.Introspection{Claims: []memory.Claim{{Kind: memory.KindColumnMeaning, Text: "logins.ip is the client's address"}}, Usage: investigation.Usage{Calls: 1}}, nil
}

func (*heldIntrospection) UpdateMemories(context.Context, bigquery.MemoryUpdate) (bigquery.MemoryChanges, error) {
	return bigquery.MemoryChanges{}, nil
}

func (*heldIntrospection) DeliverAnswer(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
	return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
}

// fixtureParent stands in for the investigation that starts a sub-agent:
// it starts one under childID for its own session and returns its answer.
func fixtureParent(ctx workflow.Context, req bigquery.Request) (activities.ToolOutput, error) {
	req.ParentSession = workflow.GetInfo(ctx).WorkflowExecution.ID
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: childID(req.ParentSession, req.ResultKey)})
	var out activities.ToolOutput
	err := workflow.ExecuteChildWorkflow(ctx, investigation.BigQueryWorkflowName, req).Get(ctx, &out)
	return out, err
}

// TestRecordStopDuringIntrospection records
// stop-learning-child.history.json (UPDATE_TESTDATA=1) or
// <label>-stop-learning-child.history.json on a dev server with an
// unversioned worker and scripted activities: a sub-agent answers, and its
// parent's stop reaches it while it introspects. Without UPDATE_TESTDATA it
// does not run.
func TestRecordStopDuringIntrospection(t *testing.T) {
	const queue, id = "record-stop-learning", "fixture-stop-learning"
	acts := &heldIntrospection{started: make(chan struct{}), release: make(chan struct{})}
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) {
		w.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
		w.RegisterWorkflow(fixtureParent)
		w.RegisterActivity(acts)
	})
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, fixtureParent,
		bigquery.Request{Request: "who logged in from 192.0.2.9?", ResultKey: "t1-step_1-i1-c1", CallID: "c1"})
	require.NoError(t, err)
	child := childID(id, "t1-step_1-i1-c1")
	select {
	case <-acts.started:
	case <-ctx.Done():
		t.Fatal("the introspection never started")
	}
	require.NoError(t, c.SignalWorkflow(ctx, child, "", investigation.UpdateStop, "enough"))
	require.Eventually(t, func() bool {
		seen := false
		for _, e := range historyOf(ctx, t, c, child).Events {
			seen = seen || e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.UpdateStop
			if seen && e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				return true
			}
		}
		return false
	}, 10*time.Second, 100*time.Millisecond, "the sub-agent takes the stop while it introspects")
	close(acts.release)
	var out activities.ToolOutput
	require.NoError(t, run.Get(ctx, &out))

	desc, err := c.DescribeWorkflowExecution(ctx, child, "")
	require.NoError(t, err)
	saveFixture(ctx, t, c, child, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "stop-learning-child.history.json", label)
}

// lateTurn stands in for the sub-agent's activities: its one model turn
// answers after turn, and it learns a claim.
type lateTurn struct{ turn time.Duration }

func (*lateTurn) RecallMemories(context.Context, bigquery.RecallInput) (bigquery.Recall, error) {
	return bigquery.Recall{}, nil
}

func (l *lateTurn) SubAgentTurn(ctx context.Context, in bigquery.SubAgentTurnInput) (activities.TurnOutput, error) {
	select {
	case <-time.After(l.turn):
	case <-ctx.Done():
		return activities.TurnOutput{}, ctx.Err()
	}
	return activities.TurnOutput{Key: in.Key, Text: "three logins from 192.0.2.9", Usage: investigation.Usage{Calls: 1}}, nil
}

func (*lateTurn) Introspect(context.Context, bigquery.IntrospectInput) (bigquery.Introspection, error) {
	return bigquery.Introspection{Claims: []memory.Claim{{Kind: memory.KindColumnMeaning, Text: "logins.ip is the client's address"}}, Usage: investigation.Usage{Calls: 1}}, nil
}

func (*lateTurn) UpdateMemories(context.Context, bigquery.MemoryUpdate) (bigquery.MemoryChanges, error) {
	return bigquery.MemoryChanges{}, nil
}

func (*lateTurn) DeliverAnswer(_ context.Context, in bigquery.DeliverInput) (activities.ToolOutput, error) {
	return activities.ToolOutput{Key: in.ResultKey, OK: true}, nil
}

// TestRecordTurnPastDeadline records late-turn-child.history.json
// (UPDATE_TESTDATA=1) or <label>-late-turn-child.history.json on a dev
// server with an unversioned worker and scripted activities: a sub-agent's
// only model turn begins before its deadline and answers after it. Without
// UPDATE_TESTDATA it does not run.
func TestRecordTurnPastDeadline(t *testing.T) {
	const queue, id = "record-late-turn", "fixture-late-turn"
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) {
		w.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
		w.RegisterWorkflow(fixtureParent)
		w.RegisterActivity(&lateTurn{turn: 5 * time.Second})
	})
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, fixtureParent,
		bigquery.Request{Request: "who logged in from 192.0.2.9?", ResultKey: "t1-step_1-i1-c1", CallID: "c1", Deadline: time.Now().Add(3 * time.Second)})
	require.NoError(t, err)
	var out activities.ToolOutput
	require.NoError(t, run.Get(ctx, &out))

	child := childID(id, "t1-step_1-i1-c1")
	desc, err := c.DescribeWorkflowExecution(ctx, child, "")
	require.NoError(t, err)
	saveFixture(ctx, t, c, child, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "late-turn-child.history.json", label)
}

// deliveries stands in for the activities of an intake investigation
// whose every conclusion is the same verdict and confidence: its
// follow-ups are planned or answered directly in the order of modes (a
// direct answer's review leaves the verdict), Slack takes every delivery
// and the results topic fails the first two.
type deliveries struct {
	scripted
	mu        sync.Mutex
	modes     []string
	published int
}

func (d *deliveries) DecideMode(context.Context, activities.ModeInput) (activities.Mode, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.modes[0]
	d.modes = d.modes[1:]
	return activities.Mode{Mode: m, Reason: "scripted", Usage: investigation.Usage{Calls: 1}}, nil
}

func (*deliveries) ReviewVerdict(context.Context, activities.ReviewInput) (activities.Review, error) {
	return activities.Review{Usage: investigation.Usage{Calls: 1}}, nil
}

func (*deliveries) DeliverSlack(context.Context, activities.DeliveryInput) (activities.DeliveryOutput, error) {
	return activities.DeliveryOutput{}, nil
}

func (d *deliveries) PublishResult(context.Context, activities.DeliveryInput) (activities.DeliveryOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.published++; d.published <= 2 {
		return activities.DeliveryOutput{}, temporal.NewNonRetryableApplicationError("topic not found", "NotFound", nil)
	}
	return activities.DeliveryOutput{MessageID: fmt.Sprint("m", d.published)}, nil
}

// TestRecordDeliveries records intake-deliveries.history.json
// (UPDATE_TESTDATA=1) or <label>-intake-deliveries.history.json on a dev
// server with an unversioned worker and scripted activities: an intake
// investigation delivering to Slack and a results topic concludes (Slack
// takes it, the topic fails), a planned follow-up concludes with the same
// verdict and confidence (the topic fails again), and a direct answer
// leaves the verdict; then the analyst stops it. Without UPDATE_TESTDATA
// it does not run.
func TestRecordDeliveries(t *testing.T) {
	const queue, id, admission = "record-intake-deliveries", "fixture-intake-deliveries", "fixture-deliveries-admission"
	acts := &deliveries{modes: []string{investigation.ModePlan, investigation.ModeDirect}}
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) {
		w.RegisterWorkflow(fixtureAdmission)
		w.RegisterActivity(acts)
	})
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: admission, TaskQueue: queue}, fixtureAdmission)
	require.NoError(t, err)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, investigation.WorkflowName,
		investigation.Input{AlertID: "d1", Intake: &investigation.IntakeInput{Identity: "id:deliveries", Admission: admission,
			Delivery: investigation.Delivery{Slack: true, ResultsTopic: "projects/p/topics/results"}}})
	require.NoError(t, err)
	// settled waits until n exchanges are over (each ends in a Conclude or
	// a ReviewVerdict) and the run's deliveries ended, so the next one
	// knows what each target received.
	settled := func(n int, what string) {
		require.Eventually(t, func() bool {
			events := historyOf(ctx, t, c, id).Events
			if scheduled(events, "Conclude")+scheduled(events, "ReviewVerdict") < n {
				return false
			}
			v, err := c.QueryWorkflow(ctx, id, "", investigation.StatusQuery)
			var st investigation.Status
			if err != nil || v.Get(&st) != nil || st.Phase != investigation.PhaseIdle || st.Intake == nil || len(st.Intake.Deliveries) == 0 {
				return false
			}
			return !st.Intake.Deliveries[len(st.Intake.Deliveries)-1].Pending
		}, time.Minute, 100*time.Millisecond, what)
	}
	ask := func(question string) {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: investigation.UpdateAsk, Args: []any{question}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, nil))
	}
	settled(1, "the investigation concludes and delivers")
	ask("Did host-8 see the same source?")
	settled(2, "the planned follow-up concludes")
	ask("Which user was targeted?")
	settled(3, "the direct answer is reviewed")
	_, err = c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: investigation.UpdateStop, Args: []any{"enough"}, WaitForStage: client.WorkflowUpdateStageAccepted})
	require.NoError(t, err)
	var res investigation.Result
	require.NoError(t, run.Get(ctx, &res))

	saveFixture(ctx, t, c, id, run.GetRunID(), "intake-deliveries.history.json", label)
}

// failedLookup stands in for the activities of an investigation whose
// first step's get_alert call returns an error result, after which the
// second step runs. The objective is padded so that the context stored
// for the first step's reflection is just over inlineContext when the
// failed call counts as the step's evidence, and within it when it does
// not: a StoreContext marker then tells the two rules apart.
type failedLookup struct{}

func (*failedLookup) StoreContext(context.Context, activities.ContextInput) error   { return nil }
func (*failedLookup) StoreProgress(context.Context, activities.ProgressInput) error { return nil }

func (*failedLookup) GeneratePlan(context.Context, activities.PlanInput) (activities.PlanOutput, error) {
	return activities.PlanOutput{Usage: investigation.Usage{Calls: 1}, Tools: toolNames, Plan: plan.Plan{
		Objective: "Decide if the brute force on host-7 succeeded" + strings.Repeat(".", failedLookupPad),
		Steps: []plan.Step{
			{ID: "step_1", Description: "Read the alert", Tools: []string{"get_alert"}, Expected: "details", Status: plan.Pending},
			{ID: "step_2", Description: "Find related alerts", Tools: []string{"search_alerts"}, Expected: "history", Status: plan.Pending},
		}}}, nil
}

// failedLookupPad sizes the objective (see failedLookup).
const failedLookupPad = 1497

func (*failedLookup) ModelTurn(_ context.Context, in activities.TurnInput) (activities.TurnOutput, error) {
	if in.Step.ID == "step_1" && len(in.Transcript) == 0 {
		return activities.TurnOutput{Key: in.Key, Usage: investigation.Usage{Calls: 1}, Calls: []toolcall.Call{
			{ID: "c1", Name: "get_alert", Args: map[string]any{"id": "a1"}}}}, nil
	}
	return activities.TurnOutput{Key: in.Key, Text: "nothing found in " + in.Step.ID, Usage: investigation.Usage{Calls: 1}}, nil
}

func (*failedLookup) CallTool(_ context.Context, in activities.ToolInput) (activities.ToolOutput, error) {
	return activities.ToolOutput{Key: in.Key, OK: false, Error: "alert a1 not found"}, nil
}

func (*failedLookup) Reflect(context.Context, activities.ReflectInput) (activities.Reflection, error) {
	return activities.Reflection{Usage: investigation.Usage{Calls: 1}}, nil
}

func (*failedLookup) Conclude(context.Context, activities.ConcludeInput) (activities.Conclusion, error) {
	return activities.Conclusion{Markdown: "## Summary\nThe alert could not be read.", Usage: investigation.Usage{Calls: 1},
		Verdict: &investigation.Verdict{Verdict: investigation.VerdictUndetermined, Confidence: "low"}}, nil
}

// TestRecordFailedLookup records failed-lookup.history.json
// (UPDATE_TESTDATA=1) or <label>-failed-lookup.history.json on a dev
// server with an unversioned worker and scripted activities: the first
// step's get_alert call returns an error result and the investigation goes
// on to the second step and concludes. Without UPDATE_TESTDATA it does not
// run.
func TestRecordFailedLookup(t *testing.T) {
	const queue, id = "record-failed-lookup", "fixture-failed-lookup"
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) { w.RegisterActivity(&failedLookup{}) })
	run := startFixture(ctx, t, c, queue, id)
	waitIdle(ctx, t, c, id, "the investigation concludes")
	saveFixture(ctx, t, c, id, run.GetRunID(), "failed-lookup.history.json", label)
}

// planGuardsActs stands in for the activities of an investigation whose
// step_1 (planned with get_alert only) calls search_alerts, and whose
// follow-up the planner cannot plan (no executable step, twice).
type planGuardsActs struct {
	stubActs
	mu    sync.Mutex
	plans int
}

func (p *planGuardsActs) GeneratePlan(context.Context, activities.PlanInput) (activities.PlanOutput, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plans++; p.plans > 1 {
		return activities.PlanOutput{}, temporal.NewNonRetryableApplicationError(
			"the model's plan answer was unusable twice: the plan has no executable steps", activities.ErrMalformedOutput, nil)
	}
	return oneStepPlan(), nil
}

func (*planGuardsActs) ModelTurn(_ context.Context, in activities.TurnInput) (activities.TurnOutput, error) {
	if len(in.Transcript) == 0 && !in.Final {
		return activities.TurnOutput{Key: in.Key, Usage: investigation.Usage{Calls: 1}, Calls: []toolcall.Call{
			{ID: "c1", Name: "search_alerts", Args: map[string]any{"field": "type", "value": "x"}}}}, nil
	}
	return activities.TurnOutput{Key: in.Key, Text: "no login followed the failures", Usage: investigation.Usage{Calls: 1}}, nil
}

func (*planGuardsActs) CallTool(_ context.Context, in activities.ToolInput) (activities.ToolOutput, error) {
	return activities.ToolOutput{Key: in.Key, OK: true, Bytes: 20}, nil
}

func (*planGuardsActs) DecideMode(context.Context, activities.ModeInput) (activities.Mode, error) {
	return activities.Mode{Mode: investigation.ModePlan, Reason: "a related alert", Usage: investigation.Usage{Calls: 1}}, nil
}

// TestRecordPlanGuards records plan-guards.history.json (UPDATE_TESTDATA=1)
// or <label>-plan-guards.history.json on a Temporal dev server, with an
// unversioned worker and scripted activities: step_1, planned with
// get_alert only, calls search_alerts; then a follow-up is asked whose
// planning fails. Before the plan-guards gate the call ran and the
// investigation failed; after it the call is refused, the follow-up ends
// with a note and the analyst stops the idle run.
func TestRecordPlanGuards(t *testing.T) {
	const queue, id = "record-plan-guards", "fixture-plan-guards"
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) { w.RegisterActivity(&planGuardsActs{}) })

	run := startFixture(ctx, t, c, queue, id)
	status := func() investigation.Status {
		var st investigation.Status
		if v, err := c.QueryWorkflow(ctx, id, "", investigation.StatusQuery); err == nil {
			_ = v.Get(&st)
		}
		return st
	}
	require.Eventually(t, func() bool { return status().Phase == investigation.PhaseIdle }, time.Minute, 100*time.Millisecond, "the first exchange concludes")
	steer := steerer(ctx, t, c, id)
	steer(investigation.UpdateAsk, "And the related alert?")
	failed := false
	require.Eventually(t, func() bool {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
			failed = true
			return true
		}
		st := status()
		return st.Phase == investigation.PhaseIdle && st.Turn == 3
	}, time.Minute, 100*time.Millisecond, "the follow-up ends")
	if !failed {
		steer(investigation.UpdateStop, "enough")
	}
	var res investigation.Result
	err := run.Get(ctx, &res)
	require.Equal(t, failed, err != nil, "%v", err)

	saveFixture(ctx, t, c, id, run.GetRunID(), "plan-guards.history.json", label)
}

// --- action-outcomes (GetVersion "action-outcomes", workflows/mcp.go) ---

// actionOutcomeActs stands in for the activities of an investigation whose
// step asks to block an IP twice (mcpPlan): the server refuses the first
// approved call; the second is approved with the analyst's stop.
type actionOutcomeActs struct{ stubActs }

func (*actionOutcomeActs) GeneratePlan(context.Context, activities.PlanInput) (activities.PlanOutput, error) {
	return mcpPlan(), nil
}

func (*actionOutcomeActs) ModelTurn(_ context.Context, in activities.TurnInput) (activities.TurnOutput, error) {
	out := activities.TurnOutput{Key: in.Key, Usage: investigation.Usage{Calls: 1}}
	switch len(in.Transcript) {
	case 0:
		out.Calls = []toolcall.Call{{ID: "c2", Name: "response.block_ip", Args: map[string]any{"ip": "198.51.100.23"}}}
	case 2:
		out.Calls = []toolcall.Call{{ID: "c3", Name: "response.block_ip", Args: map[string]any{"ip": "198.51.100.24"}}}
	default:
		out.Text = "the block was refused"
	}
	return out, nil
}

func (*actionOutcomeActs) CallTool(_ context.Context, in activities.ToolInput) (activities.ToolOutput, error) {
	if in.Call.ID == "c2" {
		return activities.ToolOutput{Key: in.Key, OK: false, Outcome: activities.CallRefused,
			Error: "the MCP server response refused the call: 198.51.100.23 is on the allow list"}, nil
	}
	return activities.ToolOutput{Key: in.Key, OK: true, Bytes: 20}, nil
}

func (*actionOutcomeActs) CutAnswer(_ context.Context, in activities.CutAnswerInput) (activities.TurnOutput, error) {
	return activities.TurnOutput{Key: in.Key, Text: "stopped: " + in.Reason}, nil
}

func (*actionOutcomeActs) Conclude(context.Context, activities.ConcludeInput) (activities.Conclusion, error) {
	return activities.Conclusion{Markdown: "## Summary\nThe block was refused.", Usage: investigation.Usage{Calls: 1},
		Verdict: &investigation.Verdict{Verdict: investigation.VerdictTruePositive, Confidence: "medium"}}, nil
}

// TestRecordActionOutcomes records action-outcomes.history.json
// (UPDATE_TESTDATA=1) or <label>-action-outcomes.history.json on a dev
// server with an unversioned worker and scripted activities: the analyst
// approves block_ip, which the server refuses; the step asks to block
// another IP; with the worker down, a stop signal and an approve_call
// signal for it arrive, so that the worker back takes both in one
// workflow task. Without UPDATE_TESTDATA it does not run.
func TestRecordActionOutcomes(t *testing.T) {
	const queue, id = "record-action-outcomes", "fixture-action-outcomes"
	ctx, c, label := recordServer(t)
	start := func() worker.Worker {
		return startRecorder(t, c, queue, func(w worker.Worker) { w.RegisterActivity(&actionOutcomeActs{}) })
	}
	w := start()

	run := startFixture(ctx, t, c, queue, id)
	pending := func(n int) string {
		var call string
		require.Eventually(t, func() bool {
			var st investigation.Status
			v, err := c.QueryWorkflow(ctx, id, "", investigation.StatusQuery)
			if err != nil || v.Get(&st) != nil || len(st.Actions) < n || st.Actions[n-1].Status != investigation.ActionPending {
				return false
			}
			call = st.Actions[n-1].CallID
			return true
		}, time.Minute, 100*time.Millisecond, "action %d waits", n)
		return call
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: investigation.UpdateApproveCall,
		Args: []any{investigation.CallDecision{CallID: pending(1)}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	second := pending(2)
	w.Stop()
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.UpdateStop, "enough"))
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.UpdateApproveCall, second))
	t.Cleanup(start().Stop)
	var res investigation.Result
	require.NoError(t, run.Get(ctx, &res))

	saveFixture(ctx, t, c, id, run.GetRunID(), "action-outcomes.history.json", label)
}

// --- end action-outcomes ---

// --- insights-and-duplicates (GetVersion "insights-and-duplicates", workflows/reflect.go) ---

// oversizedInsight is the insight of step_1's reflection in the
// insights-duplicates fixtures: about 3 KiB, over activities.MaxInsightBytes.
var oversizedInsight = strings.TrimSpace(strings.Repeat("logrow ", 430))

// insightDupActs stands in for the activities of an investigation whose
// step_1 reflection writes an insight of 3 KiB, and whose follow-up
// continues the plan with steps dropped as duplicates (step_3 repeats
// step_1, step_5 repeats step_4) that step_6 depends on.
type insightDupActs struct {
	stubActs
	mu               sync.Mutex
	plans, concluded int
}

func (p *insightDupActs) GeneratePlan(context.Context, activities.PlanInput) (activities.PlanOutput, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plans++; p.plans > 1 {
		return followUpWithDuplicates(), nil
	}
	return twoStepPlan(), nil
}

func (*insightDupActs) ModelTurn(_ context.Context, in activities.TurnInput) (activities.TurnOutput, error) {
	return activities.TurnOutput{Key: in.Key, Text: "found in " + in.Step.ID, Usage: investigation.Usage{Calls: 1}}, nil
}

func (*insightDupActs) Reflect(_ context.Context, in activities.ReflectInput) (activities.Reflection, error) {
	out := activities.Reflection{Usage: investigation.Usage{Calls: 1}}
	if in.Step.ID == "step_1" {
		out.Insights = []string{"198.51.100.23 failed 1,204 logins (step_1)", oversizedInsight}
	}
	return out, nil
}

func (p *insightDupActs) Conclude(ctx context.Context, in activities.ConcludeInput) (activities.Conclusion, error) {
	p.mu.Lock()
	p.concluded++
	p.mu.Unlock()
	return p.stubActs.Conclude(ctx, in)
}

func (*insightDupActs) DecideMode(context.Context, activities.ModeInput) (activities.Mode, error) {
	return activities.Mode{Mode: investigation.ModePlan, Reason: "the bastion", Usage: investigation.Usage{Calls: 1}}, nil
}

// TestRecordInsightsAndDuplicates records insights-duplicates.history.json
// (UPDATE_TESTDATA=1) or <label>-insights-duplicates.history.json on a
// Temporal dev server, with an unversioned worker and scripted activities
// (insightDupActs): step_1's reflection writes a 3 KiB insight, a
// follow-up continues the plan with duplicates a later step depends on,
// and the analyst stops the idle run. Before the insights-and-duplicates
// gate the insight was kept whole and the summary step started at once;
// after it the insight is clipped and the summary step waits for the
// bastion step.
func TestRecordInsightsAndDuplicates(t *testing.T) {
	const queue, id = "record-insights-duplicates", "fixture-insights-duplicates"
	acts := &insightDupActs{}
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) { w.RegisterActivity(acts) })

	run := startFixture(ctx, t, c, queue, id)
	concluded := func() int {
		acts.mu.Lock()
		defer acts.mu.Unlock()
		return acts.concluded
	}
	require.Eventually(t, func() bool { return concluded() == 1 }, time.Minute, 100*time.Millisecond, "the first exchange concludes")
	waitIdle(ctx, t, c, id, "the first exchange ends")
	steer := steerer(ctx, t, c, id)
	steer(investigation.UpdateAsk, "And the bastion?")
	require.Eventually(t, func() bool { return concluded() == 2 }, time.Minute, 100*time.Millisecond, "the follow-up concludes")
	waitIdle(ctx, t, c, id, "the follow-up ends")
	steer(investigation.UpdateStop, "enough")
	require.NoError(t, run.Get(ctx, nil))

	saveFixture(ctx, t, c, id, run.GetRunID(), "insights-duplicates.history.json", label)
}

// --- end insights-and-duplicates ---

// --- bounded-signal-notes (GetVersion "bounded-signal-notes", workflows/signals.go) ---

// signalFlood is how many hint signals with a payload the run cannot read
// the signal-notes fixtures send while idle: more than maxSignalNotes + 1,
// each in a workflow task of its own.
const signalFlood = maxSignalNotes + 3

// TestRecordSignalNotes records signal-notes.history.json
// (UPDATE_TESTDATA=1) or <label>-signal-notes.history.json on a Temporal
// dev server, with an unversioned worker and scripted activities: an
// investigation concludes, takes signalFlood hint signals whose payload is
// a number while idle, and the analyst stops it. Before the
// bounded-signal-notes gate each signal was a note (a progress write per
// workflow task); after it, the notes past maxSignalNotes + 1 are not
// emitted, and their workflow tasks write nothing.
func TestRecordSignalNotes(t *testing.T) {
	const queue, id = "record-signal-notes", "fixture-signal-notes"
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) { w.RegisterActivity(&scripted{}) })

	run := startFixture(ctx, t, c, queue, id)
	waitIdle(ctx, t, c, id, "the first exchange concludes")
	tasks := func() int {
		n := 0
		it := c.GetWorkflowHistory(ctx, id, run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			require.NoError(t, err)
			if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				n++
			}
		}
		return n
	}
	for i := range signalFlood {
		before := tasks()
		require.NoError(t, c.SignalWorkflow(ctx, id, run.GetRunID(), investigation.UpdateHint, i+1))
		require.Eventually(t, func() bool { return tasks() > before }, time.Minute, 50*time.Millisecond, "signal %d is taken", i+1)
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, RunID: run.GetRunID(), UpdateName: investigation.UpdateStop,
		Args: []any{"enough"}, WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, nil))
	require.NoError(t, run.Get(ctx, nil))

	saveFixture(ctx, t, c, id, run.GetRunID(), "signal-notes.history.json", label)
}

// --- end bounded-signal-notes ---

// --- closed-stop-signal (GetVersion "closed-stop-signal", workflows/steering.go) ---

// TestRecordStopSignalWhileClosing records
// stop-signal-while-closing.history.json (UPDATE_TESTDATA=1) or
// <label>-stop-signal-while-closing.history.json on a dev server with an
// unversioned worker and scripted activities: an investigation concludes,
// its idle wait (2 s) ends while its idle event's progress write is held,
// and once it began closing (flushProgress waits for that write) the
// analyst signals a stop. Before the closed-stop-signal gate the stop was
// applied (its reason in the status, which the last write stored); after
// it, it is ignored. Without UPDATE_TESTDATA it does not run.
func TestRecordStopSignalWhileClosing(t *testing.T) {
	const queue, id = "record-stop-signal-while-closing", "fixture-stop-signal-while-closing"
	acts := heldIdleWrite()
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) { w.RegisterActivity(acts) })
	// A short workflow task timeout: the held write heartbeats the task
	// every 0.8 s, which delivers the idle timer and the stop signal (the
	// write's attempt has 10 s).
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue, WorkflowTaskTimeout: time.Second}, investigation.WorkflowName,
		investigation.Input{AlertID: "a1", IdleTimeout: investigation.Duration(2 * time.Second)})
	require.NoError(t, err)
	select {
	case <-acts.held:
	case <-ctx.Done():
		t.Fatal("the idle event's progress write never started")
	}
	taken := func(match func(e *historypb.HistoryEvent) bool) bool { return processedAfter(ctx, t, c, id, match) }
	require.Eventually(t, func() bool {
		return taken(func(e *historypb.HistoryEvent) bool { return e.GetTimerFiredEventAttributes() != nil })
	}, 7*time.Second, 100*time.Millisecond, "the idle wait ends while the write is held")
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.UpdateStop, "enough"))
	require.Eventually(t, func() bool {
		return taken(func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.UpdateStop
		})
	}, 7*time.Second, 100*time.Millisecond, "the stop is taken while the write is held")
	close(acts.release)
	var res investigation.Result
	require.NoError(t, run.Get(ctx, &res))

	saveFixture(ctx, t, c, id, run.GetRunID(), "stop-signal-while-closing.history.json", label)
}

// --- end closed-stop-signal ---
