package e2e

import (
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/investigation"
)

// TestWorkerKilledMidRun kills the worker (SIGKILL) while a model call is in
// flight. A new worker picks the investigation up where it was: the model
// call that was cut is retried once its heartbeat times out, and no model
// call that had completed is made again.
func TestWorkerKilledMidRun(t *testing.T) {
	inFlight := make(chan struct{})
	var turns, plans, others atomic.Int32
	model.use(t, func(r *geminitest.Request) geminitest.Reply {
		switch {
		case strings.Contains(strings.Join(r.SchemaProperties(), ","), "steps"):
			plans.Add(1)
			return geminitest.JSON(map[string]any{"objective": "o", "steps": []map[string]any{{"id": "1", "description": "Read the alert.", "tools": []string{"get_alert"}, "expected": "e"}}})
		case len(r.FunctionNames()) > 0 && len(r.FunctionResponses()) == 0:
			if turns.Add(1) == 1 {
				close(inFlight)
				time.Sleep(2 * time.Second) // the worker dies meanwhile: this answer is lost
			}
			return geminitest.Calls(&genai.FunctionCall{Name: "get_alert", Args: map[string]any{"id": exampleID(t)}})
		case len(r.FunctionResponses()) > 0:
			others.Add(1)
			return geminitest.Text("read")
		case r.Phase() == geminitest.PhaseReflect:
			others.Add(1)
			return geminitest.JSON(map[string]any{"achieved": true, "insights": []string{}, "plan_updates": []any{}})
		}
		others.Add(1)
		return geminitest.Conclusion("## Summary\nsurvived a worker crash", "true_positive", "medium")
	})
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--detach")
	require.Equal(t, 0, res.code, res.stderr)
	id := workflowIDFrom(t, res.stdout)
	<-inFlight
	killed := time.Now()
	require.NoError(t, stopWorker(syscall.SIGKILL))
	require.NoError(t, startWorker())

	st := waitFor(t, id, "the conclusion after the crash", func(s investigation.Status) bool { return s.Phase == investigation.PhaseIdle })
	recovered := time.Since(killed)
	require.Equal(t, int32(1), plans.Load(), "the plan, completed before the crash, was not asked for again")
	require.Equal(t, int32(2), turns.Load(), "only the model call cut by the crash ran twice")
	require.Equal(t, int32(3), others.Load(), "every later call ran once")
	require.Equal(t, 1, st.ToolCalls)

	var attempts []int32
	for _, e := range history(t, id).Events {
		if at := e.GetActivityTaskStartedEventAttributes(); at != nil {
			attempts = append(attempts, at.Attempt)
			if at.Attempt > 1 {
				require.Contains(t, at.LastFailure.GetMessage(), "activity Heartbeat timeout")
			}
		}
	}
	require.Contains(t, attempts, int32(2))
	require.Equal(t, 0, starter(t, nil, "stop", id).code)
	t.Logf("REPORT worker killed mid-call: investigation concluded %s after the SIGKILL (heartbeat timeout 10s)", recovered.Round(time.Second))
}
