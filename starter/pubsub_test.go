package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/testenv"
)

// unreachablePubSub points the client at a port where nothing listens.
func unreachablePubSub(t *testing.T) string {
	port, err := testenv.FreePort()
	require.NoError(t, err)
	host := fmt.Sprintf("127.0.0.1:%d", port)
	t.Setenv("PUBSUB_EMULATOR_HOST", host)
	return host
}

// TestPullEndsWhenPubSubIsUnreachable: the client's streaming pull retries
// an unreachable Pub/Sub for ever and its Receive returned only once the
// stream closed; pull still stops once --wait passes (and so at Ctrl-C).
func TestPullEndsWhenPubSubIsUnreachable(t *testing.T) {
	unreachablePubSub(t)
	client, err := pubsub.NewClient(testCtx(t), config.EmulatorProject)
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	sub := client.Subscriber(intake.Subscription(config.EmulatorProject, intake.SubscriptionVerdicts))
	done := make(chan error, 1)
	go func() {
		cmd := &cobra.Command{}
		cmd.SetOut(&strings.Builder{})
		done <- pull(testCtx(t), sub, cmd, 300*time.Millisecond, 10, time.Second)
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(8 * time.Second):
		t.Fatal("pull still runs 8 s after a wait of 300ms with Pub/Sub unreachable")
	}
}

// TestPullCommandNamesAnUnreachablePubSub: the command says so in one
// sentence once --call-timeout passes.
func TestPullCommandNamesAnUnreachablePubSub(t *testing.T) {
	unreachablePubSub(t)
	_, err := runCLI(t, noTemporal, "intake", "pull", "verdicts-watch", "--wait", "300ms", "--call-timeout", "500ms")
	require.EqualError(t, err, "Pub/Sub did not answer within 500ms (subscription projects/demo-investigator/subscriptions/verdicts-watch)")
}
