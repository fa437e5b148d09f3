package geminitest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/prompt"
)

// TestPhase: each kind of request the agent sends is told apart by its
// schema title, its declared functions and its last content.
func TestPhase(t *testing.T) {
	srv := NewServer(Always(Text("ok")))
	defer srv.Close()
	c := newClient(t, srv)
	ctx := context.Background()
	titled := func(title string) *genai.GenerateContentConfig {
		return &genai.GenerateContentConfig{ResponseMIMEType: "application/json", ResponseSchema: &genai.Schema{
			Type: genai.TypeObject, Title: title, Properties: map[string]*genai.Schema{"x": {Type: genai.TypeString}},
		}}
	}
	decls := []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_alert"}}}}
	response := []*genai.Content{
		genai.NewContentFromText("step", genai.RoleUser),
		{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: "get_alert"}}}},
		{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{Name: "get_alert", Response: map[string]any{"id": "a"}}}}},
	}
	cases := []struct {
		want     string
		contents []*genai.Content
		config   *genai.GenerateContentConfig
	}{
		{PhasePlan, genai.Text("p"), titled(prompt.PhasePlan)},
		{PhaseReflect, genai.Text("p"), titled(prompt.PhaseReflect)},
		{PhaseMode, genai.Text("p"), titled(prompt.PhaseMode)},
		{PhaseConclude, genai.Text("p"), titled(prompt.PhaseConclude)},
		{PhaseIntrospect, genai.Text("p"), titled(prompt.PhaseIntrospect)},
		{PhaseStructured, genai.Text("p"), titled("something else")},
		{PhaseConclude, genai.Text("p"), &genai.GenerateContentConfig{ResponseSchema: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{
			"report": {Type: genai.TypeString}, "verdict": {Type: genai.TypeString},
		}}}},
		{PhaseToolCall, genai.Text("p"), &genai.GenerateContentConfig{Tools: decls}},
		{PhaseToolResult, response, &genai.GenerateContentConfig{Tools: decls}},
		{PhaseText, genai.Text("p"), nil},
	}
	for _, tc := range cases {
		_, err := c.Models.GenerateContent(ctx, testModel, tc.contents, tc.config)
		require.NoError(t, err)
	}
	_, err := c.Models.EmbedContent(ctx, "text-embedding-004", genai.Text("e"), nil)
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, len(cases)+1)
	for i, tc := range cases {
		assert.Equal(t, tc.want, reqs[i].Phase(), "request %d", i)
	}
	assert.Equal(t, PhaseEmbed, reqs[len(cases)].Phase())
	assert.Equal(t, "get_alert", reqs[len(cases)-2].FunctionResponses()[0].Name)
	assert.Equal(t, []string{"get_alert"}, reqs[len(cases)-2].FunctionNames())
}
