package bigquery

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/gemini"
	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/modeltest"
	"github.com/secops-agent/investigator/transcript"
)

// TestDeliverAnswerKeepsLinkWhenCut checks that a long answer is cut, not
// the result around it: the stored result keeps both IDs and fits the cap.
func TestDeliverAnswerKeepsLinkWhenCut(t *testing.T) {
	a, _, ts := newAgent(t)
	link := activities.ChildLink{WorkflowID: "inv-1-bq-k7", RunID: "0191-run"}
	long := map[string]string{
		"ascii":   strings.Repeat("198.51.100.23 failed SSH 41 times\n", 400),
		"runes":   strings.Repeat("ログイン失敗 ✓ ", 2000),
		"escapes": strings.Repeat("\"\\\t\x01", 3000), // JSON makes these longer
	}
	for name, answer := range long {
		for _, limit := range []int{400, 1000, 4096} {
			key := fmt.Sprintf("r-%s-%d", name, limit) // a key is written once
			in := DeliverInput{ParentSession: "inv-1", ResultKey: key, CallID: "c1", Tool: "bigquery_agent",
				Answer: answer, Link: link, MaxResultBytes: limit}
			out, err := a.DeliverAnswer(context.Background(), in)
			require.NoError(t, err, name)
			require.True(t, out.Truncated, name)
			require.Greater(t, out.Bytes, limit, name)
			require.Equal(t, &link, out.Link, name)

			stored := ts.M["inv-1/"+key].Response
			require.LessOrEqual(t, len(stored), limit, "%s: the stored result fits the cap", name)
			require.Greater(t, len(stored), limit-40, "%s: and uses most of it", name)
			var got map[string]any
			require.NoError(t, json.Unmarshal([]byte(stored), &got), name)
			require.Equal(t, link.WorkflowID, got["child_workflow_id"], name)
			require.Equal(t, link.RunID, got["child_run_id"], name)
			require.Equal(t, true, got["truncated"], name)
			require.Contains(t, got["note"], "was cut to fit", name)
			text := got["answer"].(string)
			require.True(t, utf8.ValidString(text), name)
			require.True(t, clip.Clipped(text), "%s: the cut is marked", name)
			require.True(t, strings.HasPrefix(answer, text[:strings.LastIndex(text, clip.Marker)]), "%s: the answer's start is kept", name)
		}
	}
}

func TestDeliverAnswerShortIsWhole(t *testing.T) {
	a, _, ts := newAgent(t)
	link := activities.ChildLink{WorkflowID: "inv-1-bq-k7", RunID: "0191-run"}
	out, err := a.DeliverAnswer(context.Background(), DeliverInput{ParentSession: "inv-1", ResultKey: "r1",
		Answer: "3 failed logins <from> 198.51.100.23", Link: link, MaxResultBytes: 4096})
	require.NoError(t, err)
	require.False(t, out.Truncated)
	require.Equal(t, len(ts.M["inv-1/r1"].Response), out.Bytes)
	require.JSONEq(t, `{"answer":"3 failed logins <from> 198.51.100.23","child_workflow_id":"inv-1-bq-k7","child_run_id":"0191-run"}`, ts.M["inv-1/r1"].Response)

	// An answer no query backs says so to the parent's model.
	_, err = a.DeliverAnswer(context.Background(), DeliverInput{ParentSession: "inv-1", ResultKey: "r3",
		Answer: "no logins: benign", Link: link, MaxResultBytes: 4096, NoQuery: true})
	require.NoError(t, err)
	require.JSONEq(t, `{"answer":"no logins: benign","child_workflow_id":"inv-1-bq-k7","child_run_id":"0191-run","evidence":"none: no query of the sub-agent succeeded, so this answer rests on no log data"}`, ts.M["inv-1/r3"].Response)

	// A cap too small even for the IDs still keeps them.
	out, err = a.DeliverAnswer(context.Background(), DeliverInput{ParentSession: "inv-1", ResultKey: "r2",
		Answer: strings.Repeat("x", 500), Link: link, MaxResultBytes: 50})
	require.NoError(t, err)
	require.True(t, out.Truncated)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(ts.M["inv-1/r2"].Response), &got))
	require.Equal(t, link.WorkflowID, got["child_workflow_id"])
	require.Equal(t, link.RunID, got["child_run_id"])
	require.True(t, clip.Clipped(got["answer"].(string)), "the answer is all cut, and says so")
}

func transcriptModel(text string) transcript.Entry {
	raw, _ := json.Marshal(genai.NewContentFromText(text, genai.RoleModel))
	return transcript.Entry{Kind: transcript.KindModel, Content: string(raw), Text: text}
}

func newAgent(t *testing.T, answers ...*genai.GenerateContentResponse) (*Activities, *modeltest.LLM, *modeltest.Transcript) {
	t.Helper()
	llm := modeltest.New(answers...)
	ts := modeltest.NewTranscript()
	return &Activities{Model: &activities.Model{LLM: llm, Name: "m", Transcript: ts}}, llm, ts
}

// The embedding call is classified as every Gemini call is: a 401 fails at
// once.
func TestEmbeddingFailureIsClassified(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Always(geminitest.Error(http.StatusUnauthorized, "bad key", "")))
	defer srv.Close()
	c, err := gemini.NewClient(context.Background(), gemini.Config{APIKey: "k", BaseURL: srv.URL})
	require.NoError(t, err)
	a := &Activities{Embedder: c.Models, EmbeddingModel: "text-embedding-004"}
	_, _, err = a.embed(context.Background(), "RETRIEVAL_QUERY", "failed logins")
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, activities.ErrGeminiUnauthorized, app.Type())
	require.True(t, app.NonRetryable())
}
