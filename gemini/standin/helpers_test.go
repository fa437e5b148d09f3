package standin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

// The project's own prompt templates, rendered here as the activities
// render them, so the tests see what the stand-in sees.
var (
	agentPrompts = prompt.Load(os.DirFS("../../activities"), "prompts")
	subPrompts   = prompt.Load(os.DirFS("../../activities/bigquery"), "prompts")
	// tag marks the blocks of every prompt these tests render (the
	// activities draw one per prompt).
	tag = prompt.NewTag()
)

const (
	guardDutyFile = "../../examples/alerts/guardduty-ssh-bruteforce.json"
	sccFile       = "../../examples/alerts/scc-cryptominer.json"
	bastionFile   = "../../examples/alerts/history/guardduty-ssh-bruteforce-bastion-01.json"
)

func readAlert(t *testing.T, path string) alerts.Alert {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	al, err := alerts.Parse(raw)
	require.NoError(t, err)
	return al
}

// alertSection renders an alert as activities/alert.go does: the header,
// then the whole data as the "alert" block.
func alertSection(t *testing.T, al alerts.Alert) string {
	t.Helper()
	block, err := tag.JSONBlock("alert", al.Data)
	require.NoError(t, err)
	return header(al) + "The alert's data, whole:\n" + block
}

// largeAlertSection renders an alert as activities/alert.go does one too
// large to show whole: its indicators, one per line, and a field guide.
func largeAlertSection(al alerts.Alert) string {
	var lines string
	for i, in := range alerts.Indicators(al.Data) {
		if i > 0 {
			lines += "\n"
		}
		lines += in.String()
	}
	return header(al) + "The alert's data is too large to show whole; call get_alert.\n" +
		tag.Block("alert indicators", lines) + "\n" + tag.Block("alert fields", alerts.Describe(al, 80))
}

func header(al alerts.Alert) string {
	return fmt.Sprintf("%s%s\nSource: %s | severity: %s | observed: %s\n%s\n",
		prompt.AlertIDLabel, al.ID, al.Source, al.Severity, al.ObservedAt.Format(time.RFC3339),
		tag.Block("alert type and title", "Type: "+al.Type+"\nTitle: "+al.Title))
}

// fakeTool stands for a tool whose real constructor needs a service.
type fakeTool struct{ name, param string }

func (f fakeTool) Purpose() string { return "Stands in for " + f.name + "." }
func (f fakeTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{Name: f.name, Parameters: &genai.Schema{Type: genai.TypeObject,
		Properties: map[string]*genai.Schema{f.param: {Type: genai.TypeString}}, Required: []string{f.param}}}
}
func (fakeTool) Call(context.Context, map[string]any) (any, error) { return nil, nil }

// registry holds the investigation's tools: the real alert tools and
// ask_user, and stand-ins for bigquery_agent and a threat-intel tool.
func registry(t *testing.T, withBigQuery bool) *tools.Registry {
	t.Helper()
	ts := []tools.Tool{tools.NewGetAlert(nil), tools.NewSearchAlerts(nil), tools.NewAskUser(), fakeTool{"query_otx", "indicator"}}
	if withBigQuery {
		ts = append(ts, fakeTool{toolcall.BigQueryAgent, "request"})
	}
	reg, err := tools.NewRegistry(ts...)
	require.NoError(t, err)
	return reg
}

// harness sends requests through the real genai client to a geminitest
// server that answers with the stand-in.
type harness struct {
	t   *testing.T
	srv *geminitest.Server
	c   *genai.Client
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	srv := geminitest.NewServer(Handler())
	t.Cleanup(srv.Close)
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "false")
	attempts := int32(1)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "test", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL, RetryOptions: &genai.HTTPRetryOptions{Attempts: &attempts}},
	})
	require.NoError(t, err)
	return &harness{t: t, srv: srv, c: c}
}

// structured renders a phase's prompt from set and asks for its schema, as
// activities.Model.GenerateJSON does; it returns the decoded answer.
func (h *harness) structured(set *prompt.Set, phase string, data map[string]any) map[string]any {
	h.t.Helper()
	system, err := set.Render(phase+"/system", tag, data)
	require.NoError(h.t, err)
	user, err := set.Render(phase+"/user", tag, data)
	require.NoError(h.t, err)
	resp, err := h.c.Models.GenerateContent(context.Background(), "gemini-2.5-flash", []*genai.Content{genai.NewContentFromText(user, genai.RoleUser)},
		&genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText(system, genai.RoleUser), ResponseMIMEType: "application/json", ResponseSchema: set.Schema(phase)})
	require.NoError(h.t, err)
	var out map[string]any
	require.NoError(h.t, json.Unmarshal([]byte(resp.Text()), &out), resp.Text())
	return out
}

// loop is one tool loop (a step, the sub-agent, a direct answer) as
// activities.Model.Turn sends it.
type loop struct {
	h        *harness
	system   string
	contents []*genai.Content
	decls    []*genai.FunctionDeclaration
}

func (h *harness) loop(set *prompt.Set, phase string, data map[string]any, decls []*genai.FunctionDeclaration) *loop {
	h.t.Helper()
	system, err := set.Render(phase+"/system", tag, data)
	require.NoError(h.t, err)
	user, err := set.Render(phase+"/user", tag, data)
	require.NoError(h.t, err)
	return &loop{h: h, system: system, contents: []*genai.Content{genai.NewContentFromText(user, genai.RoleUser)}, decls: decls}
}

// turn runs one model turn; final turns function calling off.
func (l *loop) turn(final bool) (text string, calls []*genai.FunctionCall) {
	l.h.t.Helper()
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText(l.system, genai.RoleUser)}
	if len(l.decls) > 0 {
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: l.decls}}
		if final {
			cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeNone}}
		}
	}
	resp, err := l.h.c.Models.GenerateContent(context.Background(), "gemini-2.5-flash", l.contents, cfg)
	require.NoError(l.h.t, err)
	content := resp.Candidates[0].Content
	content.Role = genai.RoleModel
	l.contents = append(l.contents, content)
	if calls := resp.FunctionCalls(); len(calls) > 0 {
		return "", calls
	}
	return resp.Text(), nil
}

// answer gives the calls of the last turn their results, by call ID, in
// call order, in one content.
func (l *loop) answer(calls []*genai.FunctionCall, results map[string]map[string]any) {
	l.h.t.Helper()
	c := &genai.Content{Role: genai.RoleUser}
	for _, fc := range calls {
		res, ok := results[fc.ID]
		require.True(l.h.t, ok, "no result scripted for call %s (%s %v)", fc.ID, fc.Name, fc.Args)
		c.Parts = append(c.Parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: fc.ID, Name: fc.Name, Response: res}})
	}
	l.contents = append(l.contents, c)
}

// getAlertResult is what get_alert returns for an alert.
func getAlertResult(al alerts.Alert) map[string]any {
	return map[string]any{"id": al.ID, "source": al.Source, "type": al.Type, "severity": al.Severity, "title": al.Title,
		"observed_at": al.ObservedAt.Format(time.RFC3339), "data": al.Data}
}

// stepView is how the reflect and conclude templates see a step.
type stepView struct {
	plan.Step
	Result string
}

// executeData is what activities.ModelTurn gives the execute templates.
func executeData(alert string, step plan.Step, earlier ...earlierResult) map[string]any {
	return map[string]any{
		"StepText": "Objective of the investigation: Decide whether the alert is malicious.\nStep " + step.ID + ": " + step.Description, "Alert": alert, "Earlier": earlier, "Step": step,
		"StepHeading": prompt.StepHeading, "Final": false, "Hints": []string(nil), "NoTools": len(step.Tools) == 0,
		"RefIDArg": toolcall.RefIDArg, "RefPrefix": toolcall.RefPrefix, "Language": "English",
	}
}

type earlierResult struct{ StepID, Text string }

// stepDecls are the declarations a step gets: its tools plus ask_user and
// get_alert (activities.stepDeclarations).
func stepDecls(reg *tools.Registry, step plan.Step) []*genai.FunctionDeclaration {
	if len(step.Tools) == 0 {
		return nil
	}
	names := append([]string{}, step.Tools...)
	for _, always := range []string{toolcall.AskUser, toolcall.GetAlert} {
		if !slices.Contains(names, always) {
			names = append(names, always)
		}
	}
	return reg.Declarations(names)
}
