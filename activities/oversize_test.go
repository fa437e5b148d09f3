package activities

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/genai"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/transcript"
)

// firestoreSized refuses a document over Firestore's 1 MiB, as Firestore
// does (InvalidArgument, which the activity would retry).
type firestoreSized struct{ TranscriptStore }

func (s firestoreSized) Put(ctx context.Context, session, key string, e transcript.Entry) (transcript.Entry, error) {
	if len(e.Content)+len(e.Text) > 1<<20 {
		return transcript.Entry{}, status.Error(codes.InvalidArgument, "document exceeds the maximum allowed size of 1,048,576 bytes")
	}
	return s.TranscriptStore.Put(ctx, session, key, e)
}

// An answer too large to store is clipped, stored and returned: it is
// not bought again on every retry.
func TestOversizedAnswerIsClippedNotRepaid(t *testing.T) {
	a, _, ts := newActivities(t)
	huge := strings.Repeat("A", 600<<10) // 600 KiB: with the text stored twice, over 1 MiB
	llm := &sameAnswer{resp: text(huge)}
	a.Model.LLM = llm
	a.Model.Transcript = firestoreSized{ts}
	var out TurnOutput
	err := llmRetries(t, a, func(ctx workflow.Context) error {
		return workflow.ExecuteActivity(ctx, a.ModelTurn, TurnInput{Session: "s", Key: "t1-step_1-i1", AlertID: "a1", Step: plan.Step{ID: "step_1"}}).Get(ctx, &out)
	})
	require.NoError(t, err)
	require.Equal(t, int32(1), llm.calls.Load(), "the answer is paid once")
	require.True(t, clip.Clipped(out.Text), "the clip is marked")
	require.LessOrEqual(t, len(out.Text), maxAnswerText)
	e := ts.M["s/t1-step_1-i1"]
	require.Equal(t, out.Text, e.Text, "the clipped text is stored, for workers reading Text")
	require.Equal(t, out.Text, entryText(e))
}

// An answer still too large once its text is clipped (huge function call
// arguments) fails for good, in one sentence, paid once.
func TestOversizedCallsFailOnce(t *testing.T) {
	a, _, ts := newActivities(t)
	resp := &genai.GenerateContentResponse{Candidates: []*genai.Candidate{{Content: &genai.Content{Role: genai.RoleModel,
		Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: "c1", Name: "get_alert", Args: map[string]any{"id": strings.Repeat("x", 1<<20)}}}}}}}}
	llm := &sameAnswer{resp: resp}
	a.Model.LLM = llm
	a.Model.Transcript = firestoreSized{ts}
	err := llmRetries(t, a, func(ctx workflow.Context) error {
		return workflow.ExecuteActivity(ctx, a.ModelTurn, TurnInput{Session: "s", Key: "t1-step_1-i1", AlertID: "a1", Step: plan.Step{ID: "step_1", Tools: []string{"get_alert"}}}).Get(ctx, nil)
	})
	require.Equal(t, int32(1), llm.calls.Load())
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrAnswerTooLarge, app.Type())
	require.Equal(t, "the model's answer is too large to store (1024 KiB, at most 850 KiB)", app.Message())
}
