package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/internal/testenv"
)

const exampleAlert = "../examples/alerts/guardduty-ssh-bruteforce.json"

// TestFirestoreUnreachable: with nothing listening where Firestore should
// be (the client would wait for it forever), every command that needs it,
// investigate of a valid alert first, ends with one sentence once the call
// timeout passes.
func TestFirestoreUnreachable(t *testing.T) {
	port, err := testenv.FreePort()
	require.NoError(t, err)
	host := fmt.Sprintf("127.0.0.1:%d", port)
	t.Setenv("FIRESTORE_EMULATOR_HOST", host)
	t.Setenv("GOOGLE_CLOUD_PROJECT", testenv.Project)
	want := fmt.Sprintf("Firestore at %s did not answer within 300ms; is the emulator running?", host)
	for _, args := range [][]string{
		{"investigate", "--alert", exampleAlert},
		{"investigate", "--alert-id", "guardduty-b6b95f1bc667"},
		{"alert", "import", exampleAlert, exampleAlert},
		{"alert", "list"},
		{"alert", "show", "guardduty-b6b95f1bc667"},
		{"memory", "list"},
		{"memory", "show", "m-1"},
		{"memory", "delete", "m-1"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			_, err := runCLI(t, noTemporal, append(args, "--call-timeout", "300ms")...)
			require.EqualError(t, err, want)
		})
	}
}

func TestCallTimeoutMustBePositive(t *testing.T) {
	_, err := runCLI(t, noTemporal, "alert", "list", "--call-timeout", "0s")
	require.EqualError(t, err, "--call-timeout must be positive, not 0s")
}

// silentClient is a Temporal that never answers a describe.
type silentClient struct{ client.Client }

func (silentClient) Close() {}

func (silentClient) DescribeWorkflowExecution(ctx context.Context, _, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestTreeGivesUpWhenTemporalDoesNotAnswer(t *testing.T) {
	_, err := runCLI(t, func() (client.Client, error) { return silentClient{}, nil }, "tree", "inv", "--call-timeout", "200ms", "--temporal-address", "127.0.0.1:7233")
	require.EqualError(t, err, "Temporal at 127.0.0.1:7233 did not answer within 200ms; is the server running?")
}

// TestBadEnvironmentValue: a variable that sets a flag and does not parse
// is one sentence naming it, before anything is dialed (it was false in
// silence: TEMPORAL_TLS=yes connected in clear).
func TestBadEnvironmentValue(t *testing.T) {
	t.Setenv("TEMPORAL_TLS", "yes")
	_, err := runCLI(t, noTemporal, "status", "inv")
	require.EqualError(t, err, `TEMPORAL_TLS="yes" is not true or false (it sets --temporal-tls)`)
	_, err = runCLI(t, noTemporal, "status", "inv", "--temporal-tls=false", "--call-timeout", "1ms")
	require.NotContains(t, fmt.Sprint(err), "TEMPORAL_TLS", "the flag overrides it")
}

// noWorkerClient is a Temporal that starts workflows no worker ever runs.
type noWorkerClient struct{ silentClient }

func (noWorkerClient) ExecuteWorkflow(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	return waitingRun{}, nil
}

// waitingRun is a run whose result never comes.
type waitingRun struct{ client.WorkflowRun }

func (waitingRun) Get(ctx context.Context, _ any) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestToolsHonoursTheCallTimeout: starter tools with no worker gives up
// after --call-timeout, not a fixed 20 s, and says how long it waited.
func TestToolsHonoursTheCallTimeout(t *testing.T) {
	start := time.Now()
	_, err := runCLI(t, func() (client.Client, error) { return noWorkerClient{}, nil }, "tools", "--call-timeout", "200ms")
	require.EqualError(t, err, `no worker answered on task queue "investigations" within 200ms: is the worker running?`)
	require.Less(t, time.Since(start), 5*time.Second)
}
