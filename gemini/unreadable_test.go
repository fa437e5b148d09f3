package gemini

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// A 2xx whose body the SDK cannot decode is one typed sentence: the SDK's
// error quotes the whole body (the model's answer, alert data in it) and
// would reach the log, the failure Temporal stores and the analyst. What
// usage the body still tells is kept: the answer was billed.
func TestUndecodable2xxIsOneSentenceWithoutTheBody(t *testing.T) {
	clearGeminiEnv(t)
	const answer = `{"content":{"role":"model","parts":[{"text":"user alice logged in from 10.9.8.7 with password hunter2"}]}`
	for name, tc := range map[string]struct {
		body   string
		tokens int32 // the usage read, 0 for none
	}{
		"invalid json": {body: `{"candidates":[` + answer + `}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":3}} trailing`, tokens: 7},
		"wrong type":   {body: `{"candidates":[` + answer + `,"finishReason":5}],"usageMetadata":{"promptTokenCount":9}}`, tokens: 9},
		"no usage":     {body: `{"candidates":[` + answer + `,"finishReason":5}]}`},
		"not json":     {body: `hunter2`},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := NewClient(context.Background(), Config{APIKey: testKey, BaseURL: srv.URL})
			require.NoError(t, err)
			_, err = Call(context.Background(), generate(c, nil))
			require.EqualError(t, err, "Gemini answered with a body that could not be read as a response")
			var ue *UnreadableError
			require.True(t, errors.As(err, &ue), "typed: %T", err)
			require.Nil(t, errors.Unwrap(err), "no cause quotes the body")
			if tc.tokens == 0 {
				require.Nil(t, ue.Usage)
				return
			}
			require.NotNil(t, ue.Usage)
			require.Equal(t, tc.tokens, ue.Usage.PromptTokenCount)
		})
	}
}
