package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"
)

// deadlines records the deadline of each call's context and answers with
// text that is not JSON first, then with JSON.
type deadlines struct{ got []time.Duration }

func (d *deadlines) GenerateContent(ctx context.Context, _ string, _ []*genai.Content, _ *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error) {
	dl, _ := ctx.Deadline()
	d.got = append(d.got, time.Until(dl))
	if len(d.got) == 1 {
		return text("not json"), nil
	}
	return text(`{"insights":["ok"]}`), nil
}

// A structured answer's re-ask fits the attempt: in llmOptions' 5-minute
// attempt the first call may take half of what is left, more than the
// HTTP timeout, so a slow first answer that must be asked again never
// pushes the re-ask past the attempt's deadline (the retry would pay for
// the first call again).
func TestReaskFitsTheAttempt(t *testing.T) {
	a, _, _ := newActivities(t)
	llm := &deadlines{}
	a.Model.LLM = llm
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // llmOptions' StartToClose
	defer cancel()
	var out struct {
		Insights []string `json:"insights"`
	}
	_, err := a.Model.GenerateJSON(ctx, "reflection", "system", "user", nil, &out, func() error { return nil })
	require.NoError(t, err)
	require.Len(t, llm.got, 2)
	require.InDelta(t, (5*time.Minute-callMargin)/2, llm.got[0], float64(time.Second), "the first call leaves half the attempt to the re-ask")
	require.InDelta(t, 5*time.Minute-callMargin, llm.got[1], float64(time.Second), "the re-ask has what is left")
}

// slowJSON answers with JSON after d.
type slowJSON struct{ d time.Duration }

func (s slowJSON) GenerateContent(ctx context.Context, _ string, _ []*genai.Content, _ *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error) {
	select {
	case <-time.After(s.d):
		return text(`{"a":1}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A call is never held to a share under the HTTP timeout: in a short
// attempt (bestEffortOptions' 2 minutes) a half share would time out a slow
// answer on every attempt alike. Here a 3 s answer in a 9 s attempt.
func TestSlowFirstCallGetsTheAttempt(t *testing.T) {
	a, _, _ := newActivities(t)
	a.Model.LLM = slowJSON{3 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Second)
	defer cancel()
	var out map[string]any
	_, err := a.Model.GenerateJSON(ctx, "plan", "s", "u", nil, &out, func() error { return nil })
	require.NoError(t, err, "a 3 s answer inside a 9 s attempt")
}
