package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// lostClose is the investigation_closed signal of TestRecordLostNoRepeat,
// spelled out so that the test also builds on code older than
// Closed.Unseen (the twin is recorded there).
type lostClose struct {
	WorkflowID string   `json:"workflow_id"`
	Reason     string   `json:"reason"`
	Unseen     []string `json:"unseen"`
}

// TestRecordLostNoRepeat records intake-lost.history.json
// (UPDATE_TESTDATA=1) or <label>-intake-lost.history.json on a dev server
// with scriptedIntake: one admit request opens an entity and sends it 21
// related alerts (20 queued, the last dropped past maxEntityQueue); its
// investigation starts, then closes completed, naming one related alert
// no model saw (Closed.Unseen); then the dropped, the unseen and a seen
// related alert are sent again. Without UPDATE_TESTDATA it does not run.
func TestRecordLostNoRepeat(t *testing.T) {
	const queue, id = "record-intake-lost", "fixture-intake-lost"
	ctx, c, label := recordAdmission(t, queue, id, 2*time.Minute)
	alerts := []intake.Alert{alertOf("l0", "id:lost", "high", "ip:192.0.2.50")}
	for i := 1; i <= maxEntityQueue+1; i++ {
		alerts = append(alerts, alertOf(fmt.Sprint("l", i), fmt.Sprint("id:lost-", i), "low", "ip:192.0.2.50"))
	}
	admitNow(ctx, t, c, id, alerts...)
	require.Eventually(t, func() bool { return scheduled(historyOf(ctx, t, c, id).Events, "StartInvestigation") == 1 }, time.Minute, 100*time.Millisecond)
	time.Sleep(time.Second)
	closed := lostClose{WorkflowID: intake.WorkflowID("id:lost"), Reason: investigation.ClosedCompleted, Unseen: []string{hashOf("id:lost-2")}}
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.ClosedSignal, closed))
	time.Sleep(2 * time.Second)
	admitNow(ctx, t, c, id, alertOf("m21", "id:lost-21", "low"), alertOf("m2", "id:lost-2", "low"), alertOf("m1", "id:lost-1", "low"))
	time.Sleep(3 * time.Second)
	saveFixture(ctx, t, c, id, "", "intake-lost.history.json", label)
}
