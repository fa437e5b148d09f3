package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/intel"
	"github.com/secops-agent/investigator/internal/testenv"
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
	base := func() settings {
		return workerSettings(registryWith(t, tools.NewAskUser()), nil, "gemini-2.5-flash", "", []string{"k1"}, map[string]float64{"virustotal": 0.1, "otx": 0})
	}
	fp := base().fingerprint()
	require.Len(t, fp, 12)
	require.Equal(t, fp, base().fingerprint(), "stable for the same settings")

	vt, _ := intel.Tools(intel.Config{VirusTotal: intel.Provider{APIKey: "secret-key"}}, nil)
	changed := []settings{
		workerSettings(registryWith(t, append(vt, tools.NewAskUser())...), nil, "gemini-2.5-flash", "", []string{"k1"}, map[string]float64{"virustotal": 0.1, "otx": 0}),
		workerSettings(registryWith(t, tools.NewAskUser()), nil, "gemini-2.5-pro", "", []string{"k1"}, map[string]float64{"virustotal": 0.1, "otx": 0}),
		workerSettings(registryWith(t, tools.NewAskUser()), nil, "gemini-2.5-flash", "", []string{"k2", "k1"}, map[string]float64{"virustotal": 0.1, "otx": 0}),
		workerSettings(registryWith(t, tools.NewAskUser()), nil, "gemini-2.5-flash", "", []string{"k1"}, map[string]float64{"virustotal": 0.2, "otx": 0}),
	}
	for i, s := range changed {
		require.NotEqual(t, fp, s.fingerprint(), "change %d", i)
	}
}

// A worker whose settings differ from a running worker's on the same queue
// refuses to start with a sentence that says so; one with the same settings,
// or of another build, starts.
func TestCheckPeersOnARealServer(t *testing.T) {
	ctx := context.Background()
	srv, err := testenv.StartTemporal(ctx, testenv.WithoutSearchAttributes())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
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
