package testenv

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/internal/procgroup"
)

func TestFreePort(t *testing.T) {
	port, err := FreePort()
	require.NoError(t, err)
	require.Positive(t, port)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	require.NoError(t, err, "the returned port should be free to listen on")
	require.NoError(t, l.Close())
}

func TestStartFirestoreResetAndStop(t *testing.T) {
	host, stop, err := StartFirestore()
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})

	resp, err := http.Get("http://" + host + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	t.Setenv("FIRESTORE_EMULATOR_HOST", host)
	ctx := t.Context()
	fs, err := firestore.NewClient(ctx, Project)
	require.NoError(t, err)
	defer fs.Close()
	doc := fs.Collection("things").Doc("one")
	_, err = doc.Set(ctx, map[string]any{"n": 1})
	require.NoError(t, err)
	snap, err := doc.Get(ctx)
	require.NoError(t, err)
	require.True(t, snap.Exists())

	require.NoError(t, ResetFirestore(host, Project))
	_, err = doc.Get(ctx)
	require.Equal(t, codes.NotFound, status.Code(err), "the document should be gone after ResetFirestore, got %v", err)

	_, port, err := net.SplitHostPort(host)
	require.NoError(t, err)
	require.NotEmpty(t, liveProcessesMentioning(t, "--port="+port), "the emulator's JVM should be found before stop")

	stop()
	stopped = true
	// The whole process group is gone: no live process is left, nothing
	// answers and the port can be bound again.
	assert.Empty(t, liveProcessesMentioning(t, "--port="+port), "emulator processes left after stop")
	_, err = net.DialTimeout("tcp", host, time.Second)
	require.Error(t, err, "nothing should listen on %s after stop", host)
	l, err := net.Listen("tcp", host)
	require.NoError(t, err, "the emulator port should be free after stop")
	require.NoError(t, l.Close())
	stop() // a second stop is harmless
}

func TestFirestoreSetsEnvironment(t *testing.T) {
	host := Firestore(t)
	require.Equal(t, host, os.Getenv("FIRESTORE_EMULATOR_HOST"))
	fs, err := firestore.NewClient(t.Context(), Project)
	require.NoError(t, err)
	defer fs.Close()
	_, err = fs.Collection("things").Doc("x").Set(t.Context(), map[string]any{"ok": true})
	require.NoError(t, err)
}

func TestResetFirestoreUnreachable(t *testing.T) {
	port, err := FreePort()
	require.NoError(t, err)
	err = ResetFirestore(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Project)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reset the Firestore emulator")
}

func TestTemporalCLILocation(t *testing.T) {
	t.Run("explicit path that does not exist", func(t *testing.T) {
		t.Setenv("TEMPORAL_CLI", filepath.Join(t.TempDir(), "nope"))
		_, err := TemporalCLI()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "TEMPORAL_CLI")
	})
	t.Run("missing from the cache", func(t *testing.T) {
		t.Setenv("TEMPORAL_CLI", "")
		t.Setenv("XDG_CACHE_HOME", t.TempDir())
		_, err := TemporalCLI()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "go tool task setup")
	})
	t.Run("found in the cache", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv("TEMPORAL_CLI", "")
		t.Setenv("XDG_CACHE_HOME", cache)
		want := filepath.Join(cache, "investigator", "bin", "temporal")
		require.NoError(t, os.MkdirAll(filepath.Dir(want), 0o755))
		require.NoError(t, os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755))
		got, err := TemporalCLI()
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
	t.Run("not executable", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "temporal")
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		t.Setenv("TEMPORAL_CLI", p)
		_, err := TemporalCLI()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not executable")
	})
}

func TestStartTemporal(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := StartTemporal(ctx)
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop()
		}
	})

	c, err := client.DialContext(ctx, client.Options{HostPort: srv.FrontendHostPort(), Namespace: "default"})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err)

	attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	require.NoError(t, err)
	assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, attrs.GetCustomAttributes()[alertIDAttribute],
		"the AlertId search attribute should be registered as Keyword")
	assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, attrs.GetCustomAttributes()[verdictAttribute])

	host := srv.FrontendHostPort()
	require.NoError(t, srv.Stop())
	stopped = true
	_, err = net.DialTimeout("tcp", host, time.Second)
	require.Error(t, err, "nothing should listen on %s after Stop", host)
}

func TestStartTemporalWithoutSearchAttributes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := StartTemporal(ctx, WithoutSearchAttributes())
	require.NoError(t, err)
	defer func() { _ = srv.Stop() }()
	attrs, err := srv.Client().OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	require.NoError(t, err)
	assert.Empty(t, attrs.GetCustomAttributes(), "no custom search attribute should be registered")
}

// liveProcessesMentioning lists the live (non-zombie) processes whose command
// line contains s.
func liveProcessesMentioning(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc on this system")
	}
	var found []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), s) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if state, _, ok := procgroup.ParseStat(stat); ok && state != 'Z' && state != 'X' {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found
}

func TestStartFirestoreMissingTools(t *testing.T) {
	t.Run("no gcloud", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, _, err := StartFirestore()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "gcloud CLI, which is not on PATH")
	})
	t.Run("no emulator component", func(t *testing.T) {
		root := t.TempDir()
		writeScript(t, filepath.Join(root, "bin", "gcloud"), "exit 1")
		require.NoError(t, os.MkdirAll(filepath.Join(root, "lib"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, "lib", "gcloud.py"), nil, 0o644))
		t.Setenv("PATH", filepath.Join(root, "bin"))
		_, _, err := StartFirestore()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "cloud-firestore-emulator is not installed")
	})
	t.Run("no java", func(t *testing.T) {
		bin := t.TempDir()
		writeScript(t, filepath.Join(bin, "gcloud"), "exit 1")
		t.Setenv("PATH", bin)
		t.Setenv("JAVA_HOME", "")
		_, _, err := StartFirestore()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "needs Java")
	})
	t.Run("emulator exits at once", func(t *testing.T) {
		bin := t.TempDir()
		writeScript(t, filepath.Join(bin, "gcloud"), "echo 'ERROR: something is broken' >&2; exit 1")
		t.Setenv("PATH", bin)
		t.Setenv("JAVA_HOME", bin)
		_, _, err := StartFirestore()
		require.Error(t, err)
		// "exited", not "no ready answer within": reported at once, not after the timeout.
		assert.Contains(t, err.Error(), "exited before it was ready")
		assert.Contains(t, err.Error(), "ERROR: something is broken", "the error carries the emulator's output")
	})
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
}

func TestBigQueryEmulatorEnvTurnsOffInvalidPtrCheck(t *testing.T) {
	got := bigQueryEmulatorEnv([]string{"HOME=/root", "GODEBUG=madvdontneed=1", "PATH=/bin"})
	assert.Equal(t, []string{"HOME=/root", "PATH=/bin", "GODEBUG=madvdontneed=1,invalidptr=0"}, got)

	got = bigQueryEmulatorEnv([]string{"GODEBUG=", "PATH=/bin"})
	assert.Equal(t, []string{"PATH=/bin", "GODEBUG=invalidptr=0"}, got)
}

func TestStartBigQueryRetriesAnEarlyExit(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "bigquery-emulator")
	writeScript(t, fake, `echo "$GODEBUG" >> '`+calls+`'; echo 'fatal error: invalid pointer found on stack' >&2; exit 2`)
	t.Setenv("BIGQUERY_EMULATOR", fake)
	t.Setenv("GODEBUG", "")

	_, _, err := StartBigQuery(Project, "")
	require.ErrorIs(t, err, errExitedEarly)
	assert.Contains(t, err.Error(), "fatal error: invalid pointer found on stack", "the error carries the emulator's output")
	raw, err := os.ReadFile(calls)
	require.NoError(t, err)
	assert.Equal(t, "invalidptr=0\ninvalidptr=0\ninvalidptr=0\n", string(raw), "three attempts, each with the pointer check off")
}
