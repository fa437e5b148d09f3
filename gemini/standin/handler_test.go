package standin

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
)

// The same request gets the same answer, byte for byte.
func TestDeterministic(t *testing.T) {
	h := newHarness(t)
	data := planData(alertSection(t, readAlert(t, guardDutyFile)), registry(t, true))
	a, b := h.structured(agentPrompts, "plan", data), h.structured(agentPrompts, "plan", data)
	assert.Equal(t, a, b)
	reqs := h.srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, Handler()(reqs[0]), Handler()(reqs[1]))
}

// Embedding requests get the stand-in's vectors, one per text.
func TestEmbeddingRequests(t *testing.T) {
	h := newHarness(t)
	dims := int32(Dims)
	resp, err := h.c.Models.EmbedContent(context.Background(), "text-embedding-004", []*genai.Content{
		genai.NewContentFromText("ssh logins", genai.RoleUser), genai.NewContentFromText("dns lookups", genai.RoleUser),
	}, &genai.EmbedContentConfig{TaskType: "RETRIEVAL_QUERY", OutputDimensionality: &dims})
	require.NoError(t, err)
	require.Len(t, resp.Embeddings, 2)
	assert.Equal(t, Embedding("ssh logins"), resp.Embeddings[0].Values)
	assert.Equal(t, Embedding("dns lookups"), resp.Embeddings[1].Values)
}

// A structured phase the script does not know fails fast with a clear
// message (HTTP 400 is not retried) instead of answering nonsense.
func TestUnknownSchemaIsRefused(t *testing.T) {
	h := newHarness(t)
	_, err := h.c.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("x"), &genai.GenerateContentConfig{
		ResponseMIMEType: "application/json", ResponseSchema: &genai.Schema{Type: genai.TypeObject, Title: "triage"},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no script for a response schema titled "triage"`)
	r := h.srv.Requests()[0]
	reply := Handler()(r)
	assert.Equal(t, 400, reply.Status)
	raw, _ := json.Marshal(reply.Body)
	assert.Contains(t, string(raw), "offline Gemini stand-in")
}

// A request with none of what the script reads still gets an answer.
func TestBareRequests(t *testing.T) {
	for _, r := range []*geminitest.Request{
		{Method: geminitest.MethodGenerateContent, Contents: []*genai.Content{nil, genai.NewContentFromText("hello", genai.RoleUser)}},
		{Method: geminitest.MethodGenerateContent, Contents: []*genai.Content{genai.NewContentFromText("x", genai.RoleUser)}, ResponseSchema: map[string]any{"title": "plan"}},
		{Method: geminitest.MethodGenerateContent, Contents: []*genai.Content{genai.NewContentFromText("x", genai.RoleUser)}, ResponseSchema: map[string]any{"title": "conclude"}},
		{Method: geminitest.MethodGenerateContent, Contents: []*genai.Content{genai.NewContentFromText("x", genai.RoleUser)},
			Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: bqQuery}}}}},
	} {
		reply := Handler()(r)
		assert.Zero(t, reply.Status, "%+v", reply.Body)
	}
}
