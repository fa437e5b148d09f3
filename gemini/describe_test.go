package gemini

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDescribe: the catalog names the endpoint the SDK really calls (an
// explicit base URL, the environment's, or Google's default), marks local
// servers, and never carries the key or a URL's credentials.
func TestDescribe(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, env, base, wantURL string
		local                    bool
	}{
		{name: "default", wantURL: "https://generativelanguage.googleapis.com/"},
		{name: "stand-in from the environment", env: "http://127.0.0.1:8089", wantURL: "http://127.0.0.1:8089", local: true},
		{name: "explicit localhost", base: "http://localhost:9999/", wantURL: "http://localhost:9999/", local: true},
		{name: "IPv6 loopback", base: "http://[::1]:8089", wantURL: "http://[::1]:8089", local: true},
		{name: "proxy with credentials", base: "https://user:pa55@proxy.example.com/gemini?key=" + testKey + "#x", wantURL: "https://proxy.example.com/gemini"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearGeminiEnv(t)
			if tc.env != "" {
				t.Setenv("GOOGLE_GEMINI_BASE_URL", tc.env)
			}
			c, err := NewClient(ctx, Config{APIKey: testKey, BaseURL: tc.base})
			require.NoError(t, err)
			d := Describe(c, testModel)
			assert.Equal(t, testModel, d.Model)
			assert.Equal(t, backendGeminiAPI, d.Backend)
			assert.Equal(t, tc.wantURL, d.BaseURL)
			assert.Equal(t, tc.local, d.Local)
			assert.NotContains(t, d.BaseURL, testKey)
			assert.NotContains(t, d.BaseURL, "pa55")
		})
	}
	t.Run("vertex express", func(t *testing.T) {
		clearGeminiEnv(t)
		c, err := NewClient(ctx, Config{APIKey: testKey, Vertex: true})
		require.NoError(t, err)
		d := Describe(c, testModel)
		assert.Equal(t, backendVertexExpress, d.Backend)
		assert.False(t, d.Local)
	})
}
