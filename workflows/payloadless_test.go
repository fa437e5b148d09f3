package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/payloadcodec"
)

// TestPayloadlessSteeringIsRefused: with a payload key, a steering signal or
// update that carries no payload at all (`temporal workflow signal --name
// stop`, `temporal workflow update execute --name approve`, without the
// codec) could have been sent without the key: it is refused like a plain
// one, a signal noted, an update rejected, and nothing it would steer moves.
func TestPayloadlessSteeringIsRefused(t *testing.T) {
	keys := keyRing(t, "k1")
	h := newHarness(t)
	h.env.SetDataConverter(rawSignals{payloadcodec.NewDataConverter(keys, nil)})
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	none := &commonpb.Payloads{}
	h.signal(10*time.Second, investigation.UpdateApprove, none)
	h.signal(11*time.Second, investigation.UpdateStop, none)
	approveNoArgs := h.update(12*time.Second, investigation.UpdateApprove)
	approveNone := h.update(13*time.Second, investigation.UpdateApprove, none)
	stopNone := h.update(14*time.Second, investigation.UpdateStop, none)
	var during investigation.Status
	h.env.RegisterDelayedCallback(func() { during = h.status(t) }, 20*time.Second)
	approve := h.update(time.Minute, investigation.UpdateApprove, investigation.Approval{})
	_, err := h.run(t, investigation.Input{AlertID: "a1", ApprovePlan: true})
	require.NoError(t, err)

	require.Equal(t, investigation.PhaseAwaitingApproval, during.Phase, "no payloadless input approved or stopped the plan")
	for name, u := range map[string]*updateResult{"approve without arguments": approveNoArgs, "approve with no payload": approveNone, "stop with no payload": stopNone} {
		require.Error(t, u.rejected, name)
		msg, ok := payloadcodec.Explain(u.rejected)
		require.True(t, ok, "%s: %v", name, u.rejected)
		require.Contains(t, msg, "carries no payload", name)
	}
	require.NoError(t, approve.rejected, "an encrypted approve is taken")
	evs := h.events(t)
	got := strings.Join(notes(evs), "\n")
	require.Contains(t, got, "approve signal refused: untrusted Temporal payload: it carries no payload")
	require.Contains(t, got, "stop signal refused: untrusted Temporal payload: it carries no payload")
	require.NotContains(t, kinds(evs), "stop", "no payloadless stop was taken")
	require.Len(t, h.turns, 2, "the plan ran once approved with the key")
}

// TestPayloadlessSteeringWithoutKeys: without a payload key nothing changes:
// a stop signal and an approve update without payloads are taken.
func TestPayloadlessSteeringWithoutKeys(t *testing.T) {
	h := newHarness(t)
	h.env.SetDataConverter(rawSignals{payloadcodec.NewDataConverter(nil, nil)})
	h.onPlan(twoStepPlan(), nil)
	h.onSlowTurn(time.Minute, func(activities.TurnInput) (activities.TurnOutput, error) {
		return activities.TurnOutput{Text: "ok"}, nil
	})
	h.onReflect(noChange)
	approve := h.update(10*time.Second, investigation.UpdateApprove)
	h.signal(30*time.Second, investigation.UpdateStop, &commonpb.Payloads{})
	_, err := h.run(t, investigation.Input{AlertID: "a1", ApprovePlan: true})
	require.NoError(t, err)
	require.NoError(t, approve.rejected)
	require.Contains(t, kinds(h.events(t)), "stop", "the payloadless stop was taken")
	require.Len(t, h.turns, 1, "the stop cut the plan after its first step")
}

// A progress query sent without an argument reads from the start under a
// key file too: it steers nothing (the Web UI's Queries tab sends none).
func TestPayloadlessProgressQueryReads(t *testing.T) {
	keys := keyRing(t, "k1")
	h := newHarness(t)
	h.env.SetDataConverter(rawSignals{payloadcodec.NewDataConverter(keys, nil)})
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	v, err := h.env.QueryWorkflow(investigation.ProgressQuery)
	require.NoError(t, err)
	var evs []investigation.Event
	require.NoError(t, v.Get(&evs))
	require.NotEmpty(t, evs)
}
