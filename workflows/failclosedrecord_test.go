package workflows

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// TestRecordRoomFailsClosed records intake-fails-closed.history.json
// (UPDATE_TESTDATA=1) or <label>-intake-fails-closed.history.json on a dev
// server with scriptedIntake, two slots and a daily budget: two running
// investigations ("id:spender", "id:attach") and 20 waiting decoys whose
// related alerts fill maxPending; the open one's alert seen again
// critical ("fc-rise"); the other concludes and closes having used a
// model with no price, and a new high alert arrives ("fc-next"); low
// alerts fill the room to maxOpen and a critical one arrives ("fc-crit");
// the first concludes and closes, and its critical alert is sent again
// ("fc-again"). Without UPDATE_TESTDATA it does not run.
func TestRecordRoomFailsClosed(t *testing.T) {
	const queue, id = "record-intake-fails-closed", "fixture-intake-fails-closed"
	ctx, c, label := recordAdmission(t, queue, id, 3*time.Minute)
	admit := func(alerts ...intake.Alert) {
		for len(alerts) > 0 {
			n := min(len(alerts), intake.MaxBatch)
			h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: intake.AdmitUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
				Args: []any{intake.AdmitRequest{Settings: intake.Settings{MaxRunning: 2, DailyBudgetUSD: 1}, Alerts: alerts[:n]}}})
			require.NoError(t, err)
			require.NoError(t, h.Get(ctx, nil))
			alerts = alerts[n:]
		}
	}
	admit(alertOf("fc-spender", "id:spender", "high"), alertOf("fc-first", "id:attach", "low"))
	time.Sleep(2 * time.Second) // attached: its first alert signalled to the open run
	var decoys []intake.Alert
	for d := range maxPending / maxEntityQueue {
		key := fmt.Sprintf("ip:10.0.%d.1", d)
		for i := range maxEntityQueue + 1 {
			decoys = append(decoys, alertOf(fmt.Sprintf("fc-d%d-%d", d, i), fmt.Sprintf("id:decoy-%d-%d", d, i), "low", key))
		}
	}
	admit(decoys...)
	admit(alertOf("fc-rise", "id:attach", "critical"))
	spender := intake.WorkflowID("id:spender")
	sp := investigation.Spend{}
	sp.ByPhase.Plan = investigation.Usage{Calls: 50, PromptTokens: 50_000_000, OutputTokens: 5_000_000, Model: "model-without-a-price"}
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.ConcludedSignal, investigation.Concluded{WorkflowID: spender, Spend: sp}))
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.ClosedSignal, investigation.Closed{WorkflowID: spender, Reason: investigation.ClosedCompleted, Spend: sp}))
	time.Sleep(time.Second)
	admit(alertOf("fc-next", "id:next", "high"))
	var fill []intake.Alert
	for i := range maxOpen - 2 - maxPending/maxEntityQueue {
		fill = append(fill, alertOf(fmt.Sprintf("fc-f%d", i), fmt.Sprintf("id:fill-%d", i), "low"))
	}
	admit(fill...)
	admit(alertOf("fc-crit", "id:crit", "critical"))
	wf := intake.WorkflowID("id:attach")
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.ConcludedSignal, investigation.Concluded{WorkflowID: wf}))
	time.Sleep(time.Second)
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.ClosedSignal, investigation.Closed{WorkflowID: wf, Reason: investigation.ClosedCompleted}))
	time.Sleep(time.Second)
	admit(alertOf("fc-again", "id:attach", "critical"))
	time.Sleep(2 * time.Second)
	saveFixture(ctx, t, c, id, "", "intake-fails-closed.history.json", label)
}

// admitOutcomes reads what the admit updates of a history answered, by
// alert ID.
func admitOutcomes(h *historypb.History) map[string]intake.Outcome {
	out := map[string]intake.Outcome{}
	for _, e := range h.Events {
		p := e.GetWorkflowExecutionUpdateCompletedEventAttributes().GetOutcome().GetSuccess().GetPayloads()
		var res intake.AdmitResult
		if len(p) == 0 || json.Unmarshal(p[0].GetData(), &res) != nil {
			continue
		}
		for _, o := range res.Outcomes {
			out[o.AlertID] = o
		}
	}
	return out
}

// failClosedPath checks the paths of intake-fails-closed.history.json and
// its twin (fixturePaths).
func failClosedPath(h *historypb.History, path string) bool {
	o := admitOutcomes(h)
	switch path {
	case "rise no queue could take":
		return o["fc-rise"].AlertID != "" && o["fc-again"].AlertID != ""
	case "rise shed, then investigated again":
		return o["fc-rise"].Kind == intake.OutcomeShed && o["fc-again"].Kind != intake.OutcomeRepeat && o["fc-again"].Kind != intake.OutcomeShed
	case "unpriced usage, then a new alert":
		return o["fc-next"].AlertID != ""
	case "unpriced usage holds the next":
		return o["fc-next"].Kind == intake.OutcomeHeld
	case "unpriced usage costs nothing":
		return o["fc-next"].Kind != intake.OutcomeHeld
	case "critical alert with the room full":
		return o["fc-crit"].AlertID != ""
	case "critical took a low one's place":
		return o["fc-crit"].Kind != intake.OutcomeShed
	case "critical shed":
		return o["fc-crit"].Kind == intake.OutcomeShed
	case "rise reported delivered, then a repeat":
		return o["fc-rise"].Kind == intake.OutcomeSeenAgain && o["fc-again"].Kind == intake.OutcomeRepeat
	}
	return false
}
