package activities

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// candidate is an answer of one candidate with these parts.
func candidate(reason genai.FinishReason, parts ...*genai.Part) *genai.GenerateContentResponse {
	return &genai.GenerateContentResponse{Candidates: []*genai.Candidate{{FinishReason: reason,
		Content: &genai.Content{Role: genai.RoleModel, Parts: parts}}}}
}

// An answer with nothing usable in it is never stored as the step's final
// answer (which would end the step "(no answer)"): it is retried, as an
// answer without parts is. A malformed function call is such an answer
// whatever text came before it.
func TestModelTurnNothingUsableIsRetried(t *testing.T) {
	for name, resp := range map[string]*genai.GenerateContentResponse{
		"signature only":  candidate(genai.FinishReasonStop, &genai.Part{ThoughtSignature: []byte("sig")}),
		"empty text":      candidate(genai.FinishReasonStop, &genai.Part{Text: "", ThoughtSignature: []byte("sig")}),
		"white space":     candidate(genai.FinishReasonStop, &genai.Part{Text: " \n\t"}),
		"thoughts only":   candidate(genai.FinishReasonStop, &genai.Part{Text: "let me think", Thought: true}),
		"null part":       candidate(genai.FinishReasonStop, nil),
		"null candidate":  {Candidates: []*genai.Candidate{nil}},
		"no content":      {Candidates: []*genai.Candidate{{FinishReason: genai.FinishReasonStop}}},
		"malformed call":  candidate(genai.FinishReasonMalformedFunctionCall, &genai.Part{Text: "I will now call the tool:"}),
		"malformed empty": candidate(genai.FinishReasonMalformedFunctionCall),
	} {
		t.Run(name, func(t *testing.T) {
			a, _, ts := newActivities(t, resp)
			var out TurnOutput
			var err error
			require.NotPanics(t, func() {
				out, err = a.ModelTurn(context.Background(), TurnInput{Session: "s", Key: "k", AlertID: "a1", Step: plan.Step{ID: "step_1"}})
			})
			require.Error(t, err, "not taken as the answer: %+v", out)
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app))
			require.Equal(t, ErrNoAnswer, app.Type())
			require.False(t, app.NonRetryable(), "a new sample usually answers")
			require.Empty(t, ts.M, "nothing stored as the step's answer")
		})
	}
}

// The retries of answers with nothing usable are bounded: each is billed.
func TestNoAnswerRetriesAreBounded(t *testing.T) {
	var app *temporal.ApplicationError
	for attempt := int32(1); attempt < maxNoAnswerAttempts; attempt++ {
		require.True(t, errors.As(noAnswerAt(attempt, "k", "STOP"), &app))
		require.False(t, app.NonRetryable())
	}
	err := noAnswerAt(maxNoAnswerAttempts, "k", "STOP")
	require.True(t, errors.As(err, &app))
	require.True(t, app.NonRetryable())
	require.Equal(t, "the model returned no usable content for k (finish reason STOP), 3 times", app.Message())
}

// A null candidate in a structured phase is an empty answer (re-asked,
// then a malformed-output error), not a panic retried and paid each time.
func TestNullCandidateInAStructuredPhase(t *testing.T) {
	null := &genai.GenerateContentResponse{Candidates: []*genai.Candidate{nil}}
	a, llm, _ := newActivities(t, null, null)
	var err error
	require.NotPanics(t, func() {
		_, err = a.DecideMode(context.Background(), ModeInput{AlertID: "a1", Question: "q?"})
	})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrMalformedOutput, app.Type())
	require.Len(t, llm.Calls, 2)
}

// A 2xx body the SDK cannot decode fails the turn at once with one
// sentence that does not quote the body (the model's answer), and the
// usage the body still tells is billed.
func TestUnreadableAnswerFailsFastWithoutTheBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"password hunter2"}]},"finishReason":5}],` +
			`"usageMetadata":{"promptTokenCount":120,"candidatesTokenCount":8}}`))
	}))
	defer srv.Close()
	c, err := gemini.NewClient(context.Background(), gemini.Config{APIKey: "k", BaseURL: srv.URL})
	require.NoError(t, err)
	a, _, ts := newActivities(t)
	a.Model.LLM = c.Models
	env, lastBeat := attemptEnv(t, a, nil)
	_, err = env.ExecuteActivity(a.ModelTurn, TurnInput{Session: "s", Key: "k", AlertID: "a1", Step: plan.Step{ID: "step_1"}})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrGeminiUnreadable, app.Type())
	require.True(t, app.NonRetryable(), "the same body fails the same way")
	require.Equal(t, "Gemini answered with a body that could not be read as a response", app.Message())
	require.NotContains(t, err.Error(), "hunter2")
	require.Empty(t, ts.M)
	require.Equal(t, investigation.Usage{Calls: 1, PromptTokens: 120, OutputTokens: 8, Model: "m"}, lastBeat(), "the billed call is counted")
}
