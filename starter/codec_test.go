package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func codecKeyFile(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "payload.keys")
	require.NoError(t, os.WriteFile(p, []byte("k1:"+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600))
	return p
}

func runCodecServer(ctx context.Context, out io.Writer, args ...string) error {
	root := newRootApp(&app{}, out)
	root.SetArgs(append([]string{"codec-server", "--log-level", "error"}, args...))
	root.SetErr(io.Discard)
	return root.ExecuteContext(ctx)
}

func TestCodecServerCommand(t *testing.T) {
	t.Setenv("PAYLOAD_KEY_FILE", "")
	t.Setenv("TEMPORAL_UI_URL", "")
	err := runCodecServer(context.Background(), io.Discard)
	require.EqualError(t, err, "the codec server needs the payload key file: set --payload-key-file or PAYLOAD_KEY_FILE")
	keys := codecKeyFile(t)
	err = runCodecServer(context.Background(), io.Discard, "--payload-key-file", keys, "--web-ui-origin", "http://localhost:8233/namespaces")
	require.EqualError(t, err, `--web-ui-origin "http://localhost:8233/namespaces" is not an origin like http://localhost:8233`)

	// It serves until its context ends; the default origin is the UI URL's.
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runCodecServer(ctx, pw, "--payload-key-file", keys, "--listen", "127.0.0.1:0", "--ui-url", "http://127.0.0.1:9999/ui")
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`^Codec server on (http://127\.0\.0\.1:\d+) `).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	base := m[1]
	require.Contains(t, line, "keys k1 (encrypts with k1), Web UI origin http://127.0.0.1:9999, no token: the Web UI's origin may decode, nothing else")
	req, err := http.NewRequest(http.MethodOptions, base+"/decode", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "http://127.0.0.1:9999")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, "http://127.0.0.1:9999", resp.Header.Get("Access-Control-Allow-Origin"))
	cancel()
	require.NoError(t, <-done, "a stop is a clean exit")
}

// TestCodecServerOffLoopbackNeedsAToken: an address other machines reach
// is refused without a token; with one, every request needs it, the Web UI's
// origin included.
func TestCodecServerOffLoopbackNeedsAToken(t *testing.T) {
	t.Setenv("TEMPORAL_UI_URL", "")
	t.Setenv("CODEC_SERVER_TOKEN", "")
	keys := codecKeyFile(t)
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		err := runCodecServer(context.Background(), io.Discard, "--payload-key-file", keys, "--listen", listen)
		require.Error(t, err, listen)
		require.Regexp(t, `^the codec server listens on \S+, which is not a loopback address, so it needs a token: set CODEC_SERVER_TOKEN \(or --token\), or listen on 127\.0\.0\.1$`, err.Error())
	}

	t.Setenv("CODEC_SERVER_TOKEN", "t0ken")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runCodecServer(ctx, pw, "--payload-key-file", keys, "--listen", "0.0.0.0:0")
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "token required for every request")
	port := regexp.MustCompile(`^Codec server on http://\S+:(\d+) `).FindStringSubmatch(line)
	require.NotNil(t, port, line)
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+port[1]+"/decode", strings.NewReader(`{"payloads":[]}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://localhost:8233")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the Origin header proves nothing off loopback")
	cancel()
	require.NoError(t, <-done)
}

// TestCodecServerHelpHidesTheToken: the token comes from the environment
// when --token is not given, and --help never prints it as a default.
func TestCodecServerHelpHidesTheToken(t *testing.T) {
	t.Setenv("CODEC_SERVER_TOKEN", "t0ken-from-the-env")
	var out strings.Builder
	require.NoError(t, runCodecServer(context.Background(), &out, "--help"))
	require.Contains(t, out.String(), "--token string")
	require.NotContains(t, out.String(), "t0ken-from-the-env")
}
