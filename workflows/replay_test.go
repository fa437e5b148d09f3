package workflows

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/payloadcodec"
)

// The recorded histories (the e2e tests write them with UPDATE_TESTDATA=1)
// and the paths of the workflow code each one exercises. Together they
// cover every path a running investigation can be in; a path is checked
// against the history itself, so a re-recording that lost it fails here.
var fixturePaths = map[string][]string{
	"investigation.history.json":  {"plan", "steps", "local tool calls", "retried model call", "reflection", "conclusion", "progress stored"},
	"pipeline.history.json":       {"ref pipeline", "parallel calls", "identical calls"},
	"budget.history.json":         {"budget cut"},
	"bigquery.history.json":       {"child workflow"},
	"bigquery-child.history.json": {"sub-agent", "memories"},
	"steering-run1.history.json":  {"updates", "plan approval", "ask_user", "follow-ups", "continue-as-new"},
	"steering-run2.history.json":  {"continued run", "direct answer", "verdict review", "request in the stored context"},
	"stop.history.json":           {"signal", "stop", "child told to stop", "stopped step answered from what it had"},
	"stop-child.history.json":     {"sub-agent stopped"},
	// A follow-up stopped while its mode was decided; recorded by
	// TestRecordStopDuringModeDecision (record_test.go), not the e2e tests.
	"stop-followup.history.json": {"follow-ups", "stop", "stop during the mode decision", "stopped follow-up concluded without a plan"},
	"cancel.history.json":        {"cancel", "child cancelled"},
	"cancel-child.history.json":  {"sub-agent cancelled"},
	"tool-retry.history.json":    {"tool call retried after a worker died"},
	// Recorded while a threat-intel call was a local activity (before
	// provider queues): the workflow task it held timed out with the worker.
	"local-tool-retry.history.json": {"local tool call retried after a worker died"},
	"parallel.history.json":         {"parallel steps", "child workflow", "reflection"},
	"time-budget.history.json":      {"time-budget timer cut"},
	"lost-transcript.history.json":  {"lost-transcript redo"},
	"ask-timeout.history.json":      {"ask_user timeout"},
	"approval-timeout.history.json": {"plan-approval timeout"},
	"failed-step.history.json":      {"failing step"},
	// The intake (design/intake.md): an investigation it started, and the
	// admission workflow.
	"intake-investigation.history.json": {"arrivals", "verdict delivered", "admission told"},
	"intake-admission.history.json":     {"admit", "investigation started", "arrivals signalled", "conclusions and closes"},
	// Arrivals too late for the run (design/intake.md): one during the
	// conclusion, asked about once idle, one as the run closed, handed
	// back; a delivery that failed after the admission took the close, its
	// alert admitted again.
	"intake-late-arrivals.history.json": {"arrival during the conclusion", "late arrival asked about", "alert signalled while closing", "late alerts handed back"},
	"intake-readmit.history.json":       {"delivery failed after the close", "readmitted after the close"},
	// MCP tools (design/tools.md): the response server's read tool and an
	// approved action; the same with the worker restarted while the action
	// waited and the server's tool list changed after the plan.
	"mcp.history.json":         {"mcp declarations recorded", "action approved", "updates"},
	"mcp-changed.history.json": {"mcp declarations recorded", "action approved", "recorded declarations after the approval"},
	// A sub-agent lent the whole scan budget fails, and the step calls
	// bigquery_agent again; recorded by TestRecordFailedChild
	// (record_test.go), not the e2e tests.
	"failed-child.history.json": {"sub-agent failed, called again", "later sub-agent refused for the scan budget"},
	// The admission-outcomes gate's paths: a failed start tried again, one
	// given up, a start that found its run open; recorded by
	// TestRecordAdmissionOutcomes (record_test.go).
	"intake-outcomes.history.json": {"failed start tried again", "failed start given up", "start on an open run attached"},
	// A seen-again at a higher severity handed back by a closing run is
	// investigated again; recorded by TestRecordLateRise (record_test.go).
	"intake-late-rise.history.json": {"higher severity handed back", "late rise investigated again"},
	// Recorded before GetVersion "late-rise-reinvestigated": the rise is
	// dropped.
	"pre-rise-intake-late-rise.history.json": {"higher severity handed back", "late rise dropped"},
	// A hand-back naming an open entity's workflow ID returns an alert no
	// admit request could carry; recorded by TestRecordRoomGuards.
	"intake-guards.history.json": {"forged hand-back naming an open entity", "hand-back refused and ended nothing"},
	// Recorded before GetVersion "room-guards": the forged alert is
	// admitted and the entity ended.
	"pre-guards-intake-guards.history.json": {"forged hand-back naming an open entity", "hand-back admitted and ended the entity"},
	// An investigation's related alert dropped past the queue bound and
	// one its close reports unseen (Closed.Unseen) are sent again after
	// the close; recorded by TestRecordLostNoRepeat (lostrecord_test.go).
	// Its twin, recorded before GetVersion "lost-no-repeat" (on 5a5ee2f,
	// before Member.Lost), took both for repeats.
	"intake-lost.history.json":          {"dropped and unseen alerts sent again after the close", "dropped and unseen alerts investigated"},
	"pre-lost-intake-lost.history.json": {"dropped and unseen alerts sent again after the close", "dropped and unseen alerts repeats"},
	// The room-fails-closed gate's paths; recorded by
	// TestRecordRoomFailsClosed (failclosedrecord_test.go). Its twin was
	// recorded before the gate.
	"intake-fails-closed.history.json":                  {"rise no queue could take", "rise shed, then investigated again", "unpriced usage, then a new alert", "unpriced usage holds the next", "critical alert with the room full", "critical took a low one's place"},
	"pre-fails-closed-intake-fails-closed.history.json": {"rise no queue could take", "rise reported delivered, then a repeat", "unpriced usage, then a new alert", "unpriced usage costs nothing", "critical alert with the room full", "critical shed"},
	// The usage-priced-by-model gate's paths; recorded by
	// TestRecordUsagePricedByModel (bymodel_test.go). Its twin was recorded
	// with the gate forced to its old branch, as the code before the split
	// (0f905b9) decided: a split phase read as several models, unpriced.
	"intake-by-model.history.json":              {"split usage reported, then a new alert", "split usage priced, the next started"},
	"pre-by-model-intake-by-model.history.json": {"split usage reported, then a new alert", "split usage unpriced holds the next"},

	// Recorded before a direct answer's verdict was reviewed: the twin of
	// steering-run2 for GetVersion "direct-answer-verdict".
	"pre-verdict-steering-run2.history.json": {"continued run", "direct answer"},
	// Recorded before the stored context held the exchange's request: the
	// twin of steering-run2 for GetVersion "request-in-context".
	"pre-request-context-steering-run2.history.json": {"continued run", "direct answer", "verdict review"},
	// Recorded before a stop answered at once (a final model turn, the
	// sub-agent cancelled and answering with one too): the twins of stop
	// and stop-child for GetVersion "stop-answers-at-once" and
	// "sub-agent-cancel-is-cancel".
	"pre-answer-at-once-stop.history.json":       {"signal", "stop", "child cancelled"},
	"pre-answer-at-once-stop-child.history.json": {"sub-agent cut short"},
	// Recorded before a stop skipped planning (the stopped follow-up asked
	// for a plan after the stop): the twin of stop-followup for GetVersion
	// "stop-skips-planning".
	"pre-skip-planning-stop-followup.history.json": {"follow-ups", "stop", "stop during the mode decision", "stopped follow-up planned"},
	// Recorded before GetVersion "late-arrivals" and "readmit-after-close":
	// the same arrivals, none asked about, handed back or admitted again.
	"pre-late-arrivals-intake-late-arrivals.history.json": {"arrival during the conclusion", "alert signalled while closing"},
	"pre-readmit-intake-readmit.history.json":             {"delivery failed after the close"},
	// Recorded before GetVersion "admission-outcomes" (the same scenario:
	// the admission run decides as before the gate).
	"pre-outcomes-intake-readmit.history.json": {"delivery failed after the close", "readmitted after the close"},
	// Recorded before the context and the progress were stored (every
	// input carrying the conversation, hints and plan inline): the twin of
	// investigation for GetVersion "store-context-and-progress".
	"pre-store-investigation.history.json": {"plan", "steps", "local tool calls", "retried model call", "reflection", "conclusion"},
	// Recorded before a failed sub-agent was charged its loan (the next
	// bigquery_agent call was lent the budget again): the twin of
	// failed-child for GetVersion "failed-child-charged".
	"pre-loan-charge-failed-child.history.json": {"sub-agent failed, called again", "later sub-agent started"},
	// A hint signalled after the stop while the conclusion ran, which no
	// model call reads; recorded by TestRecordHintWhileClosing
	// (record_test.go). Its twin, recorded before GetVersion
	// "unread-hint-signal", recorded the hint.
	"hint-while-closing.history.json":                 {"hint signalled while concluding after the stop", "unread hint signal ignored"},
	"pre-unread-hint-hint-while-closing.history.json": {"hint signalled while concluding after the stop"},
	// Recorded by TestRecordPlanGuards; pre-offered-plan-guards is its twin
	// for GetVersion "plan-guards", recorded before it.
	"plan-guards.history.json":             {"step called a tool it was not offered", "follow-up planning failed", "unoffered call refused", "follow-up ended with a note"},
	"pre-offered-plan-guards.history.json": {"step called a tool it was not offered", "follow-up planning failed", "unoffered call ran", "investigation failed"},
	// An alert signalled once the run took the admission's answer to its
	// close (its progress flushed), handed back; recorded by
	// TestRecordHandBackNotes (record_test.go). Its twin, recorded before
	// GetVersion "hand-back-noted", wrote no progress after the hand-back.
	"intake-hand-back-notes.history.json":           {"alert signalled after the close was told", "late alerts handed back", "hand-back noted"},
	"pre-noted-intake-hand-back-notes.history.json": {"alert signalled after the close was told", "late alerts handed back", "hand-back not noted"},
	// A sub-agent stopped while it introspected; recorded by
	// TestRecordStopDuringIntrospection (record_test.go). Its twin,
	// recorded before GetVersion "stop-skips-learning", saved memories
	// after the stop.
	"stop-learning-child.history.json":           {"sub-agent stopped during introspection", "learning not saved after the stop"},
	"pre-learn-stop-learning-child.history.json": {"sub-agent stopped during introspection", "memories saved after the stop"},
	// A sub-agent whose only model turn answered after its deadline;
	// recorded by TestRecordTurnPastDeadline (record_test.go). Its twin,
	// recorded before GetVersion "deadline-skips-learning", learned before
	// it delivered the answer.
	"late-turn-child.history.json":              {"sub-agent turn answered past its deadline", "nothing learned past the deadline"},
	"pre-deadline-late-turn-child.history.json": {"sub-agent turn answered past its deadline", "learned past the deadline"},
	// An intake investigation whose planned follow-up concludes the verdict
	// Slack already received, and whose direct answer leaves the verdict
	// the results topic failed to take twice; recorded by
	// TestRecordDeliveries (record_test.go). Its twin, recorded before
	// GetVersion "deliver-when-changed", sent Slack the same verdict again
	// and the topic nothing after the answer.
	"intake-deliveries.history.json":             {"unchanged verdict concluded after it was delivered", "delivery failed, then a direct answer left the verdict", "unchanged verdict not sent again", "failed delivery sent again after a direct answer"},
	"pre-changed-intake-deliveries.history.json": {"unchanged verdict concluded after it was delivered", "delivery failed, then a direct answer left the verdict", "unchanged verdict sent again", "nothing sent after a direct answer"},
	// Keyed (testdata/fixture-payload-keys.txt): an approve update and a
	// stop signal without any payload, then an encrypted stop update;
	// recorded by TestRecordPayloadlessSteering (keyedrecord_test.go). Its
	// twin, recorded before GetVersion "payloadless-refused", took both.
	"keyed-payloadless.history.json":                 {"payloadless stop signalled", "payloadless input refused"},
	"pre-payloadless-keyed-payloadless.history.json": {"payloadless stop signalled", "payloadless approve taken", "payloadless stop taken"},
	// A step's get_alert call returns an error result and the
	// investigation goes on, its context for the step's reflection sized
	// just under inlineContext without the call as evidence, just over it
	// with; recorded by TestRecordFailedLookup (record_test.go). Its twin,
	// recorded before GetVersion "results-are-evidence" (which counted the
	// call), stored that context.
	"failed-lookup.history.json":              {"error result, investigation went on", "failed call no evidence"},
	"pre-evidence-failed-lookup.history.json": {"error result, investigation went on", "failed call counted as evidence"},
	// action-outcomes: an approved block_ip the server refused, then one
	// approved by a signal in the workflow task that took a stop signal;
	// recorded by TestRecordActionOutcomes (record_test.go). Its twin,
	// recorded before GetVersion "action-outcomes", reported the refused
	// action approved and started the other after the stop
	// (actionOutcomePaths, actionoutcome_test.go).
	"action-outcomes.history.json":             {"approved action refused by the server", "approval signalled with the stop", "refused action not run", "no action after the stop"},
	"pre-outcome-action-outcomes.history.json": {"approved action refused by the server", "approval signalled with the stop", "refused action reported approved", "action started after the stop"},
	// end action-outcomes
	// An idle run (MaxHistoryEvents 50: an idle bound of 25 updates) takes
	// 25 hints and no question; recorded by TestRecordIdleUpdateBound
	// (updatebound_test.go). Its twin, recorded before GetVersion
	// "idle-update-bound", kept waiting until a stop closed it.
	"idle-updates.history.json":                {"hints at idle up to the update bound", "idle run continued as new for its updates"},
	"pre-idle-bound-idle-updates.history.json": {"hints at idle up to the update bound", "idle run kept waiting past the update bound"},
	// insights-and-duplicates: step_1's reflection writes a 3 KiB insight,
	// a follow-up continues the plan with two steps dropped as duplicates
	// that a later step depends on; recorded by
	// TestRecordInsightsAndDuplicates (record_test.go). Its twin, recorded
	// before GetVersion "insights-and-duplicates", kept the insight whole
	// and started the later step at once.
	"insights-duplicates.history.json":            {"reflection wrote an oversized insight", "follow-up step depends on dropped duplicates", "insight clipped, dependency on the step repeated"},
	"pre-bounds-insights-duplicates.history.json": {"reflection wrote an oversized insight", "follow-up step depends on dropped duplicates", "insight kept whole, dependency dropped"},
	// end insights-and-duplicates
	// bounded-signal-notes: an idle run takes 13 hint signals whose
	// payload is a number, each in a workflow task of its own; recorded by
	// TestRecordSignalNotes (record_test.go). Its twin, recorded before
	// GetVersion "bounded-signal-notes", noted each one.
	"signal-notes.history.json":             {"unreadable signals flooded while idle", "signal notes bounded"},
	"pre-bounded-signal-notes.history.json": {"unreadable signals flooded while idle", "every unreadable signal noted"},
	// end bounded-signal-notes
	// closed-stop-signal: a stop signalled once the run's idle wait ended
	// and it waits for its last progress write (closing); recorded by
	// TestRecordStopSignalWhileClosing (record_test.go). Its twin,
	// recorded before GetVersion "closed-stop-signal", applied the stop
	// (its reason in the status: one more progress write).
	"stop-signal-while-closing.history.json":                 {"stop signalled while closing", "closing stop signal ignored"},
	"pre-closed-stop-stop-signal-while-closing.history.json": {"stop signalled while closing", "closing stop signal applied"},
	// end closed-stop-signal
}

// TestReplayRecordedHistories replays every recorded history against the
// current workflow code: a change that breaks determinism fails here.
// Before the first release there are no GetVersion gates: fixtures are
// re-recorded when the workflow changes. After it, a change to running
// workflows is either shipped as a new Worker Deployment Version (pinned
// investigations upgrade at continue-as-new) or guarded with GetVersion and
// a fixture recorded before it (see TestVersionGatesHaveFixtures and
// design/versioning.md). Each history replays under its original workflow
// ID, because child workflow IDs derive from it.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.history.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in testdata")
	for name := range fixturePaths {
		require.FileExists(t, filepath.Join("testdata", name), "a recorded path has no fixture")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			paths, named := fixturePaths[filepath.Base(f)]
			require.True(t, named, "every fixture names the paths it exercises in `fixturePaths`")
			hist := readHistory(t, f)
			for _, p := range paths {
				require.True(t, exercises(hist, p), "the fixture no longer exercises %q", p)
			}
			started := hist.Events[0].GetWorkflowExecutionStartedEventAttributes()
			require.NotNil(t, started)
			var opts worker.WorkflowReplayerOptions
			if strings.HasPrefix(filepath.Base(f), "keyed-") || strings.Contains(filepath.Base(f), "-keyed-") {
				// Recorded by a worker with the fixture key, as a keyed worker replays.
				dc := payloadcodec.NewDataConverter(fixtureKeys(t), nil)
				opts.DataConverter, opts.FailureConverter = inDefault{dc}, payloadcodec.NewFailureConverter(dc, true)
			}
			r, err := worker.NewWorkflowReplayerWithOptions(opts)
			require.NoError(t, err)
			r.RegisterWorkflowWithOptions(Investigation, workflow.RegisterOptions{Name: investigation.WorkflowName})
			r.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
			r.RegisterWorkflowWithOptions(IntakeAdmission, workflow.RegisterOptions{Name: intake.AdmissionWorkflowName})
			logger := tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
			require.NoError(t, r.ReplayWorkflowHistoryWithOptions(logger, hist, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: started.GetWorkflowId(), RunID: started.GetOriginalExecutionRunId()},
			}))
		})
	}
}

// inDefault is a keyed data converter for the replayer, which names every
// history's namespace "ReplayNamespace": it checks payloads' binding as the
// recording worker did, in "default".
type inDefault struct{ converter.DataConverter }

func (d inDefault) WithSerializationContext(sc converter.SerializationContext) converter.DataConverter {
	switch c := sc.(type) {
	case converter.WorkflowSerializationContext:
		if c.Namespace == replayNamespace {
			c.Namespace = "default"
		}
		sc = c
	case converter.ActivitySerializationContext:
		if c.Namespace == replayNamespace {
			c.Namespace = "default"
		}
		sc = c
	}
	return inDefault{converter.WithDataConverterSerializationContext(d.DataConverter, sc)}
}

func (d inDefault) WithWorkflowContext(ctx converter.WorkflowContext) converter.DataConverter {
	return inDefault{d.DataConverter.(converter.ContextAware).WithWorkflowContext(ctx)}
}

func (d inDefault) WithContext(ctx context.Context) converter.DataConverter {
	return inDefault{d.DataConverter.(converter.ContextAware).WithContext(ctx)}
}

// replayNamespace is the namespace the replayer gives every history.
const replayNamespace = "ReplayNamespace"

func readHistory(t *testing.T, path string) *historypb.History {
	t.Helper()
	file, err := os.Open(path)
	require.NoError(t, err)
	defer file.Close()
	hist, err := client.HistoryFromJSON(file, client.HistoryJSONOptions{})
	require.NoError(t, err)
	return hist
}

// exercises says whether a history shows the named path.
func exercises(h *historypb.History, path string) bool {
	count := func(pred func(e *historypb.HistoryEvent) bool) int {
		n := 0
		for _, e := range h.Events {
			if pred(e) {
				n++
			}
		}
		return n
	}
	activity := func(name string) int {
		return count(func(e *historypb.HistoryEvent) bool {
			return e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == name
		})
	}
	input := func(activityName, substr string) bool {
		return count(func(e *historypb.HistoryEvent) bool {
			a := e.GetActivityTaskScheduledEventAttributes()
			if a.GetActivityType().GetName() != activityName {
				return false
			}
			for _, p := range a.GetInput().GetPayloads() {
				if bytes.Contains(p.GetData(), []byte(substr)) {
					return true
				}
			}
			return false
		}) > 0
	}
	// local counts the local activities of a type; localSummary says
	// whether one's summary holds substr.
	localMarker := func(e *historypb.HistoryEvent) (string, string) {
		m := e.GetMarkerRecordedEventAttributes()
		if m.GetMarkerName() != "LocalActivity" || len(m.GetDetails()["data"].GetPayloads()) == 0 {
			return "", ""
		}
		var data struct{ ActivityType string }
		_ = json.Unmarshal(m.GetDetails()["data"].GetPayloads()[0].GetData(), &data)
		return data.ActivityType, string(e.GetUserMetadata().GetSummary().GetData())
	}
	local := func(name string) int {
		return count(func(e *historypb.HistoryEvent) bool { t, _ := localMarker(e); return t == name })
	}
	localSummary := func(name, substr string) bool {
		return count(func(e *historypb.HistoryEvent) bool {
			t, s := localMarker(e)
			return t == name && strings.Contains(s, substr)
		}) > 0
	}
	typ := func(t enumspb.EventType) int {
		return count(func(e *historypb.HistoryEvent) bool { return e.GetEventType() == t })
	}
	switch path {
	case "plan":
		return activity("GeneratePlan") > 0
	case "steps":
		return activity("ModelTurn") > 1 && activity("CallTool")+local("CallTool") > 0
	case "local tool calls":
		return local("CallTool") > 0
	case "progress stored":
		return local("StoreProgress") > 0
	case "local tool call retried after a worker died":
		return typ(enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT) > 0 && local("CallTool") > 0
	case "tool call retried after a worker died":
		// A regular activity: its attempt the kill cut is retried, and no
		// workflow task was held (and lost) by the call.
		return typ(enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT) == 0 && count(func(e *historypb.HistoryEvent) bool {
			return e.GetActivityTaskStartedEventAttributes().GetAttempt() > 1
		}) > 0 && activity("CallTool") > 0
	case "retried model call":
		return count(func(e *historypb.HistoryEvent) bool {
			return e.GetActivityTaskStartedEventAttributes().GetAttempt() > 1
		}) > 0
	case "reflection":
		return activity("Reflect") > 0
	case "conclusion":
		return activity("Conclude") > 0
	case "ref pipeline":
		return input("CallTool", `"refs":`) || localSummary("CallTool", "ref:")
	case "identical calls":
		return reusedCall(h)
	case "budget cut":
		// Histories recorded before the wording said "the run used its".
		return (input("Conclude", `"ended_early":"this exchange used its`) || input("Conclude", `"ended_early":"the run used its`)) && activity("Reflect") == 0
	case "parallel calls":
		return activity("CallTool")+local("CallTool") > 1
	case "parallel steps":
		return parallelSteps(h)
	case "child workflow":
		return typ(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED) > 0 && typ(enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED) > 0
	case "sub-agent":
		return activity("SubAgentTurn") > 0 && activity("DeliverAnswer") > 0
	case "memories":
		return activity("RecallMemories") > 0 && activity("Introspect") > 0
	case "updates":
		return typ(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED) > 0
	case "plan approval":
		return activity("GeneratePlan") > 1 // planned, revised
	case "ask_user":
		return input("ModelTurn", `"inline":`)
	case "follow-ups":
		return activity("DecideMode") > 0
	case "continue-as-new":
		return typ(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW) > 0
	case "continued run":
		return h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() != ""
	case "direct answer":
		return input("ModelTurn", `"direct":true`)
	case "verdict review":
		return activity("ReviewVerdict") > 0
	case "request in the stored context":
		// A mode decision, a direct answer and its review name the context,
		// which holds the question, and carry no copy of it.
		for name, with := range map[string]string{"DecideMode": `"context":`, "ModelTurn": `"direct":true`, "ReviewVerdict": `"context":`} {
			if count(func(e *historypb.HistoryEvent) bool {
				a := e.GetActivityTaskScheduledEventAttributes()
				in := a.GetInput().GetPayloads()
				return a.GetActivityType().GetName() == name && len(in) > 0 && bytes.Contains(in[0].GetData(), []byte(with)) &&
					bytes.Contains(in[0].GetData(), []byte(`"context":`)) && !bytes.Contains(in[0].GetData(), []byte(`"question":`))
			}) == 0 {
				return false
			}
		}
		return true
	case "signal":
		return typ(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED) > 0
	case "payloadless stop signalled":
		return count(func(e *historypb.HistoryEvent) bool {
			s := e.GetWorkflowExecutionSignaledEventAttributes()
			return s.GetSignalName() == investigation.UpdateStop && len(s.GetInput().GetPayloads()) == 0
		}) > 0
	case "payloadless approve taken":
		return count(func(e *historypb.HistoryEvent) bool {
			in := e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput()
			return in.GetName() == investigation.UpdateApprove && len(in.GetArgs().GetPayloads()) == 0
		}) > 0
	case "payloadless stop taken", "payloadless input refused":
		// Taken, the investigation concludes without the encrypted stop
		// update; refused, that update is what stops it.
		stopUpdates := count(func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == investigation.UpdateStop
		})
		approves := count(func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == investigation.UpdateApprove
		})
		if path == "payloadless stop taken" {
			return stopUpdates == 0 && activity("Conclude") > 0
		}
		return stopUpdates == 1 && approves == 0 && activity("ModelTurn") == 0
	case "stop":
		return input("Conclude", `stopped by the analyst`)
	case "stop during the mode decision":
		return stopDuringModeDecision(h)
	case "stopped follow-up planned":
		return scheduled(after(h, stopAccepted), "GeneratePlan") > 0
	case "stopped follow-up concluded without a plan":
		rest := after(h, stopAccepted)
		return scheduled(rest, "GeneratePlan") == 0 && scheduled(rest, "ModelTurn") == 0 && scheduled(rest, "Conclude") == 1
	case "child cancelled":
		return typ(enumspb.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED) > 0
	case "arrivals":
		return count(func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.AlertsUpdate
		}) > 0
	case "verdict delivered":
		return activity("PublishResult") > 0
	case "admission told":
		return signalled(h, investigation.ConcludedSignal) && signalled(h, investigation.ClosedSignal)
	case "admit":
		return typ(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED) > 0
	case "investigation started":
		return activity("StartInvestigation") > 0
	case "arrivals signalled":
		return signalled(h, investigation.AlertsUpdate)
	case "conclusions and closes":
		return count(func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.ConcludedSignal
		}) > 0 && count(func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.ClosedSignal
		}) > 0
	case "arrival during the conclusion":
		// An alert no model call saw: it came while the conclusion ran.
		open := map[int64]bool{}
		for _, e := range h.Events {
			if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "Conclude" {
				open[e.GetEventId()] = true
			}
			delete(open, e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId())
			if len(open) > 0 && e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.AlertsUpdate {
				return true
			}
		}
		return false
	case "late arrival asked about":
		// A follow-up that no analyst asked: the arrival's.
		return activity("DecideMode") > 0 && count(func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == investigation.UpdateAsk
		}) == 0
	case "alert signalled while closing":
		closing := after(h, func(e *historypb.HistoryEvent) bool {
			return e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName() == investigation.ClosedSignal
		})
		for _, e := range closing {
			if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.AlertsUpdate {
				return true
			}
		}
		return false
	case "late alerts handed back":
		return count(handBackSignal) > 0
	case "alert signalled after the close was told":
		return afterCloseTold(h) != nil
	case "hand-back noted", "hand-back not noted":
		// Progress written after the last hand-back (its note).
		var rest []*historypb.HistoryEvent
		for i, e := range h.Events {
			if handBackSignal(e) {
				rest = h.Events[i+1:]
			}
		}
		written := slices.ContainsFunc(rest, func(e *historypb.HistoryEvent) bool { t, _ := localMarker(e); return t == "StoreProgress" })
		return afterCloseTold(h) != nil && written == (path == "hand-back noted")
	case "delivery failed after the close":
		return failedAfterClose(h) != nil
	case "readmitted after the close":
		return scheduled(failedAfterClose(h), "StartInvestigation") > 0
	case "failed start tried again", "failed start given up", "start on an open run attached":
		return startOutcomes(h, path)
	case "higher severity handed back":
		return lateRise(h) != nil
	case "late rise investigated again":
		return scheduled(lateRise(h), "StartInvestigation") == 1 && startInput(lateRise(h), `"reinvestigate":true`)
	case "forged hand-back naming an open entity":
		return forgedHandBack(h) != nil
	case "hand-back refused and ended nothing":
		rest := forgedHandBack(h)
		return rest != nil && scheduled(rest, "StartInvestigation") == 0 && signalledTo(rest, intake.WorkflowID("id:guard"))
	case "hand-back admitted and ended the entity":
		rest := forgedHandBack(h)
		return rest != nil && scheduled(rest, "StartInvestigation") == 1 && !signalledTo(rest, intake.WorkflowID("id:guard"))
	case "rise no queue could take", "rise shed, then investigated again", "rise reported delivered, then a repeat",
		"unpriced usage, then a new alert", "unpriced usage holds the next", "unpriced usage costs nothing",
		"critical alert with the room full", "critical took a low one's place", "critical shed":
		return failClosedPath(h, path) // failclosedrecord_test.go
	case "split usage reported, then a new alert", "split usage priced, the next started", "split usage unpriced holds the next":
		return byModelPath(h, path) // bymodel_test.go
	case "dropped and unseen alerts sent again after the close":
		return lostClosed(h) != nil
	case "dropped and unseen alerts investigated":
		return scheduled(lostClosed(h), "StartInvestigation") == 2
	case "dropped and unseen alerts repeats":
		return scheduled(lostClosed(h), "StartInvestigation") == 0
	case "late rise dropped":
		rest := lateRise(h)
		return rest != nil && scheduled(rest, "StartInvestigation") == 0
	case "sub-agent cut short":
		return typ(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED) > 0 && activity("DeliverAnswer") > 0
	case "child told to stop":
		return count(func(e *historypb.HistoryEvent) bool {
			return e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName() == investigation.UpdateStop
		}) > 0 && typ(enumspb.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED) == 0
	case "stopped step answered from what it had":
		return activity("CutAnswer") > 0 && !input("ModelTurn", `"final":true`)
	case "sub-agent stopped":
		after := after(h, func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.UpdateStop
		})
		return after != nil && scheduled(after, "SubAgentTurn") == 0 && scheduled(after, "CutAnswer") == 1 && scheduled(after, "DeliverAnswer") == 1
	case "sub-agent stopped during introspection", "learning not saved after the stop", "memories saved after the stop":
		// The stop signal arrived while Introspect was open, and the
		// answer was delivered after it (with UpdateMemories or not).
		var open bool
		var rest []*historypb.HistoryEvent
		for i, e := range h.Events {
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
				open = a.GetActivityType().GetName() == "Introspect"
			}
			if e.GetActivityTaskCompletedEventAttributes() != nil {
				open = false
			}
			if open && e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.UpdateStop {
				rest = h.Events[i+1:]
				break
			}
		}
		if rest == nil || scheduled(rest, "DeliverAnswer") != 1 {
			return false
		}
		switch path {
		case "learning not saved after the stop":
			return scheduled(rest, "UpdateMemories") == 0
		case "memories saved after the stop":
			return scheduled(rest, "UpdateMemories") == 1
		}
		return true
	case "sub-agent turn answered past its deadline", "nothing learned past the deadline", "learned past the deadline":
		// The request's deadline came before its SubAgentTurn completed,
		// and the answer was delivered after it (with learning or not).
		var req struct {
			Deadline time.Time `json:"deadline"`
		}
		in := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
		if len(in) == 0 || json.Unmarshal(in[0].GetData(), &req) != nil || req.Deadline.IsZero() {
			return false
		}
		rest := after(h, func(e *historypb.HistoryEvent) bool {
			done := e.GetActivityTaskCompletedEventAttributes()
			return done != nil && e.GetEventTime().AsTime().After(req.Deadline) &&
				scheduled(h.Events[done.GetScheduledEventId()-1:done.GetScheduledEventId()], "SubAgentTurn") == 1
		})
		if rest == nil || scheduled(rest, "DeliverAnswer") != 1 || scheduled(rest, "SubAgentTurn") != 0 {
			return false
		}
		switch path {
		case "nothing learned past the deadline":
			return scheduled(rest, "Introspect") == 0 && scheduled(rest, "UpdateMemories") == 0
		case "learned past the deadline":
			return scheduled(rest, "Introspect") == 1 && scheduled(rest, "UpdateMemories") == 1
		}
		return true
	case "cancel":
		after := after(h, func(e *historypb.HistoryEvent) bool {
			return e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
		})
		return after != nil && len(scheduledAny(after)) == 0 && lastType(h) == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
	case "sub-agent cancelled":
		after := after(h, func(e *historypb.HistoryEvent) bool {
			return e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
		})
		return after != nil && len(scheduledAny(after)) == 0 && activity("DeliverAnswer") == 0 && lastType(h) == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
	case "time-budget timer cut":
		return firedTimer(h, "time budget of ") && input("Conclude", `"ended_early":"this exchange used its time budget of`)
	case "lost-transcript redo":
		return count(func(e *historypb.HistoryEvent) bool {
			return e.GetActivityTaskFailedEventAttributes().GetFailure().GetApplicationFailureInfo().GetType() == activities.ErrTranscriptMissing
		}) > 0 && input("ModelTurn", `-r1-i1"`)
	case "ask_user timeout":
		return firedTimer(h, "waiting for the answer to ") && input("ModelTurn", `did not answer within`)
	case "plan-approval timeout":
		return firedTimer(h, "waiting for the plan's approval") && input("Conclude", `the plan was not approved within`) && activity("ModelTurn") == 0
	case "mcp declarations recorded":
		return input("ModelTurn", `"declared":[`)
	case "action approved":
		return count(func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == investigation.UpdateApproveCall
		}) > 0 && input("CallTool", `.block_ip"`)
	case "recorded declarations after the approval":
		// The worker that took the approval had another tool list (the
		// e2e test changes it); history shows that the turn after it still
		// declares what the plan recorded.
		approved := after(h, func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == investigation.UpdateApproveCall
		})
		for _, e := range approved {
			a := e.GetActivityTaskScheduledEventAttributes()
			if a.GetActivityType().GetName() == "ModelTurn" && bytes.Contains(a.GetInput().GetPayloads()[0].GetData(), []byte(`"declared":[`)) {
				return true
			}
		}
		return false
	case "sub-agent failed, called again":
		rest := afterFailedChild(h)
		return count(func(e *historypb.HistoryEvent) bool {
			return e.GetActivityTaskCompletedEventAttributes() != nil && slices.Contains(rest, e) &&
				len(e.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()) > 0 &&
				bytes.Contains(e.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()[0].GetData(), []byte(`"name":"bigquery_agent"`))
		}) > 0
	case "later sub-agent started":
		for _, e := range afterFailedChild(h) {
			if e.GetEventType() == enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED {
				return true
			}
		}
		return false
	case "later sub-agent refused for the scan budget":
		rest := afterFailedChild(h)
		for _, e := range rest {
			if e.GetEventType() == enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED {
				return false
			}
		}
		for _, e := range rest {
			if a := e.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "ModelTurn" &&
				bytes.Contains(a.GetInput().GetPayloads()[0].GetData(), []byte(`"tool":"bigquery_agent","error":"the call did not run: the investigation's BigQuery scan budget`)) {
				return true
			}
		}
		return false
	case "step called a tool it was not offered":
		return count(func(e *historypb.HistoryEvent) bool {
			r := e.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()
			return len(r) > 0 && bytes.Contains(r[0].GetData(), []byte(`"name":"search_alerts"`))
		}) > 0
	case "follow-up planning failed":
		return activity("GeneratePlan") == 2 && typ(enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED) == 1
	case "unoffered call refused":
		return activity("CallTool") == 0 && hasVersionMarker(h, "plan-guards")
	case "unoffered call ran":
		return activity("CallTool") == 1 && !hasVersionMarker(h, "plan-guards")
	case "follow-up ended with a note":
		return typ(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED) == 1 && activity("Conclude") == 1
	case "investigation failed":
		return typ(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED) == 1
	case "hint signalled while concluding after the stop":
		return hintWhileConcluding(h) != nil
	case "unread hint signal ignored":
		for _, e := range hintWhileConcluding(h) {
			if m := e.GetMarkerRecordedEventAttributes(); m.GetMarkerName() == "Version" && len(m.GetDetails()["change-id"].GetPayloads()) > 0 &&
				string(m.GetDetails()["change-id"].GetPayloads()[0].GetData()) == `"unread-hint-signal"` {
				return true
			}
		}
		return false
	case "unchanged verdict concluded after it was delivered":
		// Both conclusions say the same (the scripted Conclude), and Slack
		// took the first before the second.
		second := afterNth(h, 2, "Conclude")
		first := h.Events[:len(h.Events)-len(second)]
		return second != nil && scheduled(first, "DeliverSlack") == 1 && count(func(e *historypb.HistoryEvent) bool {
			return completedActivity(h, e) == "DeliverSlack"
		}) > 0
	case "unchanged verdict not sent again":
		return scheduled(afterNth(h, 2, "Conclude"), "DeliverSlack") == 0 && activity("DeliverSlack") == 1 && hasVersionMarker(h, "deliver-when-changed")
	case "unchanged verdict sent again":
		return scheduled(afterNth(h, 2, "Conclude"), "DeliverSlack") == 1 && !hasVersionMarker(h, "deliver-when-changed")
	case "delivery failed, then a direct answer left the verdict":
		review := afterNth(h, 1, "ReviewVerdict")
		before := h.Events[:len(h.Events)-len(review)]
		failed := slices.ContainsFunc(before, func(e *historypb.HistoryEvent) bool {
			f := e.GetActivityTaskFailedEventAttributes()
			return f != nil && scheduled(h.Events[f.GetScheduledEventId()-1:f.GetScheduledEventId()], "PublishResult") == 1
		})
		// The review's result carries no verdict: the standing one stays.
		return review != nil && failed && !slices.ContainsFunc(review, func(e *historypb.HistoryEvent) bool {
			out := e.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()
			return completedActivity(h, e) == "ReviewVerdict" && len(out) > 0 && bytes.Contains(out[0].GetData(), []byte(`"verdict":{`))
		})
	case "failed delivery sent again after a direct answer":
		return scheduled(afterNth(h, 1, "ReviewVerdict"), "PublishResult") == 1 && hasVersionMarker(h, "deliver-when-changed")
	case "nothing sent after a direct answer":
		rest := afterNth(h, 1, "ReviewVerdict")
		return rest != nil && scheduled(rest, "PublishResult")+scheduled(rest, "DeliverSlack") == 0
	case "error result, investigation went on":
		// A CallTool returned an error result, then the second step ran.
		failed := after(h, func(e *historypb.HistoryEvent) bool {
			out := e.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()
			return completedActivity(h, e) == "CallTool" && len(out) > 0 && bytes.Contains(out[0].GetData(), []byte(`"ok":false`))
		})
		return slices.ContainsFunc(failed, func(e *historypb.HistoryEvent) bool {
			a := e.GetActivityTaskScheduledEventAttributes()
			return a.GetActivityType().GetName() == "ModelTurn" && bytes.Contains(a.GetInput().GetPayloads()[0].GetData(), []byte(`"id":"step_2"`))
		})
	case "failed call no evidence", "failed call counted as evidence":
		// The context of the first reflection is stored only when the
		// failed call counts as the step's evidence (failedLookup).
		reflect := afterNth(h, 1, "Reflect")
		stored := slices.ContainsFunc(h.Events[:len(h.Events)-len(reflect)], func(e *historypb.HistoryEvent) bool { t, _ := localMarker(e); return t == "StoreContext" })
		if path == "failed call no evidence" {
			return reflect != nil && !stored && hasVersionMarker(h, "results-are-evidence")
		}
		return reflect != nil && stored && !hasVersionMarker(h, "results-are-evidence")
	case "hints at idle up to the update bound":
		// 25 accepted hints after the conclusion, and no question.
		concluded := afterNth(h, 1, "Conclude")
		return concluded != nil && activity("DecideMode") == 0 && count(func(e *historypb.HistoryEvent) bool {
			return e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == "hint"
		}) >= 25
	case "idle run continued as new for its updates":
		return typ(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW) == 1 && hasVersionMarker(h, "idle-update-bound")
	// insights-and-duplicates
	case "reflection wrote an oversized insight":
		return count(func(e *historypb.HistoryEvent) bool {
			r := e.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()
			return len(r) > 0 && bytes.Contains(r[0].GetData(), []byte(oversizedInsight))
		}) == 1
	case "follow-up step depends on dropped duplicates":
		return count(func(e *historypb.HistoryEvent) bool {
			r := e.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()
			return len(r) > 0 && bytes.Contains(r[0].GetData(), []byte(`"depends_on":["step_3","step_5"]`))
		}) == 1
	case "insight clipped, dependency on the step repeated":
		waited, ok := summaryWaited(h)
		return ok && waited && hasVersionMarker(h, "insights-and-duplicates")
	case "insight kept whole, dependency dropped":
		waited, ok := summaryWaited(h)
		return ok && !waited && !hasVersionMarker(h, "insights-and-duplicates")
	// end insights-and-duplicates
	// bounded-signal-notes
	case "unreadable signals flooded while idle":
		_, ok := floodWrites(h, localMarker)
		return ok && activity("DecideMode") == 0
	case "signal notes bounded":
		writes, ok := floodWrites(h, localMarker)
		return ok && writes == 0 && hasVersionMarker(h, "bounded-signal-notes")
	case "every unreadable signal noted":
		writes, ok := floodWrites(h, localMarker)
		return ok && writes == 2 && !hasVersionMarker(h, "bounded-signal-notes")
	// end bounded-signal-notes
	// closed-stop-signal
	case "stop signalled while closing":
		return stopWhileClosing(h) != nil
	case "closing stop signal ignored", "closing stop signal applied":
		writes := 0
		for _, e := range stopWhileClosing(h) {
			if t, _ := localMarker(e); t == "StoreProgress" {
				writes++
			}
		}
		if path == "closing stop signal ignored" {
			return writes == 1 && hasVersionMarker(h, "closed-stop-signal")
		}
		return writes == 2 && !hasVersionMarker(h, "closed-stop-signal")
	// end closed-stop-signal
	case "idle run kept waiting past the update bound":
		return typ(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED) == 1 && !hasVersionMarker(h, "idle-update-bound")
	case "failing step":
		return count(func(e *historypb.HistoryEvent) bool {
			return e.GetActivityTaskFailedEventAttributes() != nil
		}) > 0 && strings.HasPrefix(h.Events[len(h.Events)-1].GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage(), "step_1 failed: ")
	}
	// action-outcomes (actionoutcome_test.go)
	if ok, known := actionOutcomePaths(h, path); known {
		return ok
	}
	panic("unknown path " + path)
}

// stopAccepted matches the acceptance of a stop update.
func stopAccepted(e *historypb.HistoryEvent) bool {
	return e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == investigation.UpdateStop
}

// stopDuringModeDecision says whether a stop update was accepted while a
// DecideMode activity was open (scheduled, not yet closed).
func stopDuringModeDecision(h *historypb.History) bool {
	open := map[int64]bool{}
	for _, e := range h.Events {
		if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "DecideMode" {
			open[e.GetEventId()] = true
		}
		if stopAccepted(e) && len(open) > 0 {
			return true
		}
		delete(open, e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId())
	}
	return false
}

// failedAfterClose returns the events after an alerts signal of the
// admission workflow failed, sent before it received an investigation's
// close and failed after it; nil if none did.
func failedAfterClose(h *historypb.History) []*historypb.HistoryEvent {
	sent := map[int64]bool{} // alerts signals initiated before a close was received
	closed := false
	for i, e := range h.Events {
		if a := e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes(); a.GetSignalName() == investigation.AlertsUpdate && !closed {
			sent[e.GetEventId()] = true
		}
		if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.ClosedSignal {
			closed = closed || len(sent) > 0
		}
		if f := e.GetSignalExternalWorkflowExecutionFailedEventAttributes(); f != nil && closed && sent[f.GetInitiatedEventId()] {
			return h.Events[i+1:]
		}
	}
	return nil
}

// afterFailedChild returns the events after the first child workflow that
// failed, or nil.
func afterFailedChild(h *historypb.History) []*historypb.HistoryEvent {
	return after(h, func(e *historypb.HistoryEvent) bool {
		return e.GetEventType() == enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED
	})
}

// after returns the events after the first one that matches, or nil.
func after(h *historypb.History, match func(e *historypb.HistoryEvent) bool) []*historypb.HistoryEvent {
	for i, e := range h.Events {
		if match(e) {
			return h.Events[i+1:]
		}
	}
	return nil
}

// afterNth returns the events after the nth activity of a type was
// scheduled, or nil.
func afterNth(h *historypb.History, n int, name string) []*historypb.HistoryEvent {
	seen := 0
	return after(h, func(e *historypb.HistoryEvent) bool {
		if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == name {
			seen++
		}
		return seen == n
	})
}

// completedActivity names the activity e completed, or "".
func completedActivity(h *historypb.History, e *historypb.HistoryEvent) string {
	done := e.GetActivityTaskCompletedEventAttributes()
	if done == nil {
		return ""
	}
	return h.Events[done.GetScheduledEventId()-1].GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
}

// hasVersionMarker says whether h recorded GetVersion(change).
func hasVersionMarker(h *historypb.History, change string) bool {
	return slices.ContainsFunc(h.Events, func(e *historypb.HistoryEvent) bool {
		m := e.GetMarkerRecordedEventAttributes()
		return m.GetMarkerName() == "Version" && len(m.GetDetails()["change-id"].GetPayloads()) > 0 &&
			string(m.GetDetails()["change-id"].GetPayloads()[0].GetData()) == `"`+change+`"`
	})
}

// scheduledAny names the activities scheduled among events.
func scheduledAny(events []*historypb.HistoryEvent) []string {
	var names []string
	for _, e := range events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			names = append(names, a.GetActivityType().GetName())
		}
	}
	return names
}

// scheduled counts the activities of a type scheduled among events.
func scheduled(events []*historypb.HistoryEvent, name string) int {
	n := 0
	for _, s := range scheduledAny(events) {
		if s == name {
			n++
		}
	}
	return n
}

func lastType(h *historypb.History) enumspb.EventType {
	return h.Events[len(h.Events)-1].GetEventType()
}

// firedTimer says whether a timer whose summary starts with prefix fired.
func firedTimer(h *historypb.History, prefix string) bool {
	started := map[int64]bool{}
	for _, e := range h.Events {
		if e.GetTimerStartedEventAttributes() != nil {
			var summary string
			_ = json.Unmarshal(e.GetUserMetadata().GetSummary().GetData(), &summary)
			started[e.GetEventId()] = strings.HasPrefix(summary, prefix)
		}
		if f := e.GetTimerFiredEventAttributes(); f != nil && started[f.GetStartedEventId()] {
			return true
		}
	}
	return false
}

// signalled says whether a history sent the named signal to another workflow.
func signalled(h *historypb.History, name string) bool {
	for _, e := range h.Events {
		if e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName() == name {
			return true
		}
	}
	return false
}

// handBackSignal says whether e sends an investigation_closed signal that
// returns alerts (handBack).
func handBackSignal(e *historypb.HistoryEvent) bool {
	a := e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes()
	return a.GetSignalName() == investigation.ClosedSignal && len(a.GetInput().GetPayloads()) > 0 &&
		bytes.Contains(a.GetInput().GetPayloads()[0].GetData(), []byte(`"returned":{"arrivals":[`))
}

// afterCloseTold returns the events after an alerts signal that came in a
// workflow task later than the one that took the admission's answer to the
// run's close (flushProgress had run), if a hand-back follows; else nil.
func afterCloseTold(h *historypb.History) []*historypb.HistoryEvent {
	closing, told, taken := false, false, false
	for i, e := range h.Events {
		switch {
		case e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName() == investigation.ClosedSignal && !handBackSignal(e):
			closing = true
		case closing && e.GetExternalWorkflowExecutionSignaledEventAttributes() != nil:
			told = true
		case told && e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			taken = true
		case taken && e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.AlertsUpdate:
			if rest := h.Events[i+1:]; slices.ContainsFunc(rest, handBackSignal) {
				return rest
			}
		}
	}
	return nil
}

// TestVersionGatesHaveFixtures enforces the versioning rule for fixes to
// running workflows: every workflow.GetVersion change ID in the workflow
// code has a fixture recorded after the change (with its marker) and its
// twin recorded before it (UPDATE_TESTDATA=<label>: <label>-<name>, no
// marker), and both replay above.
func TestVersionGatesHaveFixtures(t *testing.T) {
	gate := regexp.MustCompile(`workflow\.GetVersion\(\s*\w+\s*,\s*"([^"]+)"`)
	sources, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var changes []string
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range gate.FindAllSubmatch(src, -1) {
			changes = append(changes, string(m[1]))
		}
	}
	files, err := filepath.Glob("testdata/*.history.json")
	require.NoError(t, err)
	histories := map[string][]byte{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		histories[filepath.Base(f)] = append(raw, changeVersions(t, f)...)
	}
	for _, change := range changes {
		require.True(t, gatePaired(histories, change), "GetVersion(%q) needs a fixture <name> recorded after the change and <label>-<name> recorded before it", change)
	}
}

// changeVersions is the change IDs a history's TemporalChangeVersion search
// attribute lists, each quoted: in a keyed fixture the markers' payloads are
// encrypted, and this attribute is the plain record of them.
func changeVersions(t *testing.T, path string) []byte {
	var out []byte
	for _, e := range readHistory(t, path).GetEvents() {
		p := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()["TemporalChangeVersion"]
		var versions []string
		if p == nil || json.Unmarshal(p.GetData(), &versions) != nil {
			continue
		}
		for _, v := range versions {
			if i := strings.LastIndex(v, "-"); i > 0 {
				out = append(out, "\n\""+v[:i]+"\""...)
			}
		}
	}
	return out
}

// gatePaired says whether some fixture holds the change's marker and a
// fixture named <label>-<that name> does not. A recorded history holds the
// marker's change ID as a payload, base64 of its JSON ("<id>").
func gatePaired(histories map[string][]byte, change string) bool {
	quoted := `"` + change + `"`
	encoded := []byte(base64.StdEncoding.EncodeToString([]byte(quoted)))
	marked := func(raw []byte) bool { return bytes.Contains(raw, []byte(quoted)) || bytes.Contains(raw, encoded) }
	for after, raw := range histories {
		if !marked(raw) {
			continue
		}
		for before, old := range histories {
			if strings.HasSuffix(before, "-"+after) && !marked(old) {
				return true
			}
		}
	}
	return false
}

// TestGateFixturePairs: a gate is covered only by a before/after pair of
// the same path, not by any fixture that happens to lack its marker.
func TestGateFixturePairs(t *testing.T) {
	after := []byte(`{"changeId":"cut-calls"}`)
	require.True(t, gatePaired(map[string][]byte{"stop.history.json": after, "v1-stop.history.json": []byte(`{}`)}, "cut-calls"))
	require.False(t, gatePaired(map[string][]byte{"stop.history.json": after, "investigation.history.json": []byte(`{}`)}, "cut-calls"), "an unrelated fixture is no before")
	require.False(t, gatePaired(map[string][]byte{"stop.history.json": after, "v1-stop.history.json": after}, "cut-calls"), "the twin was recorded after the change")
	require.False(t, gatePaired(map[string][]byte{"v1-stop.history.json": []byte(`{}`)}, "cut-calls"), "no fixture has the marker")
	recorded := []byte(`{"change-id":{"payloads":[{"data":"ImN1dC1jYWxscyI="}]}}`) // as a history JSON holds it
	require.True(t, gatePaired(map[string][]byte{"stop.history.json": recorded, "v1-stop.history.json": []byte(`{}`)}, "cut-calls"))
}

// parallelSteps says whether model turns of two different steps were open
// at once.
func parallelSteps(h *historypb.History) bool {
	open := map[int64]string{} // scheduled event ID -> step of an open ModelTurn
	for _, e := range h.Events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "ModelTurn" {
			var in struct {
				Step struct {
					ID string `json:"id"`
				} `json:"step"`
			}
			if len(a.GetInput().GetPayloads()) == 0 || json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in) != nil {
				continue
			}
			for _, step := range open {
				if step != in.Step.ID {
					return true
				}
			}
			open[e.GetEventId()] = in.Step.ID
		}
		for _, id := range []int64{e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), e.GetActivityTaskFailedEventAttributes().GetScheduledEventId(),
			e.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId(), e.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()} {
			delete(open, id)
		}
	}
	return false
}

// reusedCall says whether a model turn was given a stored result for a call
// that did not run: an identical call served from an earlier one (only such
// a ref carries both the stored key and the tool, toolLoop.collect).
func reusedCall(h *historypb.History) bool {
	for _, e := range h.Events {
		a := e.GetActivityTaskScheduledEventAttributes()
		if a.GetActivityType().GetName() != "ModelTurn" || len(a.GetInput().GetPayloads()) == 0 {
			continue
		}
		var in activities.TurnInput
		if json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in) != nil {
			continue
		}
		for _, r := range in.Transcript {
			if r.Key != "" && r.Tool != "" {
				return true
			}
		}
	}
	return false
}

// hintWhileConcluding returns the events after a hint signal received once
// a stop update was accepted while a Conclude was open; nil if none was.
func hintWhileConcluding(h *historypb.History) []*historypb.HistoryEvent {
	open := map[int64]bool{}
	stopped := false
	for i, e := range h.Events {
		if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "Conclude" {
			open[e.GetEventId()] = true
		}
		delete(open, e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId())
		stopped = stopped || stopAccepted(e) && len(open) > 0
		if stopped && len(open) > 0 && e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.UpdateHint {
			return h.Events[i+1:]
		}
	}
	return nil
}

// TestReplayedHintWhileClosingTakesTheNewPath replays the twin fixtures of
// GetVersion "unread-hint-signal" and reads the progress each replay writes
// (StoreProgress's input): with the marker, the late hint is a note and no
// hint event; without it, a hint event as it was recorded.
func TestReplayedHintWhileClosingTakesTheNewPath(t *testing.T) {
	const ignored = "hint signal ignored: the investigation is closing: no model call would read the hint; start a new one"
	for file, gated := range map[string]bool{"hint-while-closing.history.json": true, "pre-unread-hint-hint-while-closing.history.json": false} {
		t.Run(file, func(t *testing.T) {
			hinted, noted := false, false
			for _, e := range replayedProgress(t, file) {
				hinted = hinted || e.Kind == investigation.EventHint && e.Text == lateHint
				noted = noted || e.Kind == investigation.EventNote && e.Text == ignored
			}
			require.Equal(t, !gated, hinted, "the late hint is a hint event only without the marker")
			require.Equal(t, gated, noted, "the late hint is a note only with the marker")
		})
	}
}

// TestReplayedHandBackNotesTakeTheNewPath replays the twin fixtures of
// GetVersion "hand-back-noted" and reads the progress each replay writes:
// with the marker, the note of the alert signalled after the close was
// told is written once it was handed back; without it, it is dropped.
func TestReplayedHandBackNotesTakeTheNewPath(t *testing.T) {
	const note = "1 alerts arrived as the investigation closed: handed back to the intake"
	for file, gated := range map[string]bool{"intake-hand-back-notes.history.json": true, "pre-noted-intake-hand-back-notes.history.json": false} {
		t.Run(file, func(t *testing.T) {
			events := replayedProgress(t, file)
			require.Equal(t, gated, slices.ContainsFunc(events, func(e investigation.Event) bool {
				return e.Kind == investigation.EventNote && e.Text == note
			}), "the hand-back note is written only with the marker")
		})
	}
}

// replayedProgress replays the fixture file against Investigation and
// returns the progress events its replay writes (StoreProgress's input).
func replayedProgress(t *testing.T, file string) []investigation.Event {
	t.Helper()
	return replayed(t, file).events
}

// replayed replays the fixture file against Investigation and returns
// what its progress writes carried.
func replayed(t *testing.T, file string) *progressSeen {
	t.Helper()
	hist := readHistory(t, filepath.Join("testdata", file))
	seen := &progressSeen{}
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: []interceptor.WorkerInterceptor{seen}})
	require.NoError(t, err)
	r.RegisterWorkflowWithOptions(Investigation, workflow.RegisterOptions{Name: investigation.WorkflowName})
	started := hist.Events[0].GetWorkflowExecutionStartedEventAttributes()
	require.NoError(t, r.ReplayWorkflowHistoryWithOptions(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)), hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: started.GetWorkflowId(), RunID: started.GetOriginalExecutionRunId()},
	}))
	return seen
}

// progressSeen collects the progress events a replayed run writes, and
// the status of its last write.
type progressSeen struct {
	interceptor.WorkerInterceptorBase
	events []investigation.Event
	status *investigation.Status
}

func (p *progressSeen) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &progressInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, seen: p}
}

type progressInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	seen *progressSeen
}

func (i *progressInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&progressOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, seen: i.seen})
}

type progressOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	seen *progressSeen
}

func (o *progressOutbound) ExecuteLocalActivity(ctx workflow.Context, typ string, args ...any) workflow.Future {
	for _, a := range args {
		if in, ok := a.(activities.ProgressInput); ok {
			o.seen.events = append(o.seen.events, in.Events...)
			o.seen.status = in.Status
		}
	}
	return o.Next.ExecuteLocalActivity(ctx, typ, args...)
}

// lateRise returns the events after an investigation_closed signal that
// returned its alert seen again at a higher severity (intake.Rank), or nil.
func lateRise(h *historypb.History) []*historypb.HistoryEvent {
	return after(h, func(e *historypb.HistoryEvent) bool {
		a := e.GetWorkflowExecutionSignaledEventAttributes()
		if a.GetSignalName() != investigation.ClosedSignal || len(a.GetInput().GetPayloads()) == 0 {
			return false
		}
		var c investigation.Closed
		if json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &c) != nil {
			return false
		}
		return slices.ContainsFunc(c.Returned.Arrivals, func(a investigation.Arrival) bool {
			return a.Kind == investigation.ArrivalSeenAgain && a.PrevSeverity != "" && intake.Rank(a.Severity) > intake.Rank(a.PrevSeverity)
		})
	})
}

// forgedHandBack is the events after an investigation_closed signal that
// returns an arrival whose identity holds '<' (no admit request could carry
// it) and names the workflow ID of a StartInvestigation before it.
func forgedHandBack(h *historypb.History) []*historypb.HistoryEvent {
	started := map[string]bool{}
	return after(h, func(e *historypb.HistoryEvent) bool {
		if a := e.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "StartInvestigation" && len(a.GetInput().GetPayloads()) > 0 {
			var in activities.StartInput
			if json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in) == nil {
				started[in.WorkflowID] = true
			}
		}
		a := e.GetWorkflowExecutionSignaledEventAttributes()
		if a.GetSignalName() != investigation.ClosedSignal || len(a.GetInput().GetPayloads()) == 0 {
			return false
		}
		var c investigation.Closed
		if json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &c) != nil {
			return false
		}
		return started[c.WorkflowID] && slices.ContainsFunc(c.Returned.Arrivals, func(a investigation.Arrival) bool { return strings.Contains(a.Identity, "<") })
	})
}

// lostClosed is the events after an investigation_closed signal that names
// the workflow ID of a StartInvestigation before it whose input counts a
// dropped arrival, and reports an unseen one, when an admit update follows
// it (the alerts sent again); else nil.
func lostClosed(h *historypb.History) []*historypb.HistoryEvent {
	dropped := map[string]bool{}
	rest := after(h, func(e *historypb.HistoryEvent) bool {
		if a := e.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "StartInvestigation" && len(a.GetInput().GetPayloads()) > 0 {
			var in activities.StartInput
			if json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in) == nil && in.Input.Intake != nil && in.Input.Intake.Arrived.Dropped > 0 {
				dropped[in.WorkflowID] = true
			}
		}
		a := e.GetWorkflowExecutionSignaledEventAttributes()
		if a.GetSignalName() != investigation.ClosedSignal || len(a.GetInput().GetPayloads()) == 0 {
			return false
		}
		var c investigation.Closed
		return json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &c) == nil && dropped[c.WorkflowID] && len(c.Unseen) > 0
	})
	if !slices.ContainsFunc(rest, func(e *historypb.HistoryEvent) bool {
		return e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName() == intake.AdmitUpdate
	}) {
		return nil
	}
	return rest
}

// signalledTo says whether an alerts signal to workflow id is initiated
// among events.
func signalledTo(events []*historypb.HistoryEvent, id string) bool {
	return slices.ContainsFunc(events, func(e *historypb.HistoryEvent) bool {
		a := e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes()
		return a.GetSignalName() == investigation.AlertsUpdate && a.GetWorkflowExecution().GetWorkflowId() == id
	})
}

// startInput says whether a StartInvestigation among events has substr in
// its input.
func startInput(events []*historypb.HistoryEvent, substr string) bool {
	for _, e := range events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "StartInvestigation" &&
			len(a.GetInput().GetPayloads()) > 0 && bytes.Contains(a.GetInput().GetPayloads()[0].GetData(), []byte(substr)) {
			return true
		}
	}
	return false
}

// startOutcomes checks the admission-outcomes paths on the starts of an
// admission history: a workflow ID whose start failed and started later
// ("failed start tried again"); one whose start failed maxStartAttempts
// times, never tried after, with another start (its related alert's) after
// the last failure ("failed start given up"); a start that found its run
// open, followed by an alerts signal to it, delivered, that holds the
// entity's first alert as seen again ("start on an open run attached").
func startOutcomes(h *historypb.History, path string) bool {
	type start struct {
		wf      string
		at, end int // event indexes: scheduled, and failed or completed
		outcome string
	}
	var starts []*start
	byEvent := map[int64]*start{}
	signals := map[int64]string{} // alerts signals initiated: event ID -> its input
	for i, e := range h.Events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "StartInvestigation" {
			var in activities.StartInput
			if len(a.GetInput().GetPayloads()) == 0 || json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in) != nil {
				continue
			}
			s := &start{wf: in.WorkflowID, at: i}
			starts = append(starts, s)
			byEvent[e.GetEventId()] = s
		}
		if f := e.GetActivityTaskFailedEventAttributes(); f != nil && byEvent[f.GetScheduledEventId()] != nil {
			byEvent[f.GetScheduledEventId()].outcome, byEvent[f.GetScheduledEventId()].end = "failed", i
		}
		if c := e.GetActivityTaskCompletedEventAttributes(); c != nil && byEvent[c.GetScheduledEventId()] != nil {
			var out activities.StartOutput
			if len(c.GetResult().GetPayloads()) > 0 && json.Unmarshal(c.GetResult().GetPayloads()[0].GetData(), &out) == nil {
				byEvent[c.GetScheduledEventId()].outcome, byEvent[c.GetScheduledEventId()].end = out.Outcome, i
			}
		}
	}
	for _, s := range starts {
		switch path {
		case "failed start tried again":
			if s.outcome == "failed" && slices.ContainsFunc(starts, func(l *start) bool {
				return l.wf == s.wf && l.at > s.end && l.outcome == activities.StartStarted
			}) {
				return true
			}
		case "failed start given up":
			var failed []*start
			for _, l := range starts {
				if l.wf == s.wf && l.outcome == "failed" {
					failed = append(failed, l)
				}
			}
			if len(failed) < maxStartAttempts || failed[len(failed)-1] != s {
				continue
			}
			if !slices.ContainsFunc(starts, func(l *start) bool { return l.wf == s.wf && l.at > s.end }) &&
				slices.ContainsFunc(starts, func(l *start) bool { return l.wf != s.wf && l.at > s.end }) {
				return true
			}
		case "start on an open run attached":
			if s.outcome != activities.StartRunning {
				continue
			}
			for _, e := range h.Events[s.end:] {
				if a := e.GetSignalExternalWorkflowExecutionInitiatedEventAttributes(); a.GetSignalName() == investigation.AlertsUpdate &&
					a.GetWorkflowExecution().GetWorkflowId() == s.wf && len(a.GetInput().GetPayloads()) > 0 &&
					bytes.Contains(a.GetInput().GetPayloads()[0].GetData(), []byte(`"kind":"seen_again"`)) {
					signals[e.GetEventId()] = s.wf
				}
				if d := e.GetExternalWorkflowExecutionSignaledEventAttributes(); d != nil && signals[d.GetInitiatedEventId()] != "" {
					return true
				}
			}
		}
	}
	return false
}

// --- insights-and-duplicates ---

// summaryWaited says whether the follow-up's summary step (t2-step_4, which
// depends on the dropped duplicates) was scheduled only after the bastion
// step's (t2-step_3) model turn completed; ok says both were found.
func summaryWaited(h *historypb.History) (waited, ok bool) {
	key := func(e *historypb.HistoryEvent) string {
		a := e.GetActivityTaskScheduledEventAttributes()
		if a.GetActivityType().GetName() != "ModelTurn" || len(a.GetInput().GetPayloads()) == 0 {
			return ""
		}
		var in struct{ Key string }
		_ = json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in)
		return in.Key
	}
	var bastion, summary int64
	for _, e := range h.Events {
		switch key(e) {
		case "t2-step_3-i1":
			bastion = e.GetEventId()
		case "t2-step_4-i1":
			summary = e.GetEventId()
		}
	}
	if bastion == 0 || summary == 0 {
		return false, false
	}
	for _, e := range h.Events {
		if c := e.GetActivityTaskCompletedEventAttributes(); c != nil && c.GetScheduledEventId() == bastion {
			return e.GetEventId() < summary, true
		}
	}
	return false, false
}

// --- end insights-and-duplicates ---

// --- bounded-signal-notes ---

// floodWrites counts the progress writes (StoreProgress markers) from the
// 12th hint signal received after the conclusion (maxSignalNotes + 2: the
// first whose note the gate drops) to the stop update (localMarker names a
// local activity's marker, exercises'); ok says the history
// has that signal and the stop after it.
func floodWrites(h *historypb.History, localMarker func(*historypb.HistoryEvent) (string, string)) (writes int, ok bool) {
	hints := 0
	rest := after(h, func(e *historypb.HistoryEvent) bool {
		if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.UpdateHint {
			hints++
		}
		return hints == maxSignalNotes+2
	})
	if afterNth(h, 1, "Conclude") == nil || len(afterNth(h, 1, "Conclude")) < len(rest) {
		return 0, false
	}
	for _, e := range rest {
		if e.GetWorkflowExecutionUpdateAcceptedEventAttributes() != nil {
			return writes, true
		}
		if t, _ := localMarker(e); t == "StoreProgress" {
			writes++
		}
	}
	return 0, false
}

// TestReplayedSignalNotesTakeTheNewPath replays the twin fixtures of
// GetVersion "bounded-signal-notes" and reads the progress each replay
// writes: with the marker, 10 notes of unreadable signals and one that
// later ones are not noted; without it, a note for each of the 13.
func TestReplayedSignalNotesTakeTheNewPath(t *testing.T) {
	for file, gated := range map[string]bool{"signal-notes.history.json": true, "pre-bounded-signal-notes.history.json": false} {
		t.Run(file, func(t *testing.T) {
			ignored, further := 0, 0
			seen := map[int]bool{} // a waited-for write sends again what the last one did not confirm
			for _, e := range replayedProgress(t, file) {
				if seen[e.Seq] {
					continue
				}
				seen[e.Seq] = true
				switch {
				case e.Kind == investigation.EventNote && strings.HasPrefix(e.Text, "hint signal ignored: "):
					ignored++
				case e.Kind == investigation.EventNote && strings.HasPrefix(e.Text, "further signals that are refused or ignored"):
					further++
				}
			}
			if gated {
				require.Equal(t, maxSignalNotes, ignored)
				require.Equal(t, 1, further)
			} else {
				require.Equal(t, maxSignalNotes+3, ignored)
				require.Zero(t, further)
			}
		})
	}
}

// --- end bounded-signal-notes ---

// --- closed-stop-signal ---

// stopWhileClosing returns the events after a stop signal that came once
// the idle wait's timer fired, with no activity scheduled after it (the
// run was closing), or nil.
func stopWhileClosing(h *historypb.History) []*historypb.HistoryEvent {
	fired := false
	rest := after(h, func(e *historypb.HistoryEvent) bool {
		fired = fired || e.GetTimerFiredEventAttributes() != nil
		return fired && e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == investigation.UpdateStop
	})
	if rest == nil || len(scheduledAny(rest)) > 0 || afterNth(h, 1, "Conclude") == nil {
		return nil
	}
	return rest
}

// TestReplayedStopSignalWhileClosingTakesTheNewPath replays the twin
// fixtures of GetVersion "closed-stop-signal" and reads the status of the
// last progress write each replay makes: with the marker, the stop
// signalled while closing stopped nothing; without it, its reason is
// stored as it was recorded.
func TestReplayedStopSignalWhileClosingTakesTheNewPath(t *testing.T) {
	for file, gated := range map[string]bool{"stop-signal-while-closing.history.json": true, "pre-closed-stop-stop-signal-while-closing.history.json": false} {
		t.Run(file, func(t *testing.T) {
			seen := replayed(t, file)
			require.NotNil(t, seen.status, "the replay wrote a status")
			if gated {
				require.Empty(t, seen.status.StopReason)
			} else {
				require.Contains(t, seen.status.StopReason, "enough")
			}
			require.False(t, slices.ContainsFunc(seen.events, func(e investigation.Event) bool { return e.Kind == investigation.EventStop }),
				"once the last write began, no stop event is written")
		})
	}
}

// --- end closed-stop-signal ---
