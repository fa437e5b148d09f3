package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/gpubsub"
	"github.com/secops-agent/investigator/investigation"
)

// TestClusterKillAnything: 50 alerts published to the cluster's alerts
// topic reach its two intakes, and its two workers investigate them, while
// the test kills (SIGKILL, the whole process group) one at a time a worker,
// an intake, the history service and the matching service, each started
// again by `bin/stack cluster` as an operator would. Every alert ends in
// exactly one investigation, which concludes exactly once, and no model
// call that had completed is made again: the model counts its answers by
// request identity, and every repeat must match an activity attempt that
// Temporal recorded as a retry (an attempt cut by a kill).
func TestClusterKillAnything(t *testing.T) {
	m := newModel(t, 0)
	// Without the BigQuery sub-agent, as the intake's e2e tests: the
	// emulator fails its own queries ("connection is already closed")
	// under 50 investigations at once, which would test the emulator.
	c := startCluster(t, m, withEnv("STACK_BIGQUERY_TABLES", "none"))
	const total = 50
	findings := make([][]byte, total)
	ids := map[string]bool{}
	nonce := time.Now().UnixNano()
	for i := range findings {
		id := fmt.Sprintf("%032d", nonce+int64(i))[:32]
		findings[i] = guardDuty(id, fmt.Sprintf("198.51.100.%d", i+1), i)
		ids[intake.WorkflowID("guardduty:123456789012:"+id)] = true
	}

	ctx := context.Background()
	clients := &gpubsub.Clients{}
	t.Setenv("PUBSUB_EMULATOR_HOST", c.addr("PUBSUB"))
	defer clients.Close()
	pub, err := clients.Publisher(ctx, intake.Topic("demo-investigator", intake.TopicAlerts))
	require.NoError(t, err)
	publish := func(msgs [][]byte, gap time.Duration) {
		for _, b := range msgs {
			_, err := pub.Publish(ctx, &pubsub.Message{Data: b}).Get(ctx)
			require.NoError(t, err)
			time.Sleep(gap)
		}
	}
	concluded := func() int {
		st, err := c.status()
		if err != nil {
			return -1
		}
		return int(st.Started) - st.Running
	}
	waitConcluded := func(n int) {
		require.Eventually(t, func() bool { return concluded() >= n }, 5*time.Minute, 200*time.Millisecond, "concluded %d of %d", concluded(), n)
	}

	began := time.Now()
	publish(findings[:25], 0)
	var kills []string
	killAndRestart := func(name string) {
		c.kill(name)
		took := c.restart()
		kills = append(kills, fmt.Sprintf("%s at %s (back in %s)", name, time.Since(began).Round(time.Second), took.Round(100*time.Millisecond)))
	}
	waitConcluded(3)
	killAndRestart("worker-1")
	// The rest arrive while an intake dies: its messages not acknowledged
	// yet come back to the other one (or to it, restarted).
	go publish(findings[25:], 100*time.Millisecond)
	time.Sleep(time.Second)
	killAndRestart("intake-1")
	waitConcluded(15)
	killAndRestart("temporal-history")
	waitConcluded(25)
	killAndRestart("temporal-matching")

	var st intake.Status
	require.Eventually(t, func() bool {
		st, err = c.status()
		return err == nil && st.Started >= total && st.Running == 0 && st.Waiting == 0
	}, 10*time.Minute, time.Second, "the intake did not settle: %+v", st)
	took := time.Since(began)

	// One investigation per alert, one run each (no continue-as-new here).
	runs := map[string]int{}
	for _, page := range c.runs(fmt.Sprintf("WorkflowType = %q", investigation.WorkflowName)) {
		for _, ex := range page.GetExecutions() {
			runs[ex.GetExecution().GetWorkflowId()]++
			require.True(t, ids[ex.GetExecution().GetWorkflowId()], "an investigation of no published alert: %s", ex.GetExecution().GetWorkflowId())
		}
	}
	require.Len(t, runs, total, "one investigation per alert")
	for id, n := range runs {
		require.Equal(t, 1, n, "%s: runs", id)
	}
	require.Equal(t, int64(total), st.Started)

	// Each concluded once, and every activity retry is counted: the
	// attempts a kill cut short, which may have reached the model.
	retries, conclusions := 0, map[string]int{}
	for _, page := range c.runs(fmt.Sprintf("WorkflowType != %q", intake.AdmissionWorkflowName)) {
		for _, ex := range page.GetExecutions() {
			scheduled := map[int64]string{}
			for _, e := range c.history(ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()) {
				if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
					scheduled[e.GetEventId()] = a.GetActivityType().GetName()
				}
				if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
					retries += int(a.GetAttempt()) - 1
				}
				if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] == "Conclude" {
					conclusions[ex.GetExecution().GetWorkflowId()]++
				}
			}
			if ex.GetType().GetName() == investigation.WorkflowName {
				require.NotEqual(t, enums.WORKFLOW_EXECUTION_STATUS_FAILED, ex.GetStatus(), ex.GetExecution().GetWorkflowId())
			}
		}
	}
	for id := range ids {
		require.Equal(t, 1, conclusions[id], "%s: conclusions", id)
	}
	// Delivery follows the conclusion (PublishResult, retried through the
	// kills): the verdicts are read until every one is there.
	var verdicts []*pubsub.Message
	keys := map[string]int{}
	require.Eventually(t, func() bool {
		got, err := clients.Drain(ctx, intake.Subscription("demo-investigator", intake.SubscriptionVerdicts), 3*time.Second)
		require.NoError(t, err)
		verdicts = append(verdicts, got...)
		for _, v := range got {
			keys[v.Attributes["idempotency_key"]]++
		}
		return len(keys) >= total
	}, 3*time.Minute, time.Second, "verdicts: %d distinct of %d", len(keys), total)
	require.Len(t, keys, total, "one verdict per investigation")

	answered, repeated := m.counts()
	require.LessOrEqual(t, repeated, retries, "a model call answered before was made again without an activity retry (%d repeats, %d retries)", repeated, retries)
	t.Logf("REPORT cluster kill: %d investigations through 2 intakes and 2 workers in %s; killed %s; %d concluded once each, %d verdict messages (%d distinct); model: %d answers, %d repeated an identity, %d activity retries recorded",
		total, took.Round(time.Second), strings.Join(kills, ", "), len(conclusions), len(verdicts), len(keys), answered, repeated, retries)
}

// guardDuty is a GuardDuty finding of account 123456789012.
func guardDuty(id, ip string, i int) []byte {
	b, _ := json.Marshal(map[string]any{
		"schemaVersion": "2.0", "accountId": "123456789012", "region": "us-east-1", "id": id,
		"type": "UnauthorizedAccess:EC2/SSHBruteForce", "severity": 5, "title": fmt.Sprintf("SSH brute force %d", i),
		"createdAt": "2026-11-20T08:00:00Z", "updatedAt": "2026-11-20T08:15:00Z",
		"resource": map[string]any{"resourceType": "Instance", "instanceDetails": map[string]any{"instanceId": fmt.Sprintf("i-%08d", i)}},
		"service": map[string]any{"serviceName": "guardduty", "count": 10, "action": map[string]any{
			"actionType": "NETWORK_CONNECTION", "networkConnectionAction": map[string]any{
				"connectionDirection": "INBOUND", "remoteIpDetails": map[string]any{"ipAddressV4": ip}}}},
	})
	return b
}
