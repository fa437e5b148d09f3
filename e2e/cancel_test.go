package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/secops-agent/investigator/gemini/geminitest"
)

// TestStarterCancel: `starter cancel` ends a running investigation as
// Canceled; following it then says "cancelled" in one sentence with a
// non-zero exit, and a second cancel or an unknown ID is one sentence too.
func TestStarterCancel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stepAsked := make(chan struct{})
	var once sync.Once
	model.use(t, func(r *geminitest.Request) geminitest.Reply {
		if r.Phase() == geminitest.PhasePlan {
			return geminitest.JSON(map[string]any{"objective": "o", "continues_active_plan": false, "steps": []map[string]any{
				{"id": "1", "description": "Read the alert.", "tools": []string{"get_alert"}, "expected": "details"}}})
		}
		once.Do(func() { close(stepAsked) })
		select { // the step's model call runs until the investigation is cancelled
		case <-release:
		case <-time.After(30 * time.Second):
		}
		return geminitest.Text("late")
	})
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--detach")
	require.Equal(t, 0, res.code, res.stderr)
	id := workflowIDFrom(t, res.stdout)
	select {
	case <-stepAsked:
	case <-time.After(time.Minute):
		t.Fatal("the step never asked the model")
	}

	c := starter(t, nil, "cancel", id)
	require.Equal(t, 0, c.code, c.stderr)
	require.Contains(t, c.stdout, "cancellation requested: investigation "+id)
	waitClosed(t, id)
	d, err := tc.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_CANCELED, d.GetWorkflowExecutionInfo().GetStatus())

	w := starter(t, nil, "watch", id)
	require.NotEqual(t, 0, w.code, "following a cancelled investigation is no success:\n%s", w.stdout)
	require.Equal(t, "error: investigation "+id+" was cancelled: it ended without a conclusion\n", w.stderr)
	t.Logf("REPORT starter watch on a cancelled investigation: exit %d, %s", w.code, strings.TrimSpace(w.stderr))

	again := starter(t, nil, "cancel", id)
	require.Equal(t, 1, again.code)
	require.Equal(t, "error: investigation "+id+" has already ended (cancelled)\n", again.stderr)
	unknown := starter(t, nil, "cancel", "investigation-nope")
	require.Equal(t, 1, unknown.code)
	require.Equal(t, "error: no investigation with ID investigation-nope\n", unknown.stderr)
}
