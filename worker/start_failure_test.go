package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// warmUpFrames are the frames of the store's warm-up and of what reports it.
var warmUpFrames = regexp.MustCompile(`main\.(warmUpFirestore|startWarmUp|\(\*warmUp\)|newCommand\.func)`)

// TestFailedStartSaysOnlyWhy: a start that fails after the store is opened
// (here a payload key file that does not exist) returns that reason, with
// the store's warm-up over and nothing said about Firestore. Before, the
// failed start closed the store under the warm-up, which then warned that
// Firestore did not answer: the user was sent to look at the wrong thing.
// The store is a port that accepts and never answers, so the warm-up is
// still reading when the start fails.
func TestFailedStartSaysOnlyWhy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for k, v := range map[string]string{
		"FIRESTORE_EMULATOR_HOST": l.Addr().String(), "GOOGLE_CLOUD_PROJECT": "", "GEMINI_API_KEY": "test-key",
		"GOOGLE_GENAI_USE_VERTEXAI": "", "PAYLOAD_KEY_FILE": filepath.Join(t.TempDir(), "missing-keys"),
		"BIGQUERY_TABLES_CONFIG": "", "MCP_CONFIG": "", "OTEL_EXPORTER_OTLP_ENDPOINT": "", "TEMPORAL_ADDRESS": "127.0.0.1:1",
	} {
		t.Setenv(k, v)
	}
	logs, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	stderr := os.Stderr
	os.Stderr = logs // the worker's logger writes here
	defer func() { os.Stderr = stderr }()

	err = newCommand().Execute()
	require.ErrorContains(t, err, "payload key file")
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	require.NotRegexp(t, warmUpFrames, stacks, "the warm-up is over when the start returns")
	written, err := os.ReadFile(logs.Name())
	require.NoError(t, err)
	require.NotContains(t, string(written), "Firestore", "a failed start warns of nothing else")
}
