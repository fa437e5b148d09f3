package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/gemini/geminitest"
)

const exampleAlert = "examples/alerts/guardduty-ssh-bruteforce.json"

func exampleID(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", exampleAlert))
	require.NoError(t, err)
	al, err := alerts.Parse(raw)
	require.NoError(t, err)
	return al.ID
}

// TestInvestigation runs a whole investigation through the real binaries: a
// plan, a 503 on the first step turn (retried by Temporal after Retry-After),
// two steps with tool calls, a plan update, an early "achieved", and the
// conclusion.
func TestInvestigation(t *testing.T) {
	imp := starter(t, nil, append([]string{"alert", "import"}, historyFiles(t)...)...)
	require.Equal(t, 0, imp.code, imp.stderr)
	require.Equal(t, len(historyFiles(t)), strings.Count(imp.stdout, "imported "), imp.stdout)

	id := exampleID(t)
	show := starter(t, nil, "alert", "show", "guardduty-"+strings.Split(strings.Split(imp.stdout, "imported guardduty-")[1], " ")[0])
	require.Equal(t, 0, show.code, show.stderr)
	require.Contains(t, show.stdout, `"source": "guardduty"`)
	require.Contains(t, show.stdout, `"data": {`)
	missing := starter(t, nil, "alert", "show", "guardduty-000000000000")
	require.Equal(t, 1, missing.code)
	require.Contains(t, missing.stderr, `alert "guardduty-000000000000" not found`)

	var step1Retry, sawAlert, sawSearch, reflectPrompt, concludePrompt string
	model.use(t, geminitest.Script(
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.JSON(map[string]any{
				"objective": "Decide whether the SSH brute force against web-server-prod-01 succeeded.",
				"steps": []map[string]any{
					{"id": "s1", "description": "Read the full alert.", "tools": []string{"get_alert"}, "expected": "attacker IP, target, window"},
					{"id": "s2", "description": "Find earlier alerts from the same remote IP.", "tools": []string{"search_alerts", "whois"}, "expected": "history of the IP"},
				},
			})
		},
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.Error(503, "The model is overloaded. Please try again later.", "1")
		},
		func(r *geminitest.Request) geminitest.Reply {
			step1Retry = r.Text()
			return geminitest.Calls(&genai.FunctionCall{Name: "get_alert", Args: map[string]any{"id": id}})
		},
		func(r *geminitest.Request) geminitest.Reply {
			for _, fr := range r.FunctionResponses() {
				if fr.Name == "get_alert" {
					sawAlert = toJSON(fr.Response)
				}
			}
			return geminitest.Text("Remote IP 198.51.100.23 (Example Hosting, NL) sent SSH attempts to i-0abc1234def567890 on port 22; no sign of success in the finding.")
		},
		func(r *geminitest.Request) geminitest.Reply {
			reflectPrompt = r.Text()
			return geminitest.JSON(map[string]any{
				"achieved": false,
				"insights": []string{"The attacker IP 198.51.100.23 is hosted at Example Hosting Ltd."},
				"plan_updates": []map[string]any{
					{"type": "update_step", "step_id": "step_2", "step": map[string]any{"expected": "earlier findings for 198.51.100.23"}, "reason": "focus on the IP"},
					{"type": "cancel_step", "step_id": "step_9", "reason": "nonsense"},
				},
			})
		},
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.Calls(&genai.FunctionCall{Name: "search_alerts", Args: map[string]any{
				"field": "service.action.networkConnectionAction.remoteIpDetails.ipAddressV4", "op": "==", "value": "198.51.100.23",
			}})
		},
		func(r *geminitest.Request) geminitest.Reply {
			for _, fr := range r.FunctionResponses() {
				if fr.Name == "search_alerts" {
					sawSearch = toJSON(fr.Response)
				}
			}
			return geminitest.Text("198.51.100.23 appears in earlier GuardDuty findings against other hosts.")
		},
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.JSON(map[string]any{"achieved": true, "insights": []string{"Repeat offender across hosts."}, "plan_updates": []any{}})
		},
		func(r *geminitest.Request) geminitest.Reply {
			concludePrompt = r.Text()
			return geminitest.Conclusion("## Summary\nA known scanner brute-forced SSH on web-server-prod-01.\n\n## Assessment\nSuspicious, no compromise seen.", "undetermined", "medium")
		},
	))
	before := len(modelSrv.Requests())
	start := time.Now()
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--question", "Did the attacker get in?")
	wall := time.Since(start)
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	out := res.stdout
	for _, want := range []string{
		"Investigating alert " + id,
		"Web UI:      http://localhost:8233/namespaces/default/workflows/investigation-" + id,
		"PLAN  Decide whether the SSH brute force",
		"step_1  Read the full alert. [get_alert]",
		"expect: attacker IP, target, window",
		"note: step s2: removed unknown tools whois",
		"STEP  step_1: Read the full alert.",
		"-> get_alert " + id,
		"insight: The attacker IP 198.51.100.23 is hosted at Example Hosting Ltd.",
		"plan: update_step step_2 (focus on the IP)",
		`plan: cancel_step step_9 (dropped: unknown step "step_9")`,
		"completed: step_1: Read the full alert.",
		"pending:   step_2: Find earlier alerts from the same remote IP.",
		"-> search_alerts service.action.networkConnectionAction.remoteIpDetails.ipAddressV4 == 198.51.100.23",
		"==================== CONCLUSION ====================\n      ## Summary\n      A known scanner brute-forced SSH on web-server-prod-01.",
		"VERDICT  undetermined (medium confidence)",
	} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 1, strings.Count(out, "CONCLUSION"), "events are printed once")
	require.Equal(t, 9, len(modelSrv.Requests())-before, "one request per model call plus the one 503")
	list := starter(t, nil, "alert", "list")
	require.Equal(t, 0, list.code, list.stderr)
	require.Contains(t, list.stdout, "ID  ")
	require.Contains(t, list.stdout, id, "the investigated alert was stored")

	// What the model saw: the real tool results, the reflection inputs only.
	require.Contains(t, step1Retry, "## Execute this step\nstep_1\n<<<DATA ")
	require.Contains(t, step1Retry, "\n| Step step_1: Read the full alert.\n", "the planner's words, in the block after the step's ID")
	require.Contains(t, sawAlert, "198.51.100.23")
	require.Contains(t, sawSearch, `"count":`)
	require.Contains(t, sawSearch, "guardduty-")
	require.Contains(t, reflectPrompt, "Remote IP 198.51.100.23")
	require.NotContains(t, reflectPrompt, "## Execute this step", "reflection never sees the conversation")
	require.Contains(t, concludePrompt, "Repeat offender across hosts.")

	// The workflow history: activity order and summaries, the retried turn,
	// the search attribute, the current details.
	wfID := workflowIDFrom(t, out)
	hist := history(t, wfID)
	var retried []string
	scheduled := map[int64]string{} // event ID -> activity summary
	for _, e := range hist.Events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			var summary string
			require.NoError(t, converter.GetDefaultDataConverter().FromPayload(e.GetUserMetadata().GetSummary(), &summary))
			scheduled[e.GetEventId()] = summary
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && a.Attempt > 1 {
			retried = append(retried, fmt.Sprintf("%s (attempt %d)", scheduled[a.GetScheduledEventId()], a.Attempt))
			require.Contains(t, a.LastFailure.GetMessage(), "503")
		}
	}
	acts := activitiesIn(t, hist, converter.GetDefaultDataConverter())
	require.Equal(t, []string{
		"GeneratePlan",
		"ModelTurn", "CallTool (local)", "ModelTurn", "Reflect",
		"ModelTurn", "CallTool (local)", "ModelTurn", "Reflect",
		"Conclude",
	}, names(acts), "the store reads run as local activities")
	require.Equal(t, []string{
		"plan",
		"step_1 turn 1", "tool get_alert " + id, "step_1 turn 2", "reflect step_1",
		"step_2 turn 1", "tool search_alerts service.action.networkConnectionAction.remoteIpDetails.ipAddressV4 == 198.51.100.23", "step_2 turn 2", "reflect step_2",
		"conclude",
	}, summaries(acts), "every activity has a readable summary in the Web UI")
	require.Equal(t, []string{"step_1 turn 1 (attempt 2)"}, retried, "exactly one activity, the first ModelTurn, needed a second attempt")

	// The investigation stays open for follow-ups; its current details (the
	// Web UI's "Current Details") show the plan's progress.
	q, err := tc.QueryWorkflow(context.Background(), wfID, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var meta sdkpb.WorkflowMetadata
	require.NoError(t, q.Get(&meta))
	require.Contains(t, meta.GetCurrentDetails(), "**idle: waiting for follow-up questions** — 2/2 steps done, 2 tool calls")
	require.Contains(t, meta.GetCurrentDetails(), "- [x] step_1: Read the full alert. (done)")
	require.Contains(t, meta.GetCurrentDetails(), "**Verdict: undetermined** (medium confidence)")
	require.Contains(t, meta.GetCurrentDetails(), "A known scanner brute-forced SSH", "the details show the conclusion")

	desc, err := tc.DescribeWorkflowExecution(context.Background(), wfID, "")
	require.NoError(t, err)
	sa := desc.WorkflowExecutionInfo.GetSearchAttributes().GetIndexedFields()["AlertId"]
	require.NotNil(t, sa)
	require.Contains(t, string(sa.GetData()), id)
	verdict := desc.WorkflowExecutionInfo.GetSearchAttributes().GetIndexedFields()["Verdict"]
	require.NotNil(t, verdict, "the Verdict search attribute is set")
	require.Equal(t, `"undetermined"`, string(verdict.GetData()))

	raw, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	require.NoError(t, err)
	writes := storeWrites(t, hist)
	require.Positive(t, writes["StoreProgress"], "the progress is stored beside the transcript")
	t.Logf("REPORT e2e investigation: wall %s, %d activities, %d history events, history %d bytes (JSON export); store writes %v",
		wall.Round(time.Millisecond), len(acts), len(hist.Events), len(raw), writes)
	saveHistory(t, hist, "investigation.history.json")
}

// saveHistory writes a run's history under workflows/testdata for the replay
// test when UPDATE_TESTDATA is set: UPDATE_TESTDATA=guarded writes
// guarded-<name>, next to the histories recorded by earlier workflow code,
// which must keep replaying (UPDATE_TESTDATA=1 rewrites <name> itself).
func saveHistory(t *testing.T, hist *historypb.History, name string) {
	t.Helper()
	label := os.Getenv("UPDATE_TESTDATA")
	switch label {
	case "":
		return
	case "1":
	default:
		name = label + "-" + name
	}
	raw, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("..", "workflows", "testdata", name), raw, 0o644))
}

// TestUnauthorizedFailsFast: a 401 from Gemini ends the run at once with a
// clear sentence and a non-zero exit code; nothing is retried.
func TestUnauthorizedFailsFast(t *testing.T) {
	model.use(t, geminitest.Always(geminitest.Error(401, "API key not valid. Please pass a valid API key.", "")))
	before := len(modelSrv.Requests())
	res := starter(t, nil, "investigate", "--alert", exampleAlert)
	require.Equal(t, 1, res.code, res.stdout)
	require.Equal(t, 1, len(modelSrv.Requests())-before, "a 401 is not retried")
	require.Contains(t, res.stderr, "planning failed: Gemini rejected the credentials (HTTP 401)")
	require.NotContains(t, res.stderr+res.stdout, "e2e-test-key", "the key never reaches the user")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(res.stderr), "\n")+1, "one line: %q", res.stderr)
	t.Logf("REPORT 401 failure: starter exited %d after %s", res.code, res.took.Round(time.Millisecond))
}

// TestBadInput: bad alert files get a clear error and start no workflow.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		return p
	}
	big := make([]byte, 20<<20)
	for i := range big {
		big[i] = ' '
	}
	copy(big, `{"a":"`)
	cases := []struct {
		name, path, want string
		stdin            []byte
	}{
		{"empty file", write("empty.json", nil), "the alert is empty", nil},
		{"not JSON", write("text.json", []byte("this is not json")), "not valid JSON", nil},
		{"JSON array", write("array.json", []byte(`[{"type":"x"}]`)), "must be a JSON object, got an array", nil},
		{"20 MB file", write("big.json", big), "larger than the 1 MiB limit", nil},
		{"missing path", filepath.Join(dir, "nope.json"), "cannot read alert file", nil},
		{"directory", dir, "cannot read alert file", nil},
		{"stdin not an object", "-", "must be a JSON object", []byte(`"just a string"`)},
	}
	count := func() int64 {
		resp, err := tc.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{Query: "WorkflowType = 'Investigation'"})
		require.NoError(t, err)
		return resp.Count
	}
	model.use(t, nil)
	before := count()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := starter(t, c.stdin, "investigate", "--alert", c.path)
			require.Equal(t, 1, res.code)
			require.Contains(t, res.stderr, c.want)
			require.True(t, strings.HasPrefix(res.stderr, "error: "), res.stderr)
			require.NotContains(t, res.stdout, "Workflow ID")
		})
	}
	time.Sleep(time.Second) // let visibility catch up before counting
	require.Equal(t, before, count(), "no workflow was started")
}

func historyFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("..", "examples", "alerts", "history", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for i, f := range files {
		files[i], _ = filepath.Rel("..", f)
	}
	return files
}

func history(t *testing.T, wfID string) *historypb.History {
	t.Helper()
	return runHistory(t, wfID, "")
}

// runHistory reads one run's history ("" for the latest run).
func runHistory(t *testing.T, wfID, runID string) *historypb.History {
	t.Helper()
	return clientHistory(t, tc, wfID, runID)
}
