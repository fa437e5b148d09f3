package geminitest

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"
)

const plannerPrompt = `Investigate this alert.

Alert ID: gd-7781
Alert type: UnauthorizedAccess:EC2/SSHBruteForce

Available tools:
- ` + "`get_alert`" + `: fetch one alert by ID
- ` + "`search_alerts`" + `: search past alerts
- ` + "`otx_lookup`" + `: threat intelligence for an indicator
`

func autoServer(t *testing.T) (*Server, *genai.Client) {
	t.Helper()
	srv := NewServer(Auto())
	t.Cleanup(srv.Close)
	return srv, newClient(t, srv)
}

func objectSchema(props ...string) *genai.Schema {
	s := &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{}}
	for _, p := range props {
		s.Properties[p] = &genai.Schema{Type: genai.TypeString}
	}
	return s
}

func generate(t *testing.T, c *genai.Client, contents []*genai.Content, config *genai.GenerateContentConfig) *genai.GenerateContentResponse {
	t.Helper()
	resp, err := c.Models.GenerateContent(context.Background(), testModel, contents, config)
	require.NoError(t, err)
	require.NotNil(t, resp.UsageMetadata)
	assert.Positive(t, resp.UsageMetadata.TotalTokenCount)
	require.Len(t, resp.Candidates, 1)
	assert.Equal(t, genai.FinishReasonStop, resp.Candidates[0].FinishReason)
	return resp
}

type planJSON struct {
	Objective string `json:"objective"`
	Steps     []struct {
		ID          string   `json:"id"`
		Description string   `json:"description"`
		Tools       []string `json:"tools"`
		Expected    string   `json:"expected"`
	} `json:"steps"`
}

func TestAutoPlan(t *testing.T) {
	_, c := autoServer(t)
	resp := generate(t, c, genai.Text(plannerPrompt), &genai.GenerateContentConfig{
		ResponseMIMEType: "application/json",
		ResponseSchema:   objectSchema("objective", "steps"),
	})
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(resp.Text()), &p))
	assert.Contains(t, p.Objective, "gd-7781")
	require.Len(t, p.Steps, 3)
	assert.Equal(t, []string{"step_1", "step_2", "step_3"}, []string{p.Steps[0].ID, p.Steps[1].ID, p.Steps[2].ID})
	assert.Equal(t, []string{"get_alert"}, p.Steps[0].Tools)
	assert.Equal(t, []string{"search_alerts"}, p.Steps[1].Tools)
	assert.NotNil(t, p.Steps[2].Tools)
	assert.Empty(t, p.Steps[2].Tools)
	for _, s := range p.Steps {
		assert.NotEmpty(t, s.Description)
		assert.NotEmpty(t, s.Expected)
	}
	// The step text names its tool, so the tool-call phase picks it.
	assert.Contains(t, p.Steps[1].Description, "search_alerts")
}

func TestAutoPlanUsesOnlyListedTools(t *testing.T) {
	_, c := autoServer(t)
	prompt := "Alert ID: x-1\nTools:\n- `otx_lookup`: threat intel\n- `urlscan`: scan a URL\n"
	resp := generate(t, c, genai.Text(prompt), &genai.GenerateContentConfig{
		ResponseMIMEType:   "application/json",
		ResponseJsonSchema: map[string]any{"type": "object", "properties": map[string]any{"objective": map[string]any{}, "steps": map[string]any{}}},
	})
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(resp.Text()), &p))
	require.Len(t, p.Steps, 3)
	assert.Equal(t, []string{"otx_lookup"}, p.Steps[0].Tools)
	assert.Equal(t, []string{"urlscan"}, p.Steps[1].Tools)

	// No tools listed at all: no tools used.
	resp = generate(t, c, genai.Text("Investigate alert 5."), &genai.GenerateContentConfig{
		ResponseMIMEType: "application/json",
		ResponseSchema:   objectSchema("objective", "steps"),
	})
	require.NoError(t, json.Unmarshal([]byte(resp.Text()), &p))
	for _, s := range p.Steps {
		assert.Empty(t, s.Tools)
	}
}

func TestAutoReflect(t *testing.T) {
	_, c := autoServer(t)
	prompt := "Objective: decide.\nStep: step_1 Retrieve the alert\nStep result:\nFindings for this step: get_alert → {\"severity\":8,\"principal\":\"root\"}\nCompleted steps: step_1\nPending steps: step_2"
	resp := generate(t, c, genai.Text(prompt), &genai.GenerateContentConfig{
		ResponseMIMEType: "application/json",
		ResponseSchema:   objectSchema("achieved", "insights", "plan_updates"),
	})
	var out struct {
		Achieved    *bool    `json:"achieved"`
		Insights    []string `json:"insights"`
		PlanUpdates []any    `json:"plan_updates"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Text()), &out))
	require.NotNil(t, out.Achieved)
	assert.False(t, *out.Achieved)
	require.Len(t, out.Insights, 1)
	assert.Contains(t, out.Insights[0], `"principal":"root"`)
	assert.True(t, strings.HasSuffix(out.Insights[0], "."))
	assert.NotNil(t, out.PlanUpdates)
	assert.Empty(t, out.PlanUpdates)

	// A result label without the stand-in's own wording.
	resp = generate(t, c, genai.Text("Result: 14 failed SSH logins from 203.0.113.9.\nPending steps: none"), &genai.GenerateContentConfig{
		ResponseMIMEType: "application/json",
		ResponseSchema:   objectSchema("achieved", "insights", "plan_updates"),
	})
	require.NoError(t, json.Unmarshal([]byte(resp.Text()), &out))
	assert.Equal(t, []string{"The step result reports: 14 failed SSH logins from 203.0.113.9."}, out.Insights)
}

func TestAutoMode(t *testing.T) {
	_, c := autoServer(t)
	resp := generate(t, c, genai.Text("What else did this principal do?"), &genai.GenerateContentConfig{
		ResponseMIMEType: "application/json",
		ResponseSchema:   objectSchema("mode", "reason"),
	})
	var out map[string]string
	require.NoError(t, json.Unmarshal([]byte(resp.Text()), &out))
	assert.Equal(t, "plan", out["mode"])
	assert.NotEmpty(t, out["reason"])
}

func TestAutoOtherSchemaGetsEmptyValues(t *testing.T) {
	_, c := autoServer(t)
	schema := &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{
		"claims":  {Type: genai.TypeArray, Items: &genai.Schema{Type: genai.TypeString}},
		"helpful": {Type: genai.TypeArray, Items: &genai.Schema{Type: genai.TypeString}},
		"verdict": {Type: genai.TypeString, Enum: []string{"benign", "malicious"}},
		"score":   {Type: genai.TypeInteger},
		"nested":  {Type: genai.TypeObject, Properties: map[string]*genai.Schema{"ok": {Type: genai.TypeBoolean}}},
	}}
	resp := generate(t, c, genai.Text("Introspect."), &genai.GenerateContentConfig{ResponseMIMEType: "application/json", ResponseSchema: schema})
	assert.JSONEq(t, `{"claims":[],"helpful":[],"verdict":"benign","score":0,"nested":{"ok":false}}`, resp.Text())
}

func toolsConfig(system string) *genai.GenerateContentConfig {
	return &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText(system, genai.RoleUser),
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
			{Name: "get_alert", Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"id": {Type: genai.TypeString}}, Required: []string{"id"}}},
			{Name: "search_alerts", Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"field": {Type: genai.TypeString}}}},
			{Name: "otx_lookup", Parameters: &genai.Schema{
				Type: genai.TypeObject,
				Properties: map[string]*genai.Schema{
					"indicator": {Type: genai.TypeString},
					"kind":      {Type: genai.TypeString, Enum: []string{"ip", "domain"}},
					"limit":     {Type: genai.TypeInteger},
					"verbose":   {Type: genai.TypeBoolean},
				},
				Required: []string{"indicator", "kind", "limit"},
			}},
			{Name: "run_query", ParametersJsonSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"sql": map[string]any{"type": "string"}, "mode": map[string]any{"type": "string", "enum": []any{"dry_run", "run"}}},
				"required":   []any{"sql", "mode"},
			}},
		}}},
	}
}

const stepSystem = "You execute one step of a security investigation.\nAlert ID: gd-7781\nAlert type: UnauthorizedAccess:EC2/SSHBruteForce\n"

func TestAutoToolCall(t *testing.T) {
	_, c := autoServer(t)
	cases := []struct {
		step     string
		wantName string
		wantArgs map[string]any
	}{
		{"Execute this step: Retrieve the full alert record.", "get_alert", map[string]any{"id": "gd-7781"}},
		{"Execute this step: Use search_alerts to look for earlier alerts of the same type.", "search_alerts",
			map[string]any{"field": "type", "op": "==", "value": "UnauthorizedAccess:EC2/SSHBruteForce", "value_type": "string", "limit": float64(10)}},
		{"Execute this step: check the source IP with otx_lookup, then get_alert.", "otx_lookup",
			map[string]any{"indicator": "", "kind": "ip", "limit": float64(0)}},
		{"Execute this step: run_query the logs.", "run_query", map[string]any{"sql": "", "mode": "dry_run"}},
		// "get_alerts" is not the tool get_alert: whole names only.
		{"Execute this step: list all get_alerts_v2 results", "get_alert", map[string]any{"id": "gd-7781"}},
	}
	for _, tc := range cases {
		resp := generate(t, c, genai.Text(tc.step), toolsConfig(stepSystem))
		calls := resp.FunctionCalls()
		require.Len(t, calls, 1, tc.step)
		assert.Equal(t, tc.wantName, calls[0].Name, tc.step)
		assert.Equal(t, tc.wantArgs, calls[0].Args, tc.step)
		assert.NotEmpty(t, calls[0].ID)
	}
}

func TestAutoToolResultThenConclusion(t *testing.T) {
	srv, c := autoServer(t)
	contents := genai.Text("Execute this step: Retrieve the full alert record.")
	resp := generate(t, c, contents, toolsConfig(stepSystem))
	call := resp.FunctionCalls()[0]

	big := strings.Repeat("x", 2000)
	contents = append(contents, resp.Candidates[0].Content, genai.NewContentFromParts([]*genai.Part{
		{FunctionResponse: &genai.FunctionResponse{ID: call.ID, Name: call.Name, Response: map[string]any{"output": map[string]any{"severity": 8, "blob": big}}}},
	}, genai.RoleUser))
	resp = generate(t, c, contents, toolsConfig(stepSystem))
	assert.Empty(t, resp.FunctionCalls())
	findings := resp.Text()
	assert.True(t, strings.HasPrefix(findings, "Findings for this step: get_alert → "), findings)
	assert.Contains(t, findings, `"severity":8`)
	assert.LessOrEqual(t, len(findings), len("Findings for this step: ")+400+len("…"))
	assert.Equal(t, PhaseToolResult, srv.Requests()[1].Phase())

	// Conclusion: the report and verdict schema, no tools.
	prompt := "Objective: decide.\nStep step_1 (done): Retrieve the alert\n" + findings + "\nInsights:\n- Root logged in from a new country.\n"
	resp = generate(t, c, genai.Text(prompt), &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText("Write the conclusion in English.", genai.RoleUser),
		ResponseMIMEType: "application/json", ResponseSchema: objectSchema("report", "evidence", "verdict", "confidence")})
	var conclusion struct{ Report, Verdict, Confidence string }
	require.NoError(t, json.Unmarshal([]byte(resp.Text()), &conclusion))
	assert.Equal(t, "undetermined", conclusion.Verdict)
	assert.Equal(t, "low", conclusion.Confidence)
	md := conclusion.Report
	for _, h := range []string{"## Summary", "## Key findings", "## Assessment", "## Uncertainties", "## Recommended actions"} {
		assert.Contains(t, md, h)
	}
	assert.Contains(t, md, "offline Gemini stand-in")
	assert.Contains(t, md, "> Findings for this step: get_alert")
	assert.Contains(t, md, "Root logged in from a new country.")
	assert.Equal(t, PhaseConclude, srv.Requests()[2].Phase())
}

func TestAutoIsDeterministic(t *testing.T) {
	_, c := autoServer(t)
	config := &genai.GenerateContentConfig{ResponseMIMEType: "application/json", ResponseSchema: objectSchema("objective", "steps")}
	a := generate(t, c, genai.Text(plannerPrompt), config).Text()
	b := generate(t, c, genai.Text(plannerPrompt), config).Text()
	assert.Equal(t, a, b)
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func TestAutoEmbeddings(t *testing.T) {
	srv, c := autoServer(t)
	texts := []string{
		"failed SSH logins to bastion host from 203.0.113.9",
		"failed SSH logins to bastion host from 203.0.113.9",
		"Failed ssh logins to the bastion host",
		"quarterly revenue spreadsheet export",
		"",
	}
	var contents []*genai.Content
	for _, s := range texts {
		contents = append(contents, genai.NewContentFromText(s, genai.RoleUser))
	}
	resp, err := c.Models.EmbedContent(context.Background(), "gemini-embedding-001", contents, nil)
	require.NoError(t, err)
	require.Len(t, resp.Embeddings, len(texts))
	for i, e := range resp.Embeddings {
		require.Len(t, e.Values, EmbeddingDims, "text %d", i)
		assert.InDelta(t, 1.0, cosine(e.Values, e.Values), 1e-5, "unit vector %d", i)
		var n float64
		for _, v := range e.Values {
			n += float64(v) * float64(v)
		}
		assert.InDelta(t, 1.0, n, 1e-5, "norm of %d", i)
	}
	v := resp.Embeddings
	assert.Equal(t, v[0].Values, v[1].Values, "identical texts")
	assert.Equal(t, AutoEmbedding(texts[0]), v[0].Values)
	similar, unrelated := cosine(v[0].Values, v[2].Values), cosine(v[0].Values, v[3].Values)
	assert.Greater(t, similar, 0.6)
	assert.Less(t, unrelated, 0.3)
	assert.Equal(t, PhaseEmbed, srv.Requests()[0].Phase())
}

func TestAutoNeverAsksThePersonUnbidden(t *testing.T) {
	_, c := autoServer(t)
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText(stepSystem, genai.RoleUser),
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
			{Name: "ask_user", Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"question": {Type: genai.TypeString}}, Required: []string{"question"}}},
			{Name: "bigquery_agent", Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"request": {Type: genai.TypeString}}, Required: []string{"request"}}},
		}}},
	}
	resp := generate(t, c, genai.Text("Execute this step: Weigh the evidence."), cfg)
	require.Empty(t, resp.FunctionCalls(), "an analysis step is answered in text, not by waiting for a person")
	require.Contains(t, resp.Text(), "Findings for this step")

	resp = generate(t, c, genai.Text("## The alert\n...\n\n## Execute this step\nstep_2: Use bigquery_agent to list SSH logins on web-server-prod-01.\nExpected outcome: logins"), cfg)
	calls := resp.FunctionCalls()
	require.Len(t, calls, 1)
	require.Equal(t, "bigquery_agent", calls[0].Name)
	require.Equal(t, "Use bigquery_agent to list SSH logins on web-server-prod-01.", calls[0].Args["request"])
}
