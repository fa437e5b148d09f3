package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// The released paths that only an unusual run takes, each recorded for the
// replay test (workflows/replay_test.go checks that each fixture still
// exercises its path): the time budget's timer cutting a call, a transcript
// entry the store lost, an ask_user question nobody answers, a plan nobody
// approves, and a step whose model call fails for good.

// oneStep is a model for a one-step investigation whose step calls tool
// with args on its first turn and then answers; reflection finds the
// objective achieved.
func oneStep(tool string, args map[string]any) geminitest.Handler {
	return func(r *geminitest.Request) geminitest.Reply {
		switch {
		case r.Phase() == geminitest.PhasePlan:
			return geminitest.JSON(map[string]any{"objective": "o", "continues_active_plan": false, "steps": []map[string]any{
				{"id": "1", "description": "Look it up.", "tools": []string{tool}, "expected": "facts"}}})
		case r.Phase() == geminitest.PhaseReflect:
			return geminitest.JSON(map[string]any{"insights": []string{}, "plan_updates": []any{}, "achieved": true})
		case r.Phase() == geminitest.PhaseConclude:
			return geminitest.Conclusion("## Summary\nconcluded", "undetermined", "low")
		case len(r.FunctionResponses()) == 0 && !finalTurn(r):
			return geminitest.Calls(&genai.FunctionCall{Name: tool, Args: args})
		}
		return geminitest.Text("looked it up")
	}
}

var vtLookup = map[string]any{"resource": "evil.example.com", "resource_type": "domain"}

// closeIdle stops an investigation that waits for follow-up questions, so
// its recorded history is that of a closed run.
func closeIdle(t *testing.T, id string) {
	t.Helper()
	stop := starter(t, nil, "stop", id)
	require.Equal(t, 0, stop.code, stop.stderr)
	waitClosed(t, id)
}

// TestTimeBudgetTimerCutsTheCall: a provider that does not answer, and a
// time budget of 8 s: the timer set for the budget cuts the call short at
// the deadline, the step answers from what it has, and the conclusion says
// the budget ended the exchange.
func TestTimeBudgetTimerCutsTheCall(t *testing.T) {
	release := make(chan struct{})
	intelSrv.onRequest(func() {
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
	})
	defer func() { intelSrv.onRequest(nil); close(release) }()
	model.use(t, oneStep("virustotal_lookup", vtLookup))
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--time-budget", "8s")
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "this exchange used its time budget of 8s")
	id := workflowIDFrom(t, res.stdout)
	closeIdle(t, id)
	saveHistory(t, history(t, id), "time-budget.history.json")
}

// TestLostTranscriptEntryRunsTheStepAgain: the store loses the step's first
// model turn while its tool call runs (a worker without the transcript
// cache reads every entry from Firestore); the next turn finds it missing
// and the step runs again under fresh keys instead of failing.
func TestLostTranscriptEntryRunsTheStepAgain(t *testing.T) {
	restartWorker(t, "WORKER_TRANSCRIPT_CACHE=0")
	ids := make(chan string, 1)
	var once sync.Once
	intelSrv.onRequest(func() {
		once.Do(func() {
			id := <-ids
			url := fmt.Sprintf("http://%s/v1/projects/%s/databases/(default)/documents/sessions/%s/entries/t1-step_1-i1", fsHost, testenv.Project, id)
			req, _ := http.NewRequest(http.MethodDelete, url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
		})
	})
	defer intelSrv.onRequest(nil)
	model.use(t, oneStep("virustotal_lookup", vtLookup))
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--detach")
	require.Equal(t, 0, res.code, res.stderr)
	id := workflowIDFrom(t, res.stdout)
	ids <- id
	st := waitFor(t, id, "the conclusion", func(s investigation.Status) bool { return s.Phase == investigation.PhaseIdle })
	require.Equal(t, plan.Done, st.Plan.Steps[0].Status)
	var keys []string
	missing := 0
	hist := history(t, id)
	for _, e := range hist.Events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == "ModelTurn" {
			var in struct{ Key string }
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in))
			keys = append(keys, in.Key)
		}
		if e.GetActivityTaskFailedEventAttributes().GetFailure().GetApplicationFailureInfo().GetType() == "TranscriptMissing" {
			missing++
		}
	}
	require.Equal(t, 1, missing, "the turn after the loss found its transcript incomplete")
	require.Equal(t, []string{"t1-step_1-i1", "t1-step_1-i2", "t1-step_1-r1-i1", "t1-step_1-r1-i2"}, keys, "the step ran again under fresh keys")
	closeIdle(t, id)
	saveHistory(t, history(t, id), "lost-transcript.history.json")
}

// TestAskUserTimesOut: the step asks the analyst, who does not answer
// within --answer-timeout; the step goes on without the fact.
func TestAskUserTimesOut(t *testing.T) {
	model.use(t, oneStep("ask_user", map[string]any{"question": "Is deploy a CI account?"}))
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--answer-timeout", "2s")
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "no answer: going on without it")
	id := workflowIDFrom(t, res.stdout)
	closeIdle(t, id)
	saveHistory(t, history(t, id), "ask-timeout.history.json")
}

// TestPlanNotApprovedInTime: a plan that waits for approval longer than
// --idle-timeout is not run; the investigation concludes that it was not
// approved and closes.
func TestPlanNotApprovedInTime(t *testing.T) {
	model.use(t, oneStep("get_alert", map[string]any{"id": "x"}))
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--approve-plan", "--idle-timeout", "3s")
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, "the plan was not approved within 3s")
	id := workflowIDFrom(t, res.stdout)
	waitClosed(t, id)
	saveHistory(t, history(t, id), "approval-timeout.history.json")
}

// TestFailingStep: the model refuses the step's request (HTTP 400, not
// retried): the investigation fails with one sentence naming the step.
func TestFailingStep(t *testing.T) {
	ok := oneStep("get_alert", map[string]any{"id": "x"})
	model.use(t, func(r *geminitest.Request) geminitest.Reply {
		if r.Phase() == geminitest.PhasePlan {
			return ok(r)
		}
		return geminitest.Error(400, "Request contains an invalid argument.", "")
	})
	res := starter(t, nil, "investigate", "--alert", exampleAlert)
	require.Equal(t, 1, res.code, res.stdout)
	require.Contains(t, res.stderr, "step_1 failed: ")
	id := workflowIDFrom(t, res.stdout)
	d, err := tc.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_FAILED, d.GetWorkflowExecutionInfo().GetStatus())
	saveHistory(t, history(t, id), "failed-step.history.json")
}

// restartWorker replaces the worker by one with env added to its
// environment, for the rest of the test.
func restartWorker(t *testing.T, env ...string) {
	t.Helper()
	swapWorker(t, env...)
	t.Cleanup(func() {
		require.NoError(t, stopWorker(syscall.SIGTERM))
		require.NoError(t, startWorker())
		waitPolling(t)
	})
}

// swapWorker kills the worker and starts one with env added to its
// environment, with no cleanup of its own (restartWorker's brings the usual
// worker back).
func swapWorker(t *testing.T, env ...string) {
	t.Helper()
	// SIGKILL: the worker may still be starting (its clean stop on SIGTERM
	// is TestMain's to check); a dead worker's polls end with its
	// connections.
	require.NoError(t, stopWorker(syscall.SIGKILL))
	saved := stack
	stack = append(slices.Clone(stack), env...)
	err := startWorker()
	stack = saved
	require.NoError(t, err)
	waitPolling(t)
}

// waitPolling waits until the worker just started polls for workflow tasks
// (its identity starts with its process ID), so that it is up when the next
// test, or the end of the tests, stops it.
func waitPolling(t *testing.T) {
	t.Helper()
	prefix := fmt.Sprintf("%d@", workerCmd.Process.Pid)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := tc.DescribeTaskQueue(context.Background(), "investigations", enums.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil {
			continue
		}
		for _, p := range resp.GetPollers() {
			if strings.HasPrefix(p.GetIdentity(), prefix) {
				return
			}
		}
	}
	t.Fatalf("the restarted worker did not poll within a minute:\n%s", workerLog.String())
}
