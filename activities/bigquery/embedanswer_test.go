package bigquery

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/gemini"
)

// An embedding answer that does not fit the request (a null embedding, a
// count or a dimension that differs) is a misconfigured embedding model:
// one non-retryable sentence naming the model, never a panic or a retry
// paid again and again.
func TestUnusableEmbeddingAnswer(t *testing.T) {
	vec := "[" + strings.TrimSuffix(strings.Repeat("0.1,", 768), ",") + "]"
	for name, tc := range map[string]struct{ body, says string }{
		"null embedding": {`{"embeddings":[null]}`, "gave no embedding for text 1"},
		"too many":       {`{"embeddings":[{"values":` + vec + `},{"values":` + vec + `}]}`, "gave 2 embeddings for 1 texts"},
		"none":           {`{"embeddings":[]}`, "gave 0 embeddings for 1 texts"},
		"dimensions":     {`{"embeddings":[{"values":[0.1,0.2,0.3]}]}`, "gave an embedding of 3 dimensions, not 768"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := gemini.NewClient(context.Background(), gemini.Config{APIKey: "k", BaseURL: srv.URL})
			require.NoError(t, err)
			a := &Activities{Embedder: c.Models, EmbeddingModel: "text-embedding-004", Memories: noMemories{}}
			require.NotPanics(t, func() {
				_, err = a.RecallMemories(context.Background(), RecallInput{Request: "x"})
			})
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "%v", err)
			require.Equal(t, ErrEmbeddingUnusable, app.Type())
			require.True(t, app.NonRetryable())
			require.Contains(t, app.Message(), `the embedding model "text-embedding-004" `+tc.says)
		})
	}
}
