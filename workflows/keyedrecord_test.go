package workflows

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/payloadcodec"
)

// fixtureKeys is the key file of the keyed fixtures (keyed-*.history.json),
// which replay only with it.
func fixtureKeys(t *testing.T) *payloadcodec.Keys {
	t.Helper()
	k, err := payloadcodec.LoadKeyFile("testdata/fixture-payload-keys.txt")
	require.NoError(t, err)
	return k
}

// heldTurn stands in for the activities of a one-step investigation whose
// model turn waits until release is closed.
type heldTurn struct {
	stubActs
	release chan struct{}
}

func (*heldTurn) GeneratePlan(context.Context, activities.PlanInput) (activities.PlanOutput, error) {
	return oneStepPlan(), nil
}

func (h *heldTurn) ModelTurn(ctx context.Context, in activities.TurnInput) (activities.TurnOutput, error) {
	select {
	case <-h.release:
	case <-ctx.Done():
		return activities.TurnOutput{}, ctx.Err()
	}
	return activities.TurnOutput{Key: in.Key, Text: "no login followed the failures", Usage: investigation.Usage{Calls: 1}}, nil
}

// TestRecordPayloadlessSteering records keyed-payloadless.history.json
// (UPDATE_TESTDATA=1) or <label>-keyed-payloadless.history.json on a
// Temporal dev server, with a worker that holds the fixture key: the plan
// waits for approval, someone without the key sends an `approve` update
// and then a `stop` signal that carry no payload at all, and the analyst
// stops the investigation with an encrypted `stop` update. Without
// UPDATE_TESTDATA it does not run.
func TestRecordPayloadlessSteering(t *testing.T) {
	const queue, id = "record-keyed-payloadless", "fixture-keyed-payloadless"
	keys := fixtureKeys(t)
	acts := &heldTurn{release: make(chan struct{})}
	ctx, plain, label := recordOn(t, queue, func(worker.Worker) {})
	dc, fc := payloadcodec.NewDataConverter(keys, nil), payloadcodec.NewFailureConverter(payloadcodec.NewDataConverter(keys, nil), true)
	c, err := client.NewClientFromExisting(plain, client.Options{DataConverter: rawSignals{dc}, FailureConverter: fc})
	require.NoError(t, err)
	w := worker.New(c, queue+"-keyed", worker.Options{})
	w.RegisterWorkflowWithOptions(Investigation, workflow.RegisterOptions{Name: investigation.WorkflowName})
	w.RegisterActivity(acts)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue + "-keyed"}, investigation.WorkflowName,
		investigation.Input{AlertID: "a1", ApprovePlan: true})
	require.NoError(t, err)
	events := func() []investigation.Event {
		v, err := c.QueryWorkflow(ctx, id, "", investigation.ProgressQuery, 0)
		var evs []investigation.Event
		if err != nil || v.Get(&evs) != nil {
			return nil
		}
		return evs
	}
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(events(), func(e investigation.Event) bool { return e.Text == "awaiting" })
	}, time.Minute, 100*time.Millisecond, "the plan waits for approval")
	none := &commonpb.Payloads{}
	if h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: investigation.UpdateApprove,
		Args: []any{none}, WaitForStage: client.WorkflowUpdateStageCompleted}); err == nil {
		_ = h.Get(ctx, nil) // refused once payloadless inputs are
	}
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.UpdateStop, none))
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(events(), func(e investigation.Event) bool {
			return e.Kind == investigation.EventStop || strings.HasPrefix(e.Text, investigation.UpdateStop+" signal")
		})
	}, time.Minute, 100*time.Millisecond, "the stop signal is handled")
	if h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: investigation.UpdateStop,
		Args: []any{"enough"}, WaitForStage: client.WorkflowUpdateStageCompleted}); err == nil {
		_ = h.Get(ctx, nil) // refused when the payloadless stop was taken
	}
	close(acts.release)
	var res investigation.Result
	require.NoError(t, run.Get(ctx, &res))

	saveFixture(ctx, t, c, id, run.GetRunID(), "keyed-payloadless.history.json", label)
}
