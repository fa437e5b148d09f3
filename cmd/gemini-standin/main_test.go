package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/standin"
)

// lockedBuffer collects the command's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// gemini-standin --addr HOST:PORT serves the stand-in until it is stopped:
// the genai client gets the demo's answers from it.
func TestServesTheStandIn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	cmd := newRootCmd(out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	var url string
	require.Eventually(t, func() bool {
		line := out.String()
		if i := strings.Index(line, "http://"); i >= 0 {
			url = strings.Fields(line[i:])[0]
			return true
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the command prints its URL")

	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "false")
	attempts := int32(1)
	c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "any", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: url, RetryOptions: &genai.HTTPRetryOptions{Attempts: &attempts}}})
	require.NoError(t, err)
	resp, err := c.Models.EmbedContent(ctx, "text-embedding-004", genai.Text("ssh logins"), nil)
	require.NoError(t, err)
	assert.Equal(t, standin.Embedding("ssh logins"), resp.Embeddings[0].Values)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err, "it stops cleanly")
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not stop")
	}
}
