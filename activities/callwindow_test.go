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

// A structured answer's re-ask fits the attempt: the first call may take
// only half the time the attempt has left, so a slow first answer that
// must be asked again never pushes the re-ask past the attempt's deadline
// (the retry would pay for the first call again).
func TestReaskFitsTheAttempt(t *testing.T) {
	a, _, _ := newActivities(t)
	llm := &deadlines{}
	a.Model.LLM = llm
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // llmOptions' StartToClose
	defer cancel()
	var out struct {
		Insights []string `json:"insights"`
	}
	_, err := a.Model.GenerateJSON(ctx, "reflection", "system", "user", nil, &out, func() error { return nil })
	require.NoError(t, err)
	require.Len(t, llm.got, 2)
	require.InDelta(t, (3*time.Minute-callMargin)/2, llm.got[0], float64(time.Second), "the first call leaves half the attempt to the re-ask")
	require.InDelta(t, 3*time.Minute-callMargin, llm.got[1], float64(time.Second), "the re-ask has what is left")
}
