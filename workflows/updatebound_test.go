package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/investigation"
)

// TestRecordIdleUpdateBound records idle-updates.history.json
// (UPDATE_TESTDATA=1) or <label>-idle-updates.history.json on a Temporal
// dev server, with an unversioned worker and scripted activities: an
// investigation with MaxHistoryEvents 50 (an idle bound of 25 updates)
// concludes, then takes 25 hints while idle. Under the idle-update-bound
// gate the run continues as new; before it, it kept waiting, and a stop
// closes it.
func TestRecordIdleUpdateBound(t *testing.T) {
	const queue, id = "record-idle-updates", "fixture-idle-updates"
	ctx, c, label := recordOn(t, queue, func(w worker.Worker) { w.RegisterActivity(&scripted{}) })

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, investigation.WorkflowName,
		investigation.Input{AlertID: "a1", Limits: investigation.Limits{MaxHistoryEvents: 50}})
	require.NoError(t, err)
	waitIdle(ctx, t, c, id, "the first exchange concludes")
	for i := range 25 {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, RunID: run.GetRunID(), UpdateName: investigation.UpdateHint,
			Args: []any{fmt.Sprintf("hint %d", i+1)}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, nil))
	}
	closed := func() bool {
		d, err := c.DescribeWorkflowExecution(ctx, id, run.GetRunID())
		return err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
	// Under the gate the run closes within moments; before it, it waits.
	deadline := time.Now().Add(5 * time.Second)
	for !closed() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !closed() {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, RunID: run.GetRunID(), UpdateName: investigation.UpdateStop,
			Args: []any{"enough"}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, nil))
		require.Eventually(t, closed, time.Minute, 100*time.Millisecond, "the stopped run closes")
	}
	saveFixture(ctx, t, c, id, run.GetRunID(), "idle-updates.history.json", label)
}

// serverUpdateLimit is the Temporal server's default bound on the updates
// one run admits (history.maxTotalUpdates): past it every update, stop and
// ask included, fails with FailedPrecondition.
const serverUpdateLimit = 2000

// updateLoop sends n updates, the ith (name, arg) = next(i), the first
// after delay and each next one every later (workflow time). Each
// callback registers the next, since the test environment queues at most
// 1,000 callbacks.
func (h *harness) updateLoop(delay, every time.Duration, n int, next func(i int) (string, any)) []*updateResult {
	results := make([]*updateResult, n)
	for i := range results {
		results[i] = &updateResult{}
	}
	var send func(i int)
	send = func(i int) {
		res := results[i]
		name, arg := next(i)
		h.updates++
		h.env.UpdateWorkflow(name, fmt.Sprintf("%s-%d", name, h.updates), &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { res.rejected = err; res.done = true },
			OnComplete: func(v any, err error) {
				res.done, res.err = true, err
			},
		}, arg)
		if i+1 < n {
			h.env.RegisterDelayedCallback(func() { send(i + 1) }, every)
		}
	}
	h.env.RegisterDelayedCallback(func() { send(0) }, delay)
	return results
}

// accepted counts the updates a test sent that the run accepted.
func accepted(results []*updateResult) int {
	n := 0
	for _, r := range results {
		if r.done && r.rejected == nil {
			n++
		}
	}
	return n
}

// The attack at idle: a loop of 2,100 hints after the conclusion, and no
// follow-up. Before the bound, one run took them all and the server would
// have refused its 2,001st update, the analyst's stop or ask included. The
// run now continues as new once idle with 500 updates taken; the next run
// starts counting again and keeps the first run's idle deadline.
func TestHintLoopAtIdleContinuesAsNew(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	hints := h.updateLoop(time.Minute, time.Second, serverUpdateLimit+100, func(i int) (string, any) {
		return investigation.UpdateHint, fmt.Sprintf("hint %d", i)
	})
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	h.env.SetStartTime(start)
	h.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1"})
	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "the idle run continues as new: %v", h.env.GetWorkflowError())
	took := accepted(hints)
	require.Less(t, took, serverUpdateLimit/2, "the run continued well before the server's limit")
	require.GreaterOrEqual(t, took, 500)
	next := carriedState(t, can)
	require.Equal(t, took, next.Steering.HintCount, "every hint taken is carried")
	raw, err := json.Marshal(next)
	require.NoError(t, err)
	var carried struct {
		Steering map[string]any `json:"steering"`
	}
	require.NoError(t, json.Unmarshal(raw, &carried))
	require.NotContains(t, carried.Steering, "run_updates", "the next run counts its own updates")

	// The next run takes nothing: it closes at the first run's idle
	// deadline (the conclusion came within a minute of the start), and
	// does not continue as new again.
	h2 := newHarness(t)
	h2.env.SetStartTime(h.env.Now())
	h2.env.ExecuteWorkflow(investigation.WorkflowName, investigation.Input{AlertID: "a1"}, next)
	require.True(t, h2.env.IsWorkflowCompleted())
	require.NoError(t, h2.env.GetWorkflowError(), "the continued run does not continue again")
	require.WithinDuration(t, start.Add(time.Minute+investigation.DefaultIdleTimeout), h2.env.Now(), time.Minute, "it closed at the first run's idle deadline")
}

// The attack during an exchange, where continue-as-new must wait: while
// the plan waits for approval, a loop of revisions (each one a new plan)
// and hints. Past 1,500 updates they are refused with the reason; stop,
// ask and approve still get through, so the run stays under the server's
// limit with room for them.
func TestSteeringLoopDuringAnExchangeLeavesRoomForStop(t *testing.T) {
	h := newHarness(t)
	h.onPlan(oneStepPlan(), nil)
	// The approved step still runs when the stop comes.
	h.onSlowTurn(5*time.Minute, conclusionOnly)
	h.onReflect(noChange)
	loop := h.updateLoop(time.Minute, time.Second/2, serverUpdateLimit, func(i int) (string, any) {
		if i%2 == 0 {
			return investigation.UpdateRevise, fmt.Sprintf("revise %d", i)
		}
		return investigation.UpdateHint, fmt.Sprintf("hint %d", i)
	})
	end := time.Minute + serverUpdateLimit*time.Second/2
	ask := h.update(end+time.Second, investigation.UpdateAsk, "And host-8?")
	approve := h.update(end+2*time.Second, investigation.UpdateApprove, investigation.Approval{})
	stop := h.update(end+3*time.Second, investigation.UpdateStop, "enough")
	_, err := h.run(t, investigation.Input{AlertID: "a1", ApprovePlan: true})
	require.NoError(t, err)
	took := accepted(loop)
	require.LessOrEqual(t, took, 1500, "revisions and hints stop at the bound")
	last := loop[len(loop)-1]
	require.ErrorContains(t, last.rejected, "stop, ask", "the refusal says what still works")
	for name, r := range map[string]*updateResult{"ask": ask, "approve": approve, "stop": stop} {
		require.True(t, r.done, name)
		require.NoError(t, r.rejected, "%s gets through past the bound", name)
	}
	require.LessOrEqual(t, took+3, serverUpdateLimit, "the server would have taken every update the run accepted")
}
