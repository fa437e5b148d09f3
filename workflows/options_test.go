package workflows

import (
	"testing"

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
