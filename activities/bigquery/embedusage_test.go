package bigquery

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/investigation"
)

// noMemories is a memory store that holds nothing and keeps nothing.
type noMemories struct{}

func (noMemories) Recall(context.Context, []float32, float64, int) ([]memory.Memory, error) {
	return nil, nil
}

func (noMemories) Propose(_ context.Context, id string, c memory.Claim, _ string, _ []float32, s memory.Status) (memory.Memory, bool, error) {
	return memory.Memory{ID: id, Status: s}, true, nil
}

func (noMemories) Adjust(context.Context, string, []string, []string) ([]string, error) {
	return nil, nil
}

// vertexEmbed reports each text's token count, as Vertex AI does.
type vertexEmbed struct{ embedAll }

func (v vertexEmbed) EmbedContent(ctx context.Context, m string, contents []*genai.Content, cfg *genai.EmbedContentConfig) (*genai.EmbedContentResponse, error) {
	out, err := v.embedAll.EmbedContent(ctx, m, contents, cfg)
	for _, e := range out.Embeddings {
		e.Statistics = &genai.ContentEmbeddingStatistics{TokenCount: 7}
	}
	return out, err
}

// Embedding calls are billed: recall and learning report their usage, the
// tokens Vertex AI counts or an estimate where the Gemini API gives none.
func TestEmbeddingsAreCounted(t *testing.T) {
	a := &Activities{Embedder: embedAll{}, EmbeddingModel: "text-embedding-004", Memories: noMemories{}}
	rec, err := a.RecallMemories(context.Background(), RecallInput{Request: "failed logins from 198.51.100.23"}) // 32 bytes
	require.NoError(t, err)
	require.Equal(t, investigation.Usage{Calls: 1, PromptTokens: 8, Model: "text-embedding-004"}, rec.Usage)

	a.Embedder = vertexEmbed{}
	changes, err := a.UpdateMemories(context.Background(), MemoryUpdate{Session: "s", Request: "r", Claims: []memory.Claim{
		{Kind: "schema", Table: "logs.auth", Text: "user_name holds the login"},
		{Kind: "schema", Table: "logs.auth", Text: "ts is UTC"},
	}})
	require.NoError(t, err)
	require.Equal(t, investigation.Usage{Calls: 1, PromptTokens: 14, Model: "text-embedding-004"}, changes.Usage)
}
