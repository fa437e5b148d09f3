package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/intel"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/modeltest"
	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
	"github.com/secops-agent/investigator/transcript"
)

type memAlerts map[string]alerts.Alert

func (m memAlerts) Get(_ context.Context, id string) (alerts.Alert, error) {
	a, ok := m[id]
	if !ok {
		return a, fmt.Errorf("alert %q: %w", id, alerts.ErrNotFound)
	}
	return a, nil
}

func (m memAlerts) Search(context.Context, alerts.Query) ([]alerts.Alert, error) {
	return []alerts.Alert{m["a1"]}, nil
}

// The model and transcript stand-ins, named as the tests use them.
var (
	text     = modeltest.Text
	userText = modeltest.UserText
)

// untagged writes a prompt's block delimiters without their random tag
// (prompt.Tag), so that assertions can name a block as "<<<DATA alert>>>".
func untagged(s string) string { return taggedDelimiter.ReplaceAllString(s, "$1") }

var taggedDelimiter = regexp.MustCompile(`(<<<DATA|<<<END|` + "`<<<DATA|`<<<END" + `) [0-9a-f]{12}`)

func newActivities(t *testing.T, answers ...*genai.GenerateContentResponse) (*Activities, *modeltest.LLM, *modeltest.Transcript) {
	t.Helper()
	store := memAlerts{"a1": {ID: "a1", Source: "guardduty", Type: "UnauthorizedAccess:EC2/SSHBruteForce", Severity: "low", Title: "SSH brute force",
		ObservedAt: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC), Data: map[string]any{"type": "UnauthorizedAccess:EC2/SSHBruteForce", "ip": "198.51.100.23"}}}
	reg, err := tools.NewRegistry(tools.NewSearchAlerts(store), tools.NewGetAlert(store))
	require.NoError(t, err)
	llm := modeltest.New(answers...)
	ts := modeltest.NewTranscript()
	return &Activities{Model: &Model{LLM: llm, Name: "m", Transcript: ts}, Tools: reg, Alerts: store}, llm, ts
}

func TestSchemasLoad(t *testing.T) {
	require.Equal(t, genai.TypeObject, planSchema.Type)
	require.Equal(t, []string{"id", "description", "tools", "expected", "depends_on"}, planSchema.Properties["steps"].Items.Required)
	require.Equal(t, []string{"add_step", "update_step", "cancel_step"}, reflectSchema.Properties["plan_updates"].Items.Properties["type"].Enum)
	require.Equal(t, investigation.Verdicts, concludeSchema.Properties["verdict"].Enum)
	var example plan.Plan
	require.NoError(t, json.Unmarshal([]byte(planExample), &example), "the plan example must match the plan type")
	require.NotEmpty(t, example.Steps)
}

func TestGeneratePlanPrompt(t *testing.T) {
	a, llm, _ := newActivities(t, text(`{"objective":"o","steps":[{"id":"x","description":"read","tools":["get_alert","nmap"],"expected":"e"}]}`))
	out, err := a.GeneratePlan(context.Background(), PlanInput{AlertID: "a1", Request: "Was it bad?", MaxSteps: 5,
		History: []investigation.Message{{Role: "user", Text: "earlier question"}}})
	require.NoError(t, err)
	require.Equal(t, "step_1", out.Plan.Steps[0].ID)
	require.Equal(t, []string{"get_alert"}, out.Plan.Steps[0].Tools)
	require.Equal(t, []string{"step x: removed unknown tools nmap"}, out.Notes)
	require.Equal(t, []toolcall.Tool{{Name: "get_alert", Kind: toolcall.LocalActivity}, {Name: "search_alerts", Kind: toolcall.LocalActivity}}, out.Tools)
	require.Equal(t, 1, out.Usage.Calls)

	c := llm.Calls[0]
	require.Nil(t, c.Cfg.Tools, "planning does not use function calling")
	require.Equal(t, "application/json", c.Cfg.ResponseMIMEType)
	require.Same(t, planSchema, c.Cfg.ResponseSchema)
	system, prompt := untagged(userText(c.Cfg.SystemInstruction)), untagged(userText(c.Contents[0]))
	for _, want := range []string{"At most 5 steps", `"objective": "Decide whether the SSH brute force`, "<<<DATA name>>>"} {
		require.Contains(t, system, want)
	}
	for _, want := range []string{`"Was it bad?"`, "UnauthorizedAccess:EC2/SSHBruteForce", "198.51.100.23", "- `search_alerts`:", "parameters: field, indicator",
		"<<<DATA conversation>>>\n| [user]\n| earlier question\n<<<END conversation>>>"} {
		require.Contains(t, prompt, want)
	}
}

func TestGeneratePlanReasksOnceThenGivesUp(t *testing.T) {
	a, llm, _ := newActivities(t, text("not json"), text(`{"objective":"o","steps":[{"id":"1","description":"d","tools":["get_alert"]}]}`))
	out, err := a.GeneratePlan(context.Background(), PlanInput{AlertID: "a1", MaxSteps: 5})
	require.NoError(t, err)
	require.Len(t, out.Plan.Steps, 1)
	require.Equal(t, 2, out.Usage.Calls)
	require.Len(t, llm.Calls[1].Contents, 3, "the re-ask carries the bad answer and the problem")
	require.Contains(t, userText(llm.Calls[1].Contents[2]), "not valid JSON")

	a, _, _ = newActivities(t, text(`{"objective":"o","steps":[{"description":"d","tools":["nmap"]}]}`), text(`{"objective":"o","steps":[]}`))
	_, err = a.GeneratePlan(context.Background(), PlanInput{AlertID: "a1", MaxSteps: 5})
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.True(t, app.NonRetryable())
	require.Equal(t, ErrMalformedOutput, app.Type())
	require.Contains(t, app.Message(), "no executable steps")
}

func TestGeneratePlanUnknownAlert(t *testing.T) {
	a, _, _ := newActivities(t)
	_, err := a.GeneratePlan(context.Background(), PlanInput{AlertID: "nope"})
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, ErrAlertNotFound, app.Type())
	require.True(t, app.NonRetryable())
}

func TestModelTurnRebuildsTranscript(t *testing.T) {
	call := &genai.GenerateContentResponse{Candidates: []*genai.Candidate{{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{
		{Text: "thinking", Thought: true},
		{FunctionCall: &genai.FunctionCall{Name: "get_alert", Args: map[string]any{"id": "a1"}}, ThoughtSignature: []byte("sig")},
		{FunctionCall: &genai.FunctionCall{Name: "search_alerts", Args: map[string]any{"field": "ip", "op": "==", "value": "198.51.100.23"}}},
	}}}}}
	a, llm, ts := newActivities(t, call, text("IP seen before."))
	ts.M["s/t1-step_1-i1"] = transcript.Entry{Kind: transcript.KindModel, Text: "Alert read: SSH from 198.51.100.23."}
	ctx := context.Background()
	step := plan.Step{ID: "step_2", Description: "Look for history", Tools: []string{"search_alerts", "get_alert"}, Expected: "past alerts"}
	earlier := []StepRef{{StepID: "step_1", Description: "Read", Key: "t1-step_1-i1"}}

	out, err := a.ModelTurn(ctx, TurnInput{Session: "s", Key: "t1-step_2-i1", AlertID: "a1", Objective: "obj", Step: step, Earlier: earlier})
	require.NoError(t, err)
	require.Empty(t, out.Text, "thought text is not the answer")
	require.Len(t, out.Calls, 2)
	require.Equal(t, "get_alert", out.Calls[0].Name)

	first := llm.Calls[0]
	sys, opening := untagged(userText(first.Cfg.SystemInstruction)), untagged(userText(first.Contents[0]))
	require.NotContains(t, sys, "obj", "the planner's objective stays out of the system instruction")
	require.NotContains(t, sys, "198.51.100.23", "untrusted data stays out of the system instruction")
	for _, want := range []string{"Alert ID: a1", "<<<DATA alert type and title>>>\n| Type: UnauthorizedAccess:EC2/SSHBruteForce\n| Title: SSH brute force\n<<<END alert type and title>>>",
		"<<<DATA result of step_1>>>\n| Asked: Read\n| \n| Alert read: SSH from 198.51.100.23.\n<<<END result of step_1>>>",
		"## Execute this step\nstep_2\n<<<DATA step to execute>>>\n| Objective of the investigation: obj\n| Step step_2: Look for history\n| Expected outcome: past alerts\n<<<END step to execute>>>"} {
		require.Contains(t, opening, want)
	}
	require.NotContains(t, sys, "limit of model turns")
	// The workflow refuses a ref: in these calls (planPipeline's takesRefs,
	// gateAction): the prompt that offers refs says so.
	require.Contains(t, sys, "with the value filled in. Only lookups take `ref:` values: a call of `ask_user`, of `bigquery_agent` or of a tool that changes something (an action the analyst approves) with one is refused")
	var names []string
	for _, d := range first.Cfg.Tools[0].FunctionDeclarations {
		names = append(names, d.Name)
		// So does every declaration's ref_id, which the direct answer's
		// prompt points to.
		require.Contains(t, d.Parameters.Properties["ref_id"].Description, "Only lookups take such a value: ask_user, bigquery_agent and tools that change something refuse it.")
	}
	require.Equal(t, []string{"search_alerts", "get_alert"}, names, "only the step's tools are declared")

	// Run the two calls: one succeeds, one failed for good and is inlined.
	t1, err := a.CallTool(ctx, ToolInput{Session: "s", Key: "t1-step_2-i1-c1", Call: toolcall.Call{ID: "c1", Name: "get_alert", Args: map[string]any{"id": "a1"}}, MaxResultBytes: 4096})
	require.NoError(t, err)
	require.True(t, t1.OK)

	_, err = a.ModelTurn(ctx, TurnInput{Session: "s", Key: "t1-step_2-i2", AlertID: "a1", Objective: "obj", Step: step, Earlier: earlier, Final: true,
		Transcript: []Ref{{Key: "t1-step_2-i1"}, {Key: t1.Key}, {CallID: "c2", Tool: "search_alerts", Error: "the tool failed after retries: boom"}}})
	require.NoError(t, err)
	second := llm.Calls[1]
	require.Len(t, second.Contents, 3, "request, model turn, one content with both responses")
	model := second.Contents[1]
	require.Equal(t, genai.RoleModel, model.Role)
	require.Equal(t, []byte("sig"), model.Parts[1].ThoughtSignature, "thought signatures go back unchanged")
	resp := second.Contents[2]
	require.Len(t, resp.Parts, 2)
	require.Equal(t, "get_alert", resp.Parts[0].FunctionResponse.Name)
	require.Equal(t, "c1", resp.Parts[0].FunctionResponse.ID)
	require.Equal(t, "a1", resp.Parts[0].FunctionResponse.Response["id"])
	require.Equal(t, "search_alerts", resp.Parts[1].FunctionResponse.Name)
	require.Equal(t, "the tool failed after retries: boom", resp.Parts[1].FunctionResponse.Response["error"])
	require.Equal(t, genai.FunctionCallingConfigModeNone, second.Cfg.ToolConfig.FunctionCallingConfig.Mode, "the final turn cannot call tools")
	require.Contains(t, userText(second.Cfg.SystemInstruction), "limit of model turns")
	require.Equal(t, "IP seen before.", entryText(ts.M["s/t1-step_2-i2"]))
	require.Equal(t, "IP seen before.", ts.M["s/t1-step_2-i2"].Text, "a worker of the previous build reads Text")
}

// An empty answer for a reason a new sample may not meet (OTHER) is
// retried; a refusal is not (TestRefusedAnswerIsNotRetried).
func TestModelTurnEmptyAnswerIsRetryable(t *testing.T) {
	a, _, _ := newActivities(t, &genai.GenerateContentResponse{Candidates: []*genai.Candidate{{FinishReason: genai.FinishReasonOther}}})
	_, err := a.ModelTurn(context.Background(), TurnInput{Session: "s", Key: "k", AlertID: "a1", Step: plan.Step{ID: "step_1"}})
	require.ErrorContains(t, err, "no usable content")
	var app *temporal.ApplicationError
	require.False(t, errors.As(err, &app) && app.NonRetryable())
}

func TestCallToolShapesResults(t *testing.T) {
	a, _, ts := newActivities(t)
	ctx := context.Background()

	out, err := a.CallTool(ctx, ToolInput{Session: "s", Key: "k1", Call: toolcall.Call{ID: "c", Name: "nmap"}, MaxResultBytes: 100})
	require.NoError(t, err)
	require.False(t, out.OK)
	require.Contains(t, out.Error, `unknown tool "nmap"; available tools: get_alert, search_alerts`)
	require.JSONEq(t, `{"error":"unknown tool \"nmap\"; available tools: get_alert, search_alerts"}`, ts.M["s/k1"].Response)

	out, err = a.CallTool(ctx, ToolInput{Session: "s", Key: "k2", Call: toolcall.Call{Name: "search_alerts", Args: map[string]any{"field": "ip", "op": "==", "value": "x", "limit": 500.0}}, MaxResultBytes: 100})
	require.NoError(t, err)
	require.False(t, out.OK, "bad arguments are the model's to fix")
	require.Contains(t, out.Error, `"limit" must be a whole number from 1 to 100`)

	out, err = a.CallTool(ctx, ToolInput{Session: "s", Key: "k3", Call: toolcall.Call{Name: "get_alert", Args: map[string]any{"id": "a1"}}, MaxResultBytes: 400})
	require.NoError(t, err)
	require.True(t, out.OK)
	require.False(t, out.Truncated)
	require.Contains(t, ts.M["s/k3"].Response, "198.51.100.23")

	out, err = a.CallTool(ctx, ToolInput{Session: "s", Key: "k4", Call: toolcall.Call{Name: "get_alert", Args: map[string]any{"id": "a1"}}, MaxResultBytes: 200})
	require.NoError(t, err)
	require.True(t, out.Truncated)
	var cut map[string]any
	require.NoError(t, json.Unmarshal([]byte(ts.M["s/k4"].Response), &cut))
	require.Equal(t, true, cut["truncated"])
	require.Contains(t, cut["note"], "narrow the query")
	require.LessOrEqual(t, len(ts.M["s/k4"].Response), 200+300, "the stored result stays near the cap")
}

func TestReflectAndConcludePrompts(t *testing.T) {
	a, llm, ts := newActivities(t,
		text(`{"insights":["x"],"plan_updates":[{"type":"cancel_step","step_id":"step_3","reason":"done"}],"achieved":true}`),
		text(`{"report":"## Summary\n...","evidence":[{"step_id":"step_1","tool":"get_alert","fact":"f"}],"reason":"r","verdict":"true_positive","confidence":"medium"}`))
	ts.M["s/k2"] = transcript.Entry{Kind: transcript.KindModel, Text: "found 3 alerts"}
	ts.M["s/k1"] = transcript.Entry{Kind: transcript.KindModel, Text: "read the alert"}
	ctx := context.Background()
	r, err := a.Reflect(ctx, ReflectInput{
		Session:   "s",
		Objective: "obj",
		Step:      plan.Step{ID: "step_2", Description: "look", Expected: "e", ResultKey: "k2"},
		Completed: []plan.Step{{ID: "step_1", Description: "read", ResultKey: "k1"}},
		Pending:   []plan.Step{{ID: "step_3", Description: "assess", Tools: []string{"get_alert"}}},
		Insights:  []investigation.Insight{{Turn: 2, Step: "step_1", Text: "new fact"}},
		Earlier:   []investigation.Insight{{Turn: 1, Step: "step_1", Text: "old fact"}},
		Steps:     3, MaxSteps: 5,
		Tools: []string{"get_alert", "search_alerts"},
	})
	require.NoError(t, err)
	require.True(t, r.Achieved)
	require.Equal(t, plan.CancelStep, r.PlanUpdates[0].Type)
	p := untagged(userText(llm.Calls[0].Contents[0]))
	for _, want := range []string{"<<<DATA plan>>>\n| Objective: obj\n| Just finished:\n| - step_2 (pending): look [tools: ]\n|   expected: e\n| Completed:\n| - step_1 (pending): read [tools: ]",
		"| Pending:\n| - step_3 (pending): assess [tools: get_alert]\n<<<END plan>>>", "## The step just finished: step_2\n<<<DATA result of step_2>>>\n| found 3 alerts",
		"## Results of the completed steps\n<<<DATA result of step_1>>>\n| read the alert", "get_alert, search_alerts", "<<<DATA insights of this exchange>>>\n| - new fact (step_1)",
		"<<<DATA insights of earlier exchanges>>>\n| - old fact (step_1)", "The plan holds 3 steps (cancelled ones included) of at most 5: at most 2 more can be added"} {
		require.Contains(t, p, want)
	}
	require.Same(t, reflectSchema, llm.Calls[0].Cfg.ResponseSchema)

	c, err := a.Conclude(ctx, ConcludeInput{Session: "s", AlertID: "a1", Request: "q?", Objective: "obj", Language: "ja",
		Steps:    []plan.Step{{ID: "step_1", Description: "read", Status: plan.Done, ResultKey: "k1"}, {ID: "step_2", Description: "x", Status: plan.Skipped, Note: "achieved"}},
		Insights: []investigation.Insight{{Turn: 1, Step: "step_1", Text: "i1"}}, EndedEarly: "the step cap of 2 was reached",
		Verdict: VerdictContext{Turn: 1, Ran: []investigation.StepRun{{Turn: 1, Step: "step_1", Tools: []string{"get_alert"}}}}})
	require.NoError(t, err)
	require.Equal(t, "## Summary\n...", c.Markdown)
	require.Equal(t, &investigation.Verdict{Verdict: "true_positive", Confidence: "medium", Reason: "r", Evidence: []investigation.Evidence{{StepID: "step_1", Tool: "get_alert", Fact: "f"}}}, c.Verdict)
	require.Same(t, concludeSchema, llm.Calls[1].Cfg.ResponseSchema)
	sys, p := untagged(userText(llm.Calls[1].Cfg.SystemInstruction)), untagged(userText(llm.Calls[1].Contents[0]))
	for _, want := range []string{"Markdown in Japanese", "## 推奨される対応", "do not wrap it in a code fence", `"fact": "1,204 回の失敗の後`} {
		require.Contains(t, sys, want)
	}
	require.NotContains(t, sys, "## Recommended actions", "a Japanese conclusion is shown Japanese headings and a Japanese example")
	for _, want := range []string{`"q?"`, "<<<DATA plan>>>\n| Objective: obj\n| - step_1 (done): read [tools: ]\n| - step_2 (skipped): x [tools: ] (achieved)\n<<<END plan>>>",
		"<<<DATA result of step_1>>>\n| read the alert", "| - i1 (step_1)", `"the step cap of 2 was reached"`, "- `step_1`: tools get_alert (this exchange)"} {
		require.Contains(t, p, want)
	}
}

// echoTool returns its arguments, to show what a tool receives.
type echoTool struct{}

func (echoTool) Purpose() string { return "test tool" }

func (echoTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: "echo"}
}
func (echoTool) Call(_ context.Context, args map[string]any) (any, error) {
	return map[string]any{"got": args}, nil
}

func TestCallToolResolvesRefs(t *testing.T) {
	a, _, ts := newActivities(t)
	reg, err := tools.NewRegistry(echoTool{})
	require.NoError(t, err)
	a.Tools = reg
	ctx := context.Background()
	ts.M["s/k-search"] = transcript.Entry{Kind: transcript.KindTool, Response: `{"results":[{"uuid":"u-1","ip":"198.51.100.23"}],"total":1}`}
	ts.M["s/k-failed"] = transcript.Entry{Kind: transcript.KindTool, Response: `{"error":"API key rejected by VirusTotal (HTTP 401)"}`}

	n := 0
	call := func(args map[string]any, refs map[string]string) (ToolOutput, transcript.Entry) {
		n++ // each call its own key, as the workflow gives them
		key := fmt.Sprintf("k-out-%d", n)
		out, err := a.CallTool(ctx, ToolInput{Session: "s", Key: key, Call: toolcall.Call{ID: "c", Name: "echo", Args: args}, MaxResultBytes: 4096, Refs: refs})
		require.NoError(t, err)
		return out, ts.M["s/"+key]
	}
	out, e := call(map[string]any{"ref_id": "mine", "uuid": "ref:s1.results.0.uuid", "all": "ref:s1", "list": []any{"ref:s1.total", "x"}}, map[string]string{"s1": "k-search"})
	require.True(t, out.OK, out.Error)
	require.JSONEq(t, `{"got":{"uuid":"u-1","all":{"results":[{"uuid":"u-1","ip":"198.51.100.23"}],"total":1},"list":[1,"x"]}}`, e.Response, "ref_id is stripped, refs are filled in")

	for _, c := range []struct {
		args map[string]any
		refs map[string]string
		want string
	}{
		{map[string]any{"v": "ref:s1.results.3.uuid"}, map[string]string{"s1": "k-search"}, `"3" is not an index of a list of 1`},
		{map[string]any{"v": "ref:s1.nope"}, map[string]string{"s1": "k-search"}, `the result has no field "nope"`},
		{map[string]any{"v": "ref:vt"}, map[string]string{"vt": "k-failed"}, "ref:vt refers to a call that failed: API key rejected by VirusTotal"},
	} {
		out, _ := call(c.args, c.refs)
		require.False(t, out.OK)
		require.Contains(t, out.Error, c.want)
	}
}

// One short call naming the same result thousands of times would hand
// the tool thousands of copies (a model turn may be 850 KiB, the result
// 16 KiB): what the refs fill in is bounded, and the call is refused
// before the tool runs; a few refs to the same result still work.
func TestCallToolBoundsWhatRefsFillIn(t *testing.T) {
	a, _, ts := newActivities(t)
	var got []int
	reg, err := tools.NewRegistry(sizeTool{&got})
	require.NoError(t, err)
	a.Tools = reg
	ts.M["s/k-big"] = transcript.Entry{Kind: transcript.KindTool, Response: `{"blob":"` + strings.Repeat("x", 16<<10) + `"}`}
	for _, c := range []struct {
		ref string
		n   int
		ok  bool
	}{
		{"ref:s1", 3, true},
		{"ref:s1", 2000, false},
		{"ref:s1.blob", 2000, false},
	} {
		list := make([]any, c.n)
		for i := range list {
			list[i] = c.ref
		}
		got = nil
		out, err := a.CallTool(context.Background(), ToolInput{Session: "s", Key: fmt.Sprintf("k-%s-%d", c.ref, c.n), MaxResultBytes: 4096,
			Call: toolcall.Call{ID: "c2", Name: "size", Args: map[string]any{"v": list}}, Refs: map[string]string{"s1": "k-big"}})
		require.NoError(t, err, "not retried")
		require.Equal(t, c.ok, out.OK, "%s ×%d: %s", c.ref, c.n, out.Error)
		if !c.ok {
			require.Empty(t, got, "%s ×%d: the tool never ran", c.ref, c.n)
			require.Contains(t, out.Error, "would make its arguments larger than")
		}
	}
}

// sizeTool records how large its arguments were.
type sizeTool struct{ got *[]int }

func (sizeTool) Name() string    { return "size" }
func (sizeTool) Purpose() string { return "test tool" }
func (sizeTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: "size"}
}
func (s sizeTool) Call(_ context.Context, args map[string]any) (any, error) {
	raw, _ := json.Marshal(args)
	*s.got = append(*s.got, len(raw))
	return map[string]any{"bytes": len(raw)}, nil
}

// A ref to the analyst's answer (kept inline by the workflow) resolves
// like one to a stored result, beside it.
func TestCallToolResolvesInlineRefs(t *testing.T) {
	a, _, ts := newActivities(t)
	reg, err := tools.NewRegistry(echoTool{})
	require.NoError(t, err)
	a.Tools = reg
	ts.M["s/k-search"] = transcript.Entry{Kind: transcript.KindTool, Response: `{"total":1}`}
	out, err := a.CallTool(context.Background(), ToolInput{Session: "s", Key: "k-out", MaxResultBytes: 4096,
		Call:       toolcall.Call{ID: "c3", Name: "echo", Args: map[string]any{"host": "ref:c1.answer", "n": "ref:s1.total", "all": "ref:c1"}},
		Refs:       map[string]string{"s1": "k-search"},
		InlineRefs: map[string]string{"c1": `{"answer":"web-01"}`}})
	require.NoError(t, err)
	require.True(t, out.OK, out.Error)
	require.JSONEq(t, `{"got":{"host":"web-01","n":1,"all":{"answer":"web-01"}}}`, ts.M["s/k-out"].Response)
}

// A ref to a result the workflow kept inline (an ask_user answer, an
// action that did not run) has no transcript key. An input that names it by
// the empty key (one scheduled before the workflow carried such results
// inline) is refused at once with one sentence: the store is not asked, the
// call is not retried, and the model is not told to call the tool again.
func TestCallToolRefusesARefWithoutAKey(t *testing.T) {
	a, _, _ := newActivities(t)
	reg, err := tools.NewRegistry(echoTool{})
	require.NoError(t, err)
	a.Tools = reg
	out, err := a.CallTool(context.Background(), ToolInput{Session: "s", Key: "k-out", MaxResultBytes: 4096,
		Call: toolcall.Call{ID: "c2", Name: "echo", Args: map[string]any{"host": "ref:c1.answer"}}, Refs: map[string]string{"c1": ""}})
	require.NoError(t, err, "not retried")
	require.False(t, out.OK)
	require.Equal(t, "ref:c1 names a result that is not stored: write the value itself", out.Error)
}

func TestDeclarationsOfferRefID(t *testing.T) {
	a, _, _ := newActivities(t)
	decls := a.Tools.Declarations([]string{"get_alert"})
	require.Contains(t, decls[0].Parameters.Properties, toolcall.RefIDArg)
	orig, _ := a.Tools.Lookup("get_alert")
	require.NotContains(t, orig.Declaration().Parameters.Properties, toolcall.RefIDArg, "the tool's own declaration is not modified")
}

func TestResultsKeepHTMLCharacters(t *testing.T) {
	m, n, cut, err := shape(map[string]any{"verdict": ">= 75 & <b>"}, 1000)
	require.NoError(t, err)
	require.False(t, cut)
	require.Equal(t, len(`{"verdict":">= 75 & <b>"}`), n, "sizes count the bytes as written, not \\u003e escapes")
	require.Equal(t, ">= 75 & <b>", m["verdict"])
}

type limitedTool struct{}

func (limitedTool) Purpose() string { return "test tool" }

func (limitedTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: "limited"}
}
func (limitedTool) Call(context.Context, map[string]any) (any, error) {
	return nil, &upstream.Error{Service: "VirusTotal", Kind: upstream.RateLimited, Status: http.StatusTooManyRequests,
		RetryAfter: 7 * time.Second, Message: "VirusTotal rate limit reached (HTTP 429)"}
}

func TestCallToolKeepsProviderRetryDelay(t *testing.T) {
	a, _, ts := newActivities(t)
	reg, err := tools.NewRegistry(limitedTool{})
	require.NoError(t, err)
	a.Tools = reg
	_, err = a.CallTool(context.Background(), ToolInput{Session: "s", Key: "k", Call: toolcall.Call{Name: "limited"}, MaxResultBytes: 100})
	app, ok := err.(*temporal.ApplicationError)
	require.True(t, ok, "returned unwrapped, so Temporal reads its retry delay: %T", err)
	require.Equal(t, 7*time.Second, app.NextRetryDelay())
	require.False(t, app.NonRetryable())
	require.Equal(t, ErrIntelRateLimited, app.Type())
	require.Equal(t, "VirusTotal rate limit reached (HTTP 429)", app.Message())
	require.NotContains(t, ts.M, "s/k", "nothing is stored for a call that will be retried")
}

// A stale attempt whose result reaches the store second gets the stored
// result described back, so history says what the model will read.
func TestCallToolDescribesTheStoredResult(t *testing.T) {
	a, _, ts := newActivities(t)
	ctx := context.Background()
	ts.M["s/k1"] = transcript.Entry{Kind: transcript.KindTool, Tool: "get_alert", Response: `{"found":false,"note":"stored first"}`}
	out, err := a.CallTool(ctx, ToolInput{Session: "s", Key: "k1", Call: toolcall.Call{Name: "get_alert", Args: map[string]any{"id": "a1"}}, MaxResultBytes: 4000})
	require.NoError(t, err)
	require.True(t, out.OK)
	require.Equal(t, `{"found":false,"note":"stored first"}`, out.Preview)
	require.Equal(t, len(`{"found":false,"note":"stored first"}`), out.Bytes)
	require.Equal(t, `{"found":false,"note":"stored first"}`, ts.M["s/k1"].Response, "the first write stays")

	ts.M["s/k2"] = transcript.Entry{Kind: transcript.KindTool, Tool: "get_alert", Response: `{"error":"alert a1 not found"}`}
	out, err = a.CallTool(ctx, ToolInput{Session: "s", Key: "k2", Call: toolcall.Call{Name: "get_alert", Args: map[string]any{"id": "a1"}}, MaxResultBytes: 4000})
	require.NoError(t, err)
	require.False(t, out.OK)
	require.Equal(t, "alert a1 not found", out.Error)
	require.Empty(t, out.Preview)
}

// refuseTool refuses with a message quoting its whole argument, as an MCP
// server or a careless tool may.
type refuseTool struct{}

func (refuseTool) Purpose() string { return "test tool" }

func (refuseTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: "refuse"}
}
func (refuseTool) Call(_ context.Context, args map[string]any) (any, error) {
	return nil, tools.Reject("bad value %q", args["v"])
}

// A refusal quoting a huge argument is held to the result limit, in the
// stored result and in ToolOutput.Error (history): a 200 KiB indicator
// gave a 204,884-byte error. Control characters, which JSON escapes to six
// bytes, count as escaped.
func TestCallToolBoundsErrors(t *testing.T) {
	on, _ := intel.Tools(intel.Config{OTX: intel.Provider{APIKey: "k"}, AbuseIPDB: intel.Provider{APIKey: "k"}}, nil)
	reg, err := tools.NewRegistry(append(on, refuseTool{})...)
	require.NoError(t, err)
	a, _, ts := newActivities(t)
	a.Tools = reg
	big := strings.Repeat("A", 200<<10)
	const limit = 4 << 10
	for i, c := range []toolcall.Call{
		{ID: "c1", Name: "query_otx", Args: map[string]any{"indicator": big, "indicator_type": "domain"}},
		{ID: "c2", Name: "abuseipdb_check", Args: map[string]any{"ip": big}},
		{ID: "c3", Name: "query_otx", Args: map[string]any{"indicator": "x.example.com", "indicator_type": big}},
		{ID: "c4", Name: "refuse", Args: map[string]any{"v": big}},
		{ID: "c5", Name: "refuse", Args: map[string]any{"v": strings.Repeat("\x01", 50<<10)}},
		{ID: "c6", Name: big},
	} {
		key := fmt.Sprintf("k%d", i)
		out, err := a.CallTool(context.Background(), ToolInput{Session: "s", Key: key, Call: c, MaxResultBytes: limit})
		require.NoError(t, err)
		require.False(t, out.OK)
		require.LessOrEqual(t, len(ts.M["s/"+key].Response), limit, "%s: stored error", c.ID)
		require.LessOrEqual(t, len(out.Error), limit, "%s: ToolOutput.Error", c.ID)
		var m map[string]string
		require.NoError(t, json.Unmarshal([]byte(ts.M["s/"+key].Response), &m), "%s: still an error object", c.ID)
		require.Equal(t, out.Error, m["error"])
	}
}

// A follow-up that continues the plan is told how to build on it, and the
// planner's new steps keep their dependencies on the plan's finished steps.
func TestContinuedPlanBuildsOnTheActivePlan(t *testing.T) {
	a, llm, _ := newActivities(t, text(`{"objective":"o","continues_active_plan":true,"steps":[`+
		`{"id":"step_4","description":"Check the bastion","tools":["search_alerts"],"expected":"e","depends_on":["step_2"]},`+
		`{"id":"step_5","description":"Weigh","tools":[],"expected":"e","depends_on":["step_4","step_1"]}]}`))
	active := &plan.Plan{Objective: "o", Steps: []plan.Step{{ID: "step_1", Status: plan.Done, ResultKey: "k1"}, {ID: "step_2", Status: plan.Done, ResultKey: "k2"},
		{ID: "step_3", Status: plan.Skipped}}}
	out, err := a.GeneratePlan(context.Background(), PlanInput{AlertID: "a1", Request: "And the bastion?", MaxSteps: 5, ActivePlan: active})
	require.NoError(t, err)
	require.True(t, out.Continues)
	require.Equal(t, "step_4", out.Plan.Steps[0].ID, "new steps follow the active plan's")
	require.Equal(t, []string{"step_2"}, out.Plan.Steps[0].DependsOn, "a dependency on a step of the active plan stays")
	require.Equal(t, []string{"step_4", "step_1"}, out.Plan.Steps[1].DependsOn)
	p := untagged(userText(llm.Calls[0].Contents[0]))
	require.Contains(t, p, "numbered from `step_4`. A new step that needs the result of a finished step above names it in `depends_on` and is given that result")
}

// An inline result (an action the analyst did not approve, the analyst's
// answer) reaches the model as exactly its JSON: no "error" field beside
// it, which read as a failed call ("response.block_ip failed: ").
func TestInlineResultsCarryNoEmptyError(t *testing.T) {
	a, llm, _ := newActivities(t, text("Noted."))
	_, err := a.ModelTurn(context.Background(), TurnInput{Session: "s", Key: "t1-step_1-i2", AlertID: "a1", Step: plan.Step{ID: "step_1"},
		Transcript: []Ref{{CallID: "c1", Tool: "response.block_ip", Inline: `{"performed":false,"outcome":"expired","reason":"no decision within 5s"}`},
			{CallID: "c2", Tool: "search_alerts", Error: "the tool failed after retries: boom"}}})
	require.NoError(t, err)
	parts := llm.Calls[0].Contents[1].Parts
	require.Len(t, parts, 2)
	require.Equal(t, map[string]any{"performed": false, "outcome": "expired", "reason": "no decision within 5s"}, parts[0].FunctionResponse.Response)
	require.Equal(t, map[string]any{"error": "the tool failed after retries: boom"}, parts[1].FunctionResponse.Response)
}

// A log row can get the reflection to write one huge insight, or hundreds:
// what it returns holds at most MaxReflectionInsights, each clipped.
func TestReflectBoundsInsights(t *testing.T) {
	many := []string{strings.Repeat("x", 40<<10), "  ", "short"}
	for i := range 30 {
		many = append(many, fmt.Sprintf("fact %d", i))
	}
	raw, err := json.Marshal(map[string]any{"insights": many, "plan_updates": []any{}, "achieved": false})
	require.NoError(t, err)
	a, _, ts := newActivities(t, text(string(raw)))
	ts.M["s/k1"] = transcript.Entry{Kind: transcript.KindModel, Text: "read the alert"}
	r, err := a.Reflect(context.Background(), ReflectInput{Session: "s", Objective: "obj",
		Step: plan.Step{ID: "step_1", Description: "read", ResultKey: "k1"}, Steps: 1, MaxSteps: 5})
	require.NoError(t, err)
	require.Len(t, r.Insights, MaxReflectionInsights)
	require.LessOrEqual(t, len(r.Insights[0]), MaxInsightBytes)
	require.True(t, clip.Clipped(r.Insights[0]), "the long insight is clipped with the mark")
	require.Equal(t, "short", r.Insights[1], "an empty insight is left out")
	require.Equal(t, "fact 7", r.Insights[9])
}
