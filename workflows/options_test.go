package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// Every activity option set leaves room for a retry: an attempt bound at or
// over the retry budget would make the first failure final.
func TestOptionsLeaveRoomForARetry(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var got []workflow.ActivityOptions
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		for _, c := range []workflow.Context{llmOptions(ctx, "m"), bestEffortOptions(ctx, "b"), toolOptions(ctx, "t", defaultToolAttempt), storeOptions(ctx, "s")} {
			got = append(got, workflow.GetActivityOptions(c))
		}
		return nil
	})
	require.NoError(t, env.GetWorkflowError())
	for _, o := range got {
		require.Less(t, o.StartToCloseTimeout, o.ScheduleToCloseTimeout, o.Summary)
	}
}

// A provider call that may wait for the exchange's deadline counts its
// retries, so a failing provider is given up long before the deadline; one
// whose deadline is nearer than the retry budget keeps toolOptions whole.
func TestProviderOptionsCountRetries(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var far, near, plain workflow.ActivityOptions
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		far = workflow.GetActivityOptions(providerToolOptions(ctx, "t", defaultToolAttempt, 20*time.Minute))
		near = workflow.GetActivityOptions(providerToolOptions(ctx, "t", defaultToolAttempt, time.Minute))
		plain = workflow.GetActivityOptions(toolOptions(ctx, "t", defaultToolAttempt))
		return nil
	})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 20*time.Minute, far.ScheduleToCloseTimeout)
	require.Equal(t, plain.StartToCloseTimeout, far.StartToCloseTimeout)
	require.Equal(t, int32(providerAttempts), far.RetryPolicy.MaximumAttempts)
	require.Equal(t, plain, near)
	require.Zero(t, plain.RetryPolicy.MaximumAttempts, "toolOptions' policy is not changed")
}

// Every activity heartbeats (the worker's activities.Heartbeats), so every
// option set has a heartbeat timeout: an attempt on a killed worker is
// retried within heartbeatTimeout, not at the end of its attempt's bound
// (the admission's check included). ToolCatalog's one DescribeTools call,
// bounded at 10 s an attempt, needs none.
func TestEveryActivityHasAHeartbeatTimeout(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var got []workflow.ActivityOptions
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		for _, c := range []workflow.Context{llmOptions(ctx, "m"), bestEffortOptions(ctx, "b"), toolOptions(ctx, "t", defaultToolAttempt), storeOptions(ctx, "s"), deliveryOptions(ctx, "d"), checkOptions(ctx)} {
			got = append(got, workflow.GetActivityOptions(c))
		}
		return nil
	})
	require.NoError(t, env.GetWorkflowError())
	for _, o := range got {
		require.Equal(t, heartbeatTimeout, o.HeartbeatTimeout, o.Summary)
	}
}
