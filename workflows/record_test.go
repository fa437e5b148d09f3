package workflows

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// recordOn starts what a recording test needs, or skips it without
// UPDATE_TESTDATA (the label it returns): a Temporal dev server
// (internal/testenv) and an unversioned worker on queue with Investigation
// and what register adds; both stop with the test.
func recordOn(t *testing.T, queue string, register func(worker.Worker)) (context.Context, client.Client, string) {
	label := os.Getenv("UPDATE_TESTDATA")
	if label == "" {
		t.Skip("records a fixture: set UPDATE_TESTDATA (design/versioning.md)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	srv, err := testenv.StartTemporal(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	w := worker.New(srv.Client(), queue, worker.Options{})
	w.RegisterWorkflowWithOptions(Investigation, workflow.RegisterOptions{Name: investigation.WorkflowName})
	register(w)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return ctx, srv.Client(), label
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

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, investigation.WorkflowName, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(ctx, id, "", investigation.StatusQuery)
		var st investigation.Status
		return err == nil && v.Get(&st) == nil && st.Phase == investigation.PhaseIdle
	}, time.Minute, 100*time.Millisecond, "the first exchange concludes")
	steer := func(name string, arg any) {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, nil))
	}
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
	require.Eventually(t, func() bool {
		v, err := c.QueryWorkflow(ctx, id, "", investigation.StatusQuery)
		var st investigation.Status
		return err == nil && v.Get(&st) == nil && st.Phase == investigation.PhaseIdle
	}, time.Minute, 100*time.Millisecond, "the investigation concludes")
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

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, investigation.WorkflowName, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
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
