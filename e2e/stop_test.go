package e2e

import (
	"context"
	"fmt"
	"os"
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
	"github.com/secops-agent/investigator/investigation"
)

// slowModel answers every generateContent request after delay and counts
// the requests of each phase, with the time each arrived.
type slowModel struct {
	delay time.Duration
	mu    sync.Mutex
	seen  []struct {
		phase string
		at    time.Time
	}
}

func (m *slowModel) record(phase string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, struct {
		phase string
		at    time.Time
	}{phase, time.Now()})
}

// after counts the requests of each phase that arrived after t.
func (m *slowModel) after(t time.Time) map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := map[string]int{}
	for _, s := range m.seen {
		if s.at.After(t) {
			n[s.phase]++
		}
	}
	return n
}

// subAgentScript is a model for an investigation whose two steps ask the
// BigQuery sub-agent, which would take ten turns of one query each: it
// answers every generateContent request after m.delay and records its
// phase; childTurn(n) runs when the sub-agent's n-th (non-final) turn
// arrives.
func subAgentScript(m *slowModel, childTurn func(n int)) geminitest.Handler {
	var mu sync.Mutex
	turns := 0
	return func(r *geminitest.Request) geminitest.Reply {
		if r.Method != geminitest.MethodGenerateContent {
			vec := make([]float32, 768)
			vec[0] = 1
			return geminitest.Embeddings(vec)
		}
		child := strings.Contains(strings.Join(r.FunctionNames(), ","), "bigquery_query")
		if child && !finalTurn(r) {
			mu.Lock()
			turns++
			n := turns
			mu.Unlock()
			childTurn(n)
		}
		time.Sleep(m.delay)
		switch {
		case r.Phase() == geminitest.PhasePlan:
			m.record("plan")
			return geminitest.JSON(map[string]any{"objective": "o", "continues_active_plan": false, "steps": []map[string]any{
				{"id": "1", "description": "Ask the logs.", "tools": []string{"bigquery_agent"}, "expected": "logins"},
				{"id": "2", "description": "Ask the logs again.", "tools": []string{"bigquery_agent"}, "expected": "more"}}})
		case r.Phase() == geminitest.PhaseConclude:
			m.record("conclude")
			return geminitest.Conclusion("## Summary\nstopped early", "undetermined", "low")
		case r.Phase() == geminitest.PhaseReflect:
			m.record("reflect")
			return geminitest.JSON(map[string]any{"insights": []string{}, "plan_updates": []any{}, "achieved": false})
		case r.Phase() == geminitest.PhaseIntrospect:
			m.record("introspect")
			return geminitest.JSON(map[string]any{"claims": []string{}, "helpful_memory_ids": []string{}, "harmful_memory_ids": []string{}})
		case child && finalTurn(r):
			m.record("child final")
			return geminitest.Text("answered from what it had")
		case child:
			m.record("child turn")
			return geminitest.Calls(&genai.FunctionCall{Name: "bigquery_query", Args: map[string]any{
				"sql": fmt.Sprintf("SELECT COUNT(*) AS n FROM `security_logs.auth_events` WHERE source_ip = '198.51.100.%d'", len(r.Contents))}})
		case len(r.FunctionResponses()) == 0 && !finalTurn(r):
			m.record("step turn")
			return geminitest.Calls(&genai.FunctionCall{Name: "bigquery_agent", Args: map[string]any{"request": "Count SSH logins from 198.51.100.23."}})
		}
		m.record("step final")
		return geminitest.Text("cut short")
	}
}

// TestStopWithTheSubAgentRunning: a slow model (1 s a call) and a sub-agent
// that would take ten turns. `starter stop` reaches the child as a signal:
// its model turn in flight finishes, and then neither the child nor the
// step asks the model anything (each answers from what it has): the only
// model call after the stop is the conclusion, which `starter stop` prints.
func TestStopWithTheSubAgentRunning(t *testing.T) {
	m := &slowModel{delay: time.Second}
	if d, err := time.ParseDuration(os.Getenv("E2E_SLOW_MODEL")); err == nil {
		m.delay = d // E2E_SLOW_MODEL=4s measures the stop with the 4 s model
	}
	inFlight := make(chan struct{})
	var once sync.Once
	model.use(t, subAgentScript(m, func(n int) {
		if n == 2 { // the child's second model turn has just started: all of it is in flight at the stop
			once.Do(func() { close(inFlight) })
		}
	}))
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--detach")
	require.Equal(t, 0, res.code, res.stderr)
	id := workflowIDFrom(t, res.stdout)
	select {
	case <-inFlight:
	case <-time.After(time.Minute):
		w := starter(t, nil, "watch", id)
		t.Fatalf("the sub-agent never took a second turn:\n%s\n%s", w.stdout, w.stderr)
	}
	// A hint by signal (as `temporal workflow signal` sends it) reaches the
	// same handler as the update.
	require.NoError(t, tc.SignalWorkflow(context.Background(), id, "", investigation.UpdateHint, "Signalled: deploy is a CI account."))
	stopped := time.Now()
	stop := starter(t, nil, "stop", id, "enough")
	require.Equal(t, 0, stop.code, stop.stderr)
	printed := time.Since(stopped)
	require.Contains(t, stop.stdout, "stopped early", "starter stop prints the conclusion")
	closed := waitClosed(t, id)
	var st investigation.Status
	q, err := tc.QueryWorkflow(context.Background(), id, "", investigation.StatusQuery)
	require.NoError(t, err)
	require.NoError(t, q.Get(&st))

	after := m.after(stopped)
	require.LessOrEqual(t, after["child turn"], 1, "at most the child turn in flight at the stop: no new ones (%v)", after)
	require.Zero(t, after["child final"], "the child answers from what it has, without a model call (%v)", after)
	require.Zero(t, after["step final"]+after["step turn"], "the step answers from what it has, without a model call (%v)", after)
	require.Equal(t, 1, after["conclude"], "%v", after)
	require.Zero(t, after["introspect"], "a session cut short is not learned from")
	require.Zero(t, after["reflect"], "a stopped step is not reflected on")
	require.Contains(t, st.StopReason, "stopped by the analyst")
	require.Contains(t, st.Hints, "Signalled: deploy is a CI account.")
	child := id + "-bq-t1-step_1-i1-c1"
	d, err := tc.DescribeWorkflowExecution(context.Background(), child, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.GetWorkflowExecutionInfo().GetStatus(), "a stopped child answers: it is not cancelled")
	saveHistory(t, history(t, id), "stop.history.json")
	saveHistory(t, history(t, child), "stop-child.history.json")
	t.Logf("REPORT stop with the sub-agent running: `starter stop` printed the conclusion %s after it started (investigation closed %s after) with a %s model (model calls after the stop: %v)",
		printed.Round(100*time.Millisecond), closed.Sub(stopped).Round(100*time.Millisecond), m.delay, after)
}

// TestCancelWithTheSubAgentRunning: `starter cancel` while the sub-agent's
// model turn is in flight ends the investigation and its child as Canceled,
// and the model server receives no request after the cancel: no final turn
// in the child, no answer from what it had, no conclusion.
func TestCancelWithTheSubAgentRunning(t *testing.T) {
	m := &slowModel{delay: 200 * time.Millisecond}
	inFlight := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	model.use(t, subAgentScript(m, func(n int) {
		if n == 2 { // the child's second turn waits for the cancel
			once.Do(func() { close(inFlight) })
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
		}
	}))
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--detach")
	require.Equal(t, 0, res.code, res.stderr)
	id := workflowIDFrom(t, res.stdout)
	select {
	case <-inFlight:
	case <-time.After(time.Minute):
		w := starter(t, nil, "watch", id)
		t.Fatalf("the sub-agent's second turn never came:\n%s\n%s", w.stdout, w.stderr)
	}
	child := id + "-bq-t1-step_1-i1-c1"
	before := len(modelSrv.Requests())
	c := starter(t, nil, "cancel", id)
	require.Equal(t, 0, c.code, c.stderr)
	waitClosed(t, id)
	waitClosed(t, child)
	close(release) // the cancelled request returns; nothing may follow it
	time.Sleep(3 * time.Second)
	for _, wf := range []string{id, child} {
		d, err := tc.DescribeWorkflowExecution(context.Background(), wf, "")
		require.NoError(t, err)
		require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_CANCELED, d.GetWorkflowExecutionInfo().GetStatus(), "%s ends as Canceled", wf)
	}
	require.Equal(t, before, len(modelSrv.Requests()), "no model request after the cancel (%v)", m.after(time.Time{}))
	saveHistory(t, history(t, id), "cancel.history.json")
	saveHistory(t, history(t, child), "cancel-child.history.json")
	t.Logf("REPORT cancel with the sub-agent running: parent and child Canceled, no model request after the cancel (%d before it, this test's and earlier ones')", before)
}

// TestWorkerKilledDuringAToolCall kills the worker (SIGKILL) while a
// threat-intelligence call is in flight and starts a new one at once. The
// lookup is a regular activity on its provider's queue, outside any workflow
// task: no workflow task is lost, the attempt's heartbeat times out and the
// new worker runs the call again.
func TestWorkerKilledDuringAToolCall(t *testing.T) {
	inFlight := make(chan struct{})
	var once sync.Once
	release := make(chan struct{})
	intelSrv.onRequest(func() {
		once.Do(func() { close(inFlight) })
		<-release
	})
	defer intelSrv.onRequest(nil)
	lookups := intelSrv.count("/api/v3/domains/evil.example.com")
	model.use(t, func(r *geminitest.Request) geminitest.Reply {
		switch {
		case r.Phase() == geminitest.PhasePlan:
			return geminitest.JSON(map[string]any{"objective": "o", "continues_active_plan": false, "steps": []map[string]any{
				{"id": "1", "description": "Check the domain.", "tools": []string{"virustotal_lookup"}, "expected": "reputation"}}})
		case r.Phase() == geminitest.PhaseReflect:
			return geminitest.JSON(map[string]any{"insights": []string{}, "plan_updates": []any{}, "achieved": true})
		case r.Phase() == geminitest.PhaseConclude:
			return geminitest.Conclusion("## Summary\nsurvived", "undetermined", "low")
		case len(r.FunctionResponses()) == 0:
			return geminitest.Calls(&genai.FunctionCall{Name: "virustotal_lookup", Args: map[string]any{"resource": "evil.example.com", "resource_type": "domain"}})
		}
		return geminitest.Text("checked")
	})
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--detach")
	require.Equal(t, 0, res.code, res.stderr)
	id := workflowIDFrom(t, res.stdout)
	<-inFlight
	killed := time.Now()
	require.NoError(t, stopWorker(syscall.SIGKILL))
	close(release) // the provider answers again, to the next attempt
	require.NoError(t, startWorker())
	waitFor(t, id, "the conclusion after the crash", func(s investigation.Status) bool { return s.Phase == investigation.PhaseIdle })
	recovered := time.Since(killed)

	hist := history(t, id)
	timedOut := 0
	for _, e := range hist.Events {
		if e.GetEventType() == enums.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT {
			timedOut++
		}
	}
	require.Zero(t, timedOut, "no workflow task was held by the call, so none was lost")
	var calls []activityEntry
	for _, a := range activitiesIn(t, hist, converter.GetDefaultDataConverter()) {
		if a.Type == "CallTool" {
			calls = append(calls, a)
		}
	}
	require.Len(t, calls, 1, "the call is recorded once")
	require.False(t, calls[0].Local)
	require.Equal(t, "investigations-intel-virustotal", calls[0].Queue)
	require.Equal(t, lookups+2, intelSrv.count("/api/v3/domains/evil.example.com"), "the call cut by the crash ran again")
	require.Equal(t, 0, starter(t, nil, "stop", id).code)
	saveHistory(t, history(t, id), "tool-retry.history.json")
	t.Logf("REPORT worker killed during a tool call: the investigation concluded %s after the SIGKILL (heartbeat timeout %s)", recovered.Round(time.Second), "10s")
}

// finalTurn says the request is a tool loop's final turn (function calling
// off).
func finalTurn(r *geminitest.Request) bool {
	return r.ToolConfig != nil && r.ToolConfig.FunctionCallingConfig != nil &&
		r.ToolConfig.FunctionCallingConfig.Mode == genai.FunctionCallingConfigModeNone
}

// waitClosed waits for the workflow to close and returns when it did.
func waitClosed(t *testing.T, id string) time.Time {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		d, err := tc.DescribeWorkflowExecution(context.Background(), id, "")
		require.NoError(t, err)
		if ct := d.GetWorkflowExecutionInfo().GetCloseTime(); ct != nil {
			return ct.AsTime()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("workflow %s did not close", id)
	return time.Time{}
}
