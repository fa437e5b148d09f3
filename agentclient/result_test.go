package agentclient

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/mocks"
)

// TestResultReportsItsOwnDeadline: the server ends a long poll with
// DEADLINE_EXCEEDED a moment before the caller's deadline; Result reports
// the caller's deadline (what starter eval reads to say "no conclusion
// within" and cancel), and passes any other error on.
func TestResultReportsItsOwnDeadline(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want error
	}{
		"server deadline": {serviceerror.NewDeadlineExceeded("context deadline exceeded"), context.DeadlineExceeded},
		"other failure":   {serviceerror.NewNotFound("workflow not found"), nil},
	} {
		t.Run(name, func(t *testing.T) {
			run := mocks.NewWorkflowRun(t)
			run.On("Get", mock.Anything, mock.Anything).Return(tc.err)
			tcl := mocks.NewClient(t)
			tcl.On("GetWorkflow", mock.Anything, "wf", "").Return(run)
			c, err := New(tcl, Options{})
			require.NoError(t, err)

			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err = c.Result(ctx, "wf")
			if tc.want == nil {
				require.ErrorIs(t, err, tc.err)
				require.NoError(t, ctx.Err(), "an answer that is not a deadline comes back at once")
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, ctx.Err(), tc.want)
		})
	}
}
