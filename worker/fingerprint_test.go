package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/intel"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/payloadcodec"
	"github.com/secops-agent/investigator/tools"
)

func registryWith(t *testing.T, ts ...tools.Tool) *tools.Registry {
	r, err := tools.NewRegistry(ts...)
	require.NoError(t, err)
	return r
}

// The fingerprint changes with anything workers must agree on, and not with
// the order things were configured in.
func TestFingerprint(t *testing.T) {
	k1 := keyRing(t, "k1:"+keyOf(1))
	base := func() settings {
		return workerSettings(registryWith(t, tools.NewAskUser()), nil, "gemini-2.5-flash", "", k1, map[string]float64{"virustotal": 0.1, "otx": 0})
	}
	fp := base().fingerprint()
	require.Len(t, fp, 12)
	require.Equal(t, fp, base().fingerprint(), "stable for the same settings")

	vt, _ := intel.Tools(intel.Config{VirusTotal: intel.Provider{APIKey: "secret-key"}}, nil)
	changed := []settings{
		workerSettings(registryWith(t, append(vt, tools.NewAskUser())...), nil, "gemini-2.5-flash", "", k1, map[string]float64{"virustotal": 0.1, "otx": 0}),
		workerSettings(registryWith(t, tools.NewAskUser()), nil, "gemini-2.5-pro", "", k1, map[string]float64{"virustotal": 0.1, "otx": 0}),
		workerSettings(registryWith(t, tools.NewAskUser()), nil, "gemini-2.5-flash", "", keyRing(t, "k2:"+keyOf(2), "k1:"+keyOf(1)), map[string]float64{"virustotal": 0.1, "otx": 0}),
		workerSettings(registryWith(t, tools.NewAskUser()), nil, "gemini-2.5-flash", "", nil, map[string]float64{"virustotal": 0.1, "otx": 0}),
		workerSettings(registryWith(t, tools.NewAskUser()), nil, "gemini-2.5-flash", "", k1, map[string]float64{"virustotal": 0.2, "otx": 0}),
	}
	for i, s := range changed {
		require.NotEqual(t, fp, s.fingerprint(), "change %d", i)
	}
}

// TestFingerprintTellsKeysWithOneIDApart: a key file regenerated under the
// same ID (a Secret recreated during a rolling restart) is another
// configuration: each side would fail to decrypt the other's payloads. The
// fingerprint tells them apart without carrying anything of the key.
func TestFingerprintTellsKeysWithOneIDApart(t *testing.T) {
	settingsWith := func(k *payloadcodec.Keys) settings {
		return workerSettings(registryWith(t, tools.NewAskUser()), nil, "m", "", k, nil)
	}
	old, regenerated := keyRing(t, "k1:"+keyOf(1)), keyRing(t, "k1:"+keyOf(2))
	require.Equal(t, settingsWith(old).fingerprint(), settingsWith(keyRing(t, "k1:"+keyOf(1))).fingerprint(), "the same key file")
	require.NotEqual(t, settingsWith(old).fingerprint(), settingsWith(regenerated).fingerprint(), "k1 is another key")

	raw, err := json.Marshal(settingsWith(old))
	require.NoError(t, err)
	for _, form := range []string{keyOf(1), hex.EncodeToString(bytes.Repeat([]byte{1}, payloadcodec.KeySize)), string(bytes.Repeat([]byte{1}, 8))} {
		require.NotContains(t, string(raw), form, "the settings carry no key material")
	}
}

// keyOf is a base64 AES-256 key of 32 bytes b.
func keyOf(b byte) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, payloadcodec.KeySize))
}

func keyRing(t *testing.T, lines ...string) *payloadcodec.Keys {
	t.Helper()
	k, err := payloadcodec.ParseKeys("keys", []byte(strings.Join(lines, "\n")))
	require.NoError(t, err)
	return k
}

// A worker whose settings differ from a running worker's on the same queue
// refuses to start with a sentence that says so; one with the same settings,
// or of another build, starts.
func TestCheckPeersOnARealServer(t *testing.T) {
	ctx := context.Background()
	srv, err := testenv.StartTemporal(ctx, testenv.WithoutSearchAttributes())
	require.NoError(t, err, "start the Temporal dev server") // as the other dev-server tests: no silent skip
	defer srv.Stop()
	c := srv.Client()
	running := worker.New(c, "q", worker.Options{Identity: identity("aaaaaaaaaaaa")})
	running.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: "noop"})
	running.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "noop"})
	require.NoError(t, running.Start())
	defer running.Stop()
	waitForPoller(t, c, "q")

	require.NoError(t, checkPeers(ctx, c, "q", "", "aaaaaaaaaaaa", time.Now()))
	err = checkPeers(ctx, c, "q", "", "bbbbbbbbbbbb", time.Now())
	require.ErrorContains(t, err, "runs other settings (aaaaaaaaaaaa, this one bbbbbbbbbbbb")
	require.NoError(t, checkPeers(ctx, c, "q", "build-2", "bbbbbbbbbbbb", time.Now()), "another build serves other runs")
	require.NoError(t, checkPeers(ctx, c, "q", "", "bbbbbbbbbbbb", time.Now().Add(2*pollerWindow)), "a worker silent that long has stopped")
}

// A worker of this host whose process has exited no longer counts: a
// restart with new settings must not wait minutes for its old poller entry.
func TestStoppedHere(t *testing.T) {
	host, _ := os.Hostname()
	require.False(t, stoppedHere(fmt.Sprintf("%d@%s", os.Getpid(), host)), "this process runs")
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	require.True(t, stoppedHere(fmt.Sprintf("%d@%s", cmd.Process.Pid, host)), "an exited process")
	require.False(t, stoppedHere(fmt.Sprintf("%d@other-host", cmd.Process.Pid)), "another host's process cannot be checked")
	require.False(t, stoppedHere("not a pid"))
}

func waitForPoller(t *testing.T, c client.Client, queue string) {
	t.Helper()
	require.Eventually(t, func() bool {
		r, err := c.DescribeTaskQueue(context.Background(), queue, 1)
		return err == nil && len(r.GetPollers()) > 0
	}, 10*time.Second, 50*time.Millisecond)
}
