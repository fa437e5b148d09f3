package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"

	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// hostile is text an attacker writes into an alert (or makes a tool or the
// model repeat): an OSC 8 hyperlink, a screen clear, colours, a bare CR, a
// bell, DEL, an 8-bit CSI, bidi overrides and a window-title OSC.
const hostile = "T \x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\ \x1b[2J\x1b[31mred\x1b[0m\rover\x07\x7f\u009b6n " +
	"\u202eoverride\u202c \u2066iso\u2069 \x1b]0;owned\x07end"

// requireTerminalSafe fails when out holds a byte or character a terminal
// would act on; the visible words of hostile must still be there.
func requireTerminalSafe(t *testing.T, out string) {
	t.Helper()
	for _, r := range out {
		bad := r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f ||
			r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
		require.False(t, bad, "the output holds %U: %q", r, out)
	}
	for _, word := range []string{"click", "red", "override", "iso", "end"} {
		require.Contains(t, out, word, "visible text is kept")
	}
}

// outputClient is a Temporal that answers with hostile text: the tool
// catalog, an investigation's progress and status. Other calls panic.
type outputClient struct {
	client.Client
	events []investigation.Event
	st     investigation.Status
	closed bool // the workflow has completed
}

func (c *outputClient) GetWorkflow(_ context.Context, id, _ string) client.WorkflowRun {
	return outputRun{id: id, result: investigation.Result{Conclusion: hostile}}
}

func (c *outputClient) Close() {}

func (c *outputClient) OperatorService() operatorservice.OperatorServiceClient {
	return registeredAttributes{}
}

// registeredAttributes is an operator service whose namespace has every
// search attribute the starter sets.
type registeredAttributes struct {
	operatorservice.OperatorServiceClient
}

func (registeredAttributes) ListSearchAttributes(context.Context, *operatorservice.ListSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: map[string]enums.IndexedValueType{
		investigation.SearchAttribute: enums.INDEXED_VALUE_TYPE_KEYWORD, investigation.VerdictAttribute: enums.INDEXED_VALUE_TYPE_KEYWORD,
	}}, nil
}

func (c *outputClient) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, wf any, _ ...any) (client.WorkflowRun, error) {
	if wf == investigation.CatalogWorkflowName {
		return outputRun{id: o.ID, result: []investigation.ToolStatus{{Name: "query_otx", Enabled: true, Description: hostile}, {Name: "x", Reason: hostile}}}, nil
	}
	return outputRun{id: o.ID}, nil
}

func (c *outputClient) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	status := enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	if c.closed {
		status = enums.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-1"}, FirstRunId: "run-1", Status: status,
	}}, nil
}

func (c *outputClient) QueryWorkflow(_ context.Context, _, _, query string, args ...any) (converter.EncodedValue, error) {
	if query == investigation.StatusQuery {
		return encoded{c.st}, nil
	}
	var out []investigation.Event
	for _, e := range c.events {
		if e.Seq > args[0].(int) {
			out = append(out, e)
		}
	}
	return encoded{out}, nil
}

type outputRun struct {
	id     string
	result any
}

func (r outputRun) GetID() string                  { return r.id }
func (r outputRun) GetRunID() string               { return "run-1" }
func (r outputRun) GetFirstExecutionRunID() string { return "run-1" }
func (r outputRun) Get(_ context.Context, v any) error {
	return encoded{r.result}.Get(v)
}
func (r outputRun) GetWithOptions(ctx context.Context, v any, _ client.WorkflowRunGetOptions) error {
	return r.Get(ctx, v)
}

// encoded is a query result or workflow result, as the data converter
// would hand it over (through JSON).
type encoded struct{ v any }

func (e encoded) HasValue() bool { return true }
func (e encoded) Get(v any) error {
	b, err := json.Marshal(e.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// hostileProgress is every kind of event, each carrying hostile text.
func hostileProgress() ([]investigation.Event, investigation.Status) {
	p := plan.Plan{Objective: hostile, Steps: []plan.Step{{ID: "step_1", Description: hostile, Tools: []string{"get_alert"}, Expected: hostile, Status: plan.Done, Note: hostile}}}
	events := []investigation.Event{
		{Seq: 1, Kind: investigation.EventPlan, Plan: &p, Notes: []string{hostile}},
		{Seq: 2, Kind: investigation.EventStep, Step: "step_1", Text: hostile},
		{Seq: 3, Kind: investigation.EventToolCall, Text: hostile},
		{Seq: 4, Kind: investigation.EventToolResult, Text: hostile},
		{Seq: 5, Kind: investigation.EventQuestion, Step: "step_1", Text: hostile, QuestionID: "q-1"},
		{Seq: 6, Kind: investigation.EventStepDone, Text: hostile + "\n" + hostile},
		{Seq: 7, Kind: investigation.EventInsight, Insights: []string{hostile}},
		{Seq: 8, Kind: investigation.EventPlanUpdate, Updates: []string{hostile}, Completed: []string{hostile}, Pending: []string{hostile}},
		{Seq: 9, Kind: investigation.EventNote, Text: hostile},
		{Seq: 10, Kind: investigation.EventConclusion, Text: "## Summary\n" + hostile + "\n\n## Key findings\n- " + hostile, Verdict: &investigation.Verdict{Verdict: "benign", Confidence: "low", Evidence: []investigation.Evidence{{StepID: hostile, Tool: hostile, Fact: hostile}}}},
	}
	st := investigation.Status{Phase: investigation.PhaseIdle, Turn: 1, Request: hostile, Plan: p, Insights: []investigation.Insight{{Turn: 1, Step: "step_1", Text: hostile}}, Verdict: &investigation.Verdict{Verdict: "benign", Confidence: "low", Evidence: []investigation.Evidence{{StepID: "step_1", Fact: hostile}}}, Hints: []string{hostile},
		Questions: []investigation.Question{{ID: "q-1", Step: "step_1", Question: hostile}}, FollowUps: []string{hostile}, StopReason: hostile, LastSeq: 10}
	return events, st
}

// TestTemporalCommandsPrintNoControlCharacters: watch, status (text and
// JSON), tree, the steering acknowledgements, ask and tools print hostile
// text from the workflow without a single control character.
func TestTemporalCommandsPrintNoControlCharacters(t *testing.T) {
	events, st := hostileProgress()
	oc := &outputClient{events: events, st: st}
	withOutput := func() (client.Client, error) { return oc, nil }
	tc := treeClient(treeRun{id: "A", children: []child{{id: "inv/bq-1", request: hostile}}})
	for _, c := range []struct {
		name string
		dial func() (client.Client, error)
		args []string
	}{
		{"status", withOutput, []string{"status", "inv"}},
		{"status --json", withOutput, []string{"status", "inv", "--json"}},
		{"tree", tc.dial, []string{"tree", "inv"}},
		{"hint", func() (client.Client, error) {
			return &fakeClient{ack: investigation.Ack{Seq: 3, Message: hostile}}, nil
		}, []string{"hint", "inv", "x"}},
		{"ask", func() (client.Client, error) {
			return &fakeClient{ack: investigation.Ack{Seq: 3, Message: hostile}}, nil
		}, []string{"ask", "inv", "x", "--detach"}},
		{"tools", withOutput, []string{"tools"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runCLI(t, c.dial, c.args...)
			require.NoError(t, err)
			requireTerminalSafe(t, out)
		})
	}
	t.Run("status --json keeps the text", func(t *testing.T) {
		out, err := runCLI(t, withOutput, "status", "inv", "--json")
		require.NoError(t, err)
		var got investigation.Status
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		require.Equal(t, hostile, got.Request, "JSON output escapes, it does not drop")
	})
	t.Run("watch", func(t *testing.T) {
		closed := &outputClient{events: events, st: st, closed: true}
		out, err := runCLI(t, func() (client.Client, error) { return closed, nil }, "watch", "inv")
		require.NoError(t, err)
		requireTerminalSafe(t, out)
		require.Contains(t, out, "      ## Summary\n      T click red\n      over6n override iso end\n\n      ## Key findings\n      - T click", "Markdown keeps its lines, indented")
	})
	t.Run("watch --json", func(t *testing.T) {
		closed := &outputClient{events: events, st: st, closed: true}
		out, err := runCLI(t, func() (client.Client, error) { return closed, nil }, "watch", "inv", "--json")
		require.NoError(t, err)
		requireTerminalSafe(t, out)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.Len(t, lines, len(events)+1, out)
		for i, e := range events {
			var got investigation.Event
			require.NoError(t, json.Unmarshal([]byte(lines[i]), &got))
			require.Equal(t, e, got, "each event as the workflow recorded it")
		}
		var final map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[len(events)]), &final))
		require.Equal(t, "result", final["kind"])
		require.Equal(t, hostile, final["result"].(map[string]any)["conclusion"])
	})
}

func TestErrorSentenceIsTerminalSafe(t *testing.T) {
	var b strings.Builder
	printError(&b, errors.New("investigation inv refused the hint: "+hostile))
	requireTerminalSafe(t, b.String())
	require.True(t, strings.HasPrefix(b.String(), "error: investigation inv refused the hint: T click"))
}

// TestErrorIsOneLine: a failure text of several lines (a workflow's, a
// model's, errors joined) is printed on one line, and a long one clipped.
func TestErrorIsOneLine(t *testing.T) {
	var b strings.Builder
	printError(&b, errors.New("investigation inv failed: the model said:\n\n  # Heading\n\tdetail one\nmore."))
	require.Equal(t, "error: investigation inv failed: the model said: # Heading; detail one; more.\n", b.String())
	b.Reset()
	printError(&b, errors.New(strings.Repeat("long ", 1000)))
	require.LessOrEqual(t, len(b.String()), len("error: \n")+maxErrorBytes)
	require.Contains(t, b.String(), clip.Marker)
}

// TestAlertImportErrorsAreOneSentence: the files alert import cannot
// import are named in one line.
func TestAlertImportErrorsAreOneSentence(t *testing.T) {
	dir := t.TempDir()
	bad, array := filepath.Join(dir, "bad.json"), filepath.Join(dir, "array.json")
	require.NoError(t, os.WriteFile(bad, []byte("{"), 0o600))
	require.NoError(t, os.WriteFile(array, []byte("[]"), 0o600))
	_, err := runCLI(t, noTemporal, "alert", "import", bad, array)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "\n")
	require.Regexp(t, `^2 alerts were not imported: .*bad\.json: .*; .*array\.json: `, err.Error())
}

// TestFirestoreCommandsPrintNoControlCharacters: alert import, list, show,
// memory list, show, and investigate (its header and progress) print an
// alert whose title and type are hostile without a control character.
func TestFirestoreCommandsPrintNoControlCharacters(t *testing.T) {
	testenv.Firestore(t)
	t.Setenv("GOOGLE_CLOUD_PROJECT", testenv.Project)
	raw, err := json.Marshal(map[string]any{"type": hostile, "title": hostile, "severity": "high", "note": hostile})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "alert.json")
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	al, err := alerts.Parse(raw)
	require.NoError(t, err)

	ctx := testCtx(t)
	fs, err := firestore.NewClient(ctx, testenv.Project)
	require.NoError(t, err)
	t.Cleanup(func() { fs.Close() })
	embedding := make(firestore.Vector32, memory.Dimensions)
	embedding[0] = 1
	_, err = fs.Collection(memory.Collection).Doc("m-1").Set(ctx, memory.Memory{ID: "m-1", Claim: hostile, QueryText: hostile, Embedding: embedding, CreatedAt: time.Now(), UpdatedAt: time.Now()})
	require.NoError(t, err)

	events, st := hostileProgress()
	oc := &outputClient{events: events, st: st}
	for _, args := range [][]string{
		{"alert", "import", file},
		{"alert", "list"},
		{"alert", "show", al.ID},
		{"memory", "list"},
		{"memory", "show", "m-1"},
		{"investigate", "--alert", file},
		{"investigate", "--json", "--alert", file},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			out, err := runCLI(t, func() (client.Client, error) { return oc, nil }, args...)
			require.NoError(t, err)
			requireTerminalSafe(t, out)
			if args[1] == "--json" { // standard output holds JSON only: the header went to standard error
				for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
					require.True(t, json.Valid([]byte(line)), line)
				}
			}
		})
	}
}
