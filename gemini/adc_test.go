package gemini

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/upstream"
)

// vertexWithTokenEndpoint is a Vertex AI client whose Application Default
// Credentials are a service account key that fetches its tokens from a
// server answering status and body.
func vertexWithTokenEndpoint(t *testing.T, status int, body string) *geminitest.Server {
	t.Helper()
	clearGeminiEnv(t)
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(tokenSrv.Close)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	sa, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "proj", "private_key_id": "kid",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "sa@proj.iam.gserviceaccount.com", "client_id": "123", "token_uri": tokenSrv.URL,
	})
	require.NoError(t, err)
	credFile := filepath.Join(t.TempDir(), "sa.json")
	require.NoError(t, os.WriteFile(credFile, sa, 0o600))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", credFile)
	srv := geminitest.NewServer(geminitest.Always(geminitest.Text("never")))
	t.Cleanup(srv.Close)
	return srv
}

// A service account key Google no longer accepts (a deleted or disabled
// key: the token endpoint answers 400 invalid_grant) is a credentials
// problem no retry fixes: it fails fast naming the credentials, not as
// "cannot reach Gemini" retried for the whole budget.
func TestADCTokenRefusedFailsFast(t *testing.T) {
	srv := vertexWithTokenEndpoint(t, http.StatusBadRequest,
		`{"error":"invalid_grant","error_description":"Invalid JWT Signature. <script>"}`)
	c, err := NewClient(context.Background(), Config{Vertex: true, Project: "proj", Location: "us-central1", BaseURL: srv.URL})
	require.NoError(t, err)
	_, err = Call(context.Background(), generate(c, nil))
	e := upstreamError(t, err)
	require.Equal(t, upstream.CredentialsRejected, e.Kind, "a refused ADC token is not an outage")
	require.False(t, e.Kind.Retryable())
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.Contains(t, e.Message, "HTTP 400 invalid_grant")
	require.Contains(t, e.Message, "gcloud auth application-default login")
	require.NotContains(t, e.Message, "<script>", "the token endpoint's description is not quoted")
	require.Empty(t, srv.Requests(), "no request reached Gemini")
}

// A token endpoint that is down is an outage: retried as before.
func TestADCTokenEndpointDownIsRetried(t *testing.T) {
	srv := vertexWithTokenEndpoint(t, http.StatusServiceUnavailable, `{"error":"temporarily_unavailable"}`)
	c, err := NewClient(context.Background(), Config{Vertex: true, Project: "proj", Location: "us-central1", BaseURL: srv.URL})
	require.NoError(t, err)
	_, err = Call(context.Background(), generate(c, nil))
	e := upstreamError(t, err)
	require.Equal(t, upstream.Unavailable, e.Kind)
}
