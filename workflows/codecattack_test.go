package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/secops-agent/investigator/activities"
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
