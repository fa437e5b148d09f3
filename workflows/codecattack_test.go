package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/payloadcodec"
)

// TestCopiedFailurePayloadsStopNothing: an encrypted failure's attributes are
// a payload in an ordinary history. Someone without the key copies one (a
// failure written before failures were bound, so bound to the key only, or
// one of another investigation) and sends it as the stop signal, which needs
// no text: it is refused, and the run does not stop.
func TestCopiedFailurePayloadsStopNothing(t *testing.T) {
	keys := keyRing(t, "k1")
	_, fc := agentclient.Converters(keys, nil)
	other := converter.WithFailureConverterSerializationContext(fc,
		converter.WorkflowSerializationContext{Namespace: "default-test-namespace", WorkflowID: "investigation-other"})
	for name, f := range map[string]converter.FailureConverter{"bound to the key only": fc, "of another investigation": other} {
		t.Run(name, func(t *testing.T) {
			stolen := f.ErrorToFailure(errors.New("gemini: 429 rate limited")).GetEncodedAttributes()
			require.NotNil(t, stolen)
			h := newHarness(t)
			h.env.SetDataConverter(rawSignals{payloadcodec.NewDataConverter(keys, nil)})
			h.onPlan(twoStepPlan(), nil)
			h.onSlowTurn(time.Minute, func(activities.TurnInput) (activities.TurnOutput, error) {
				return activities.TurnOutput{Text: "ok"}, nil
			})
			h.onReflect(noChange)
			h.signal(30*time.Second, investigation.UpdateStop, &commonpb.Payloads{Payloads: []*commonpb.Payload{stolen}})
			_, err := h.run(t, investigation.Input{AlertID: "a1"})
			require.NoError(t, err)
			evs := h.events(t)
			require.NotContains(t, kinds(evs), "stop", "a stop made from a copied failure must be refused")
			require.Contains(t, notes(evs), "stop signal refused: "+refusedBy(t, keys, stolen))
		})
	}
}

// refusedBy is the sentence a workflow's codec refuses p with.
func refusedBy(t *testing.T, keys *payloadcodec.Keys, p *commonpb.Payload) string {
	t.Helper()
	var v any
	err := payloadcodec.NewDataConverter(keys, nil).
		WithSerializationContext(converter.WorkflowSerializationContext{Namespace: "default-test-namespace", WorkflowID: "default-test-workflow-id"}).
		FromPayload(p, &v)
	require.Error(t, err)
	return err.Error()
}

// asParent starts the sub-agent for req as its child under id, as an
// investigation's tool loop does.
func asParent(ctx workflow.Context, id string, req bigquery.Request) (activities.ToolOutput, error) {
	ctx = workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id})
	var out activities.ToolOutput
	err := workflow.ExecuteChildWorkflow(ctx, investigation.BigQueryWorkflowName, req).Get(ctx, &out)
	return out, err
}

// TestSubAgentWritesOnlyForItsParent: a sub-agent writes its answer into
// ParentSession's transcript under ResultKey, first write wins. One started
// on its own, or by another investigation, that names a victim's session and
// a future result key is refused before any activity, so the victim's real
// child never finds a forged answer.
func TestSubAgentWritesOnlyForItsParent(t *testing.T) {
	const victim, key = "investigation-victim", "t1-step_2-i1-c1"
	req := bigquery.Request{Request: "q", ParentSession: victim, ResultKey: key, CallID: "c1"}
	for _, c := range []struct {
		name, parent, id string // parent "": started on its own
		want             string
	}{
		{"on its own", "", "attacker-run", "started on its own"},
		{"on its own, under the child's ID", "", childID(victim, key), "started on its own"},
		{"by another investigation", "investigation-attacker", childID(victim, key), "which is not its parent"},
		{"under another ID", victim, childID(victim, "t1-step_2-i1-c2"), "does not have the workflow ID"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.env.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
			h.env.RegisterWorkflow(asParent)
			ran := false
			for _, act := range []any{bq.RecallMemories, bq.SubAgentTurn, bq.Introspect, bq.UpdateMemories, bq.DeliverAnswer} {
				h.env.OnActivity(act, mock.Anything, mock.Anything).Run(func(mock.Arguments) { ran = true }).Return(nil, errors.New("no")).Maybe()
			}
			if c.parent == "" {
				h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: c.id})
				h.env.ExecuteWorkflow(investigation.BigQueryWorkflowName, req)
			} else {
				h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: c.parent})
				h.env.ExecuteWorkflow(asParent, c.id, req)
			}
			require.True(t, h.env.IsWorkflowCompleted())
			err := h.env.GetWorkflowError()
			require.ErrorContains(t, err, c.want)
			require.False(t, ran, "no activity ran")
		})
	}
}
