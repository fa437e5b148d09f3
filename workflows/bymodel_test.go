package workflows

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// splitPlan is a plan phase that went to two models the default table
// prices: well under a thousandth of a USD, far under a budget of 1.
var splitPlan = investigation.Usage{Calls: 2, PromptTokens: 2000, OutputTokens: 200, Model: investigation.MixedModels,
	ByModel: investigation.ModelSplit{
		{Model: "gemini-2.5-flash", Calls: 1, PromptTokens: 1000, OutputTokens: 100},
		{Model: "gemini-2.5-flash-lite", Calls: 1, PromptTokens: 1000, OutputTokens: 100}}}

// An admission run on the code before the split (0f905b9) receives the
// concluded and closed signals of an investigation on newer code, whose
// plan phase carries the split (by_model). The older code read "(several
// models)", unpriced, and its fail-closed room held the next alert;
// replayed by today's code (the run moved by update-options, or a rolling
// restart) it must hold it again, not price the parts and schedule a
// StartInvestigation the history lacks. The history is
// intake-fails-closed's with its unpriced report turned into a split.
func TestSplitUsageSignalledToAnOlderAdmissionReplays(t *testing.T) {
	raw, err := os.ReadFile("testdata/intake-fails-closed.history.json")
	require.NoError(t, err)
	const recorded = `"plan":{"calls":50,"prompt_tokens":50000000,"output_tokens":5000000,"model":"model-without-a-price"}`
	const split = `"plan":{"calls":2,"prompt_tokens":2000,"output_tokens":200,"model":"(several models)","by_model":[{"model":"gemini-2.5-flash","calls":1,"prompt_tokens":1000,"output_tokens":100},{"model":"gemini-2.5-flash-lite","calls":1,"prompt_tokens":1000,"output_tokens":100}]}`
	edited, n := replacePayloads(t, raw, recorded, split)
	require.Equal(t, 2, n, "the concluded and closed signals")
	hist, err := client.HistoryFromJSON(bytes.NewReader(edited), client.HistoryJSONOptions{})
	require.NoError(t, err)
	started := hist.Events[0].GetWorkflowExecutionStartedEventAttributes()
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{})
	require.NoError(t, err)
	r.RegisterWorkflowWithOptions(Investigation, workflow.RegisterOptions{Name: investigation.WorkflowName})
	r.RegisterWorkflowWithOptions(IntakeAdmission, workflow.RegisterOptions{Name: intake.AdmissionWorkflowName})
	require.NoError(t, r.ReplayWorkflowHistoryWithOptions(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)), hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: started.GetWorkflowId(), RunID: started.GetOriginalExecutionRunId()},
	}))
}

// replacePayloads rewrites every base64 payload of a spend (a concluded or
// closed signal's) holding old so that it holds new instead, and counts them.
func replacePayloads(t *testing.T, raw []byte, old, new string) ([]byte, int) {
	t.Helper()
	data := regexp.MustCompile(`"data":\s*"([A-Za-z0-9+/=]+)"`)
	n := 0
	out := data.ReplaceAllFunc(raw, func(m []byte) []byte {
		dec, err := base64.StdEncoding.DecodeString(string(data.FindSubmatch(m)[1]))
		if err != nil || !strings.Contains(string(dec), old) || !strings.Contains(string(dec), `"spend"`) {
			return m
		}
		n++
		return []byte(`"data": "` + base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(string(dec), old, new))) + `"`)
	})
	return out, n
}

// A room prices a split report's parts only under its gate; before it, the
// phase is its Model label alone, "(several models)", and a fail-closed
// room holds the next start. A report without a split asks nothing.
func TestSplitPricedOnlyUnderTheGate(t *testing.T) {
	spent := func(u investigation.Usage, gated bool) (*Room, int, intake.Outcome) {
		r, s := newRoom(t0), roomSettings(2)
		s.DailyBudgetUSD = 1
		asked := 0
		r.pricesParts = func() bool { asked++; return gated }
		o := r.admit(t0, s, alertOf("a1", "generic:id:1", "high"))
		r.started(o.WorkflowID)
		var sp investigation.Spend
		sp.ByPhase.Plan = u
		r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Spend: sp})
		return r, asked, r.admit(t0.Add(time.Minute), s, alertOf("a2", "generic:id:2", "high"))
	}
	if r, asked, next := spent(splitPlan, true); asked == 0 || next.Kind != intake.OutcomeStarted || r.Spent <= 0 || r.Unpriced != "" {
		t.Errorf("under the gate (asked %d): spent %.4f USD, unpriced %q, next alert %s: %s (want priced, started)", asked, r.Spent, r.Unpriced, next.Kind, next.Message)
	}
	if r, asked, next := spent(splitPlan, false); asked == 0 || next.Kind != intake.OutcomeHeld || r.Unpriced != investigation.MixedModels {
		t.Errorf("before the gate (asked %d): unpriced %q, next alert %s (want held for %q)", asked, r.Unpriced, next.Kind, investigation.MixedModels)
	}
	if _, asked, _ := spent(investigation.Usage{Calls: 1, PromptTokens: 10, Model: "gemini-2.5-flash"}, true); asked != 0 {
		t.Errorf("a report without a split asked the gate %d times: its history would record a marker", asked)
	}
}

// TestRecordUsagePricedByModel records intake-by-model.history.json
// (UPDATE_TESTDATA=1) or <label>-intake-by-model.history.json on a dev
// server with scriptedIntake, two slots and a daily budget of 1 USD: an
// investigation ("id:spender") starts, concludes and closes reporting a
// plan phase split over two priced models (splitPlan), then a new high
// alert arrives ("bm-next"). The twin pre-by-model-intake-by-model was
// recorded with the gate's GetVersion replaced by DefaultVersion (the code
// before the split read such a phase as one of several models). Without
// UPDATE_TESTDATA it does not run.
func TestRecordUsagePricedByModel(t *testing.T) {
	const queue, id = "record-intake-by-model", "fixture-intake-by-model"
	ctx, c, label := recordAdmission(t, queue, id, 2*time.Minute)
	admit := func(a intake.Alert) {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: intake.AdmitUpdate, WaitForStage: client.WorkflowUpdateStageCompleted,
			Args: []any{intake.AdmitRequest{Settings: intake.Settings{MaxRunning: 2, DailyBudgetUSD: 1}, Alerts: []intake.Alert{a}}}})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, nil))
	}
	admit(alertOf("bm-spender", "id:spender", "high"))
	time.Sleep(time.Second)
	spender := intake.WorkflowID("id:spender")
	var sp investigation.Spend
	sp.ByPhase.Plan = splitPlan
	sp.Usage = splitPlan
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.ConcludedSignal, investigation.Concluded{WorkflowID: spender, Spend: sp}))
	require.NoError(t, c.SignalWorkflow(ctx, id, "", investigation.ClosedSignal, investigation.Closed{WorkflowID: spender, Reason: investigation.ClosedCompleted, Spend: sp}))
	time.Sleep(time.Second)
	admit(alertOf("bm-next", "id:next", "high"))
	time.Sleep(2 * time.Second)
	saveFixture(ctx, t, c, id, "", "intake-by-model.history.json", label)
}

// byModelPath checks the paths of intake-by-model.history.json and its
// twin (fixturePaths).
func byModelPath(h *historypb.History, path string) bool {
	o := admitOutcomes(h)
	switch path {
	case "split usage reported, then a new alert":
		return o["bm-spender"].Kind == intake.OutcomeStarted && o["bm-next"].AlertID != ""
	case "split usage priced, the next started":
		return o["bm-next"].Kind == intake.OutcomeStarted
	case "split usage unpriced holds the next":
		return o["bm-next"].Kind == intake.OutcomeHeld
	}
	return false
}
