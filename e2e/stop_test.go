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

// subAgentPhase names a request of subAgentScript's investigation: "embed",
// "plan", "conclude", "reflect", "introspect", the sub-agent's "child turn"
// and "child final", the parent step's "step turn" and "step final".
func subAgentPhase(r *geminitest.Request) string {
	if r.Method != geminitest.MethodGenerateContent {
		return "embed"
	}
	child := strings.Contains(strings.Join(r.FunctionNames(), ","), "bigquery_query")
	switch {
	case r.Phase() == geminitest.PhasePlan:
		return "plan"
	case r.Phase() == geminitest.PhaseConclude:
		return "conclude"
	case r.Phase() == geminitest.PhaseReflect:
		return "reflect"
	case r.Phase() == geminitest.PhaseIntrospect:
		return "introspect"
	case child && finalTurn(r):
		return "child final"
	case child:
		return "child turn"
	case len(r.FunctionResponses()) == 0 && !finalTurn(r):
		return "step turn"
	}
	return "step final"
}

// subAgentScript is a model for an investigation whose two steps ask the
// BigQuery sub-agent, which would take ten turns of one query each. It
// answers every generateContent request after delay; arrived runs when the
// n-th request of a phase arrives, answering after the delay, before the
// answer (either may be nil).
func subAgentScript(delay time.Duration, arrived, answering func(phase string, n int)) geminitest.Handler {
	var mu sync.Mutex
	seen := map[string]int{}
	return func(r *geminitest.Request) geminitest.Reply {
		phase := subAgentPhase(r)
		if phase == "embed" {
			vec := make([]float32, 768)
			vec[0] = 1
			return geminitest.Embeddings(vec)
		}
		mu.Lock()
		seen[phase]++
		n := seen[phase]
		mu.Unlock()
		if arrived != nil {
			arrived(phase, n)
		}
		time.Sleep(delay)
		if answering != nil {
			answering(phase, n)
		}
		switch phase {
		case "plan":
			return geminitest.JSON(map[string]any{"objective": "o", "continues_active_plan": false, "steps": []map[string]any{
				{"id": "1", "description": "Ask the logs.", "tools": []string{"bigquery_agent"}, "expected": "logins"},
				{"id": "2", "description": "Ask the logs again.", "tools": []string{"bigquery_agent"}, "expected": "more"}}})
		case "conclude":
			return geminitest.Conclusion("## Summary\nstopped early", "undetermined", "low")
		case "reflect":
			return geminitest.JSON(map[string]any{"insights": []string{}, "plan_updates": []any{}, "achieved": false})
		case "introspect":
			return geminitest.JSON(map[string]any{"claims": []string{}, "helpful_memory_ids": []string{}, "harmful_memory_ids": []string{}})
		case "child final":
			return geminitest.Text("answered from what it had")
		case "child turn":
			return geminitest.Calls(&genai.FunctionCall{Name: "bigquery_query", Args: map[string]any{
				"sql": fmt.Sprintf("SELECT COUNT(*) AS n FROM `security_logs.auth_events` WHERE source_ip = '198.51.100.%d'", len(r.Contents))}})
		case "step turn":
			return geminitest.Calls(&genai.FunctionCall{Name: "bigquery_agent", Args: map[string]any{"request": "Count SSH logins from 198.51.100.23."}})
		}
		return geminitest.Text("cut short")
	}
}

// phasesOf lists the phases of calls, in arrival order.
func phasesOf(calls []served) []string {
	var out []string
	for _, c := range calls {
		out = append(out, subAgentPhase(c.req))
	}
	return out
}

// TestStopWithTheSubAgentRunning: a slow model (the 4 s a call;
// E2E_SLOW_MODEL sets another) and a sub-agent that would take ten turns.
// `starter stop` lands at one of three moments: the parent step's model
// turn in flight, the sub-agent's model turn in flight, the sub-agent's
// query in flight. What is in flight is held until the stop has reached its
// workflow, so each moment is the one named however loaded the machine.
// Then the calls in flight finish and nothing else asks the model anything
// (the child and the step answer from what they have): the only request
// that arrives after the stop is the conclusion, after every call in flight
// was answered, and `starter stop` prints it.
func TestStopWithTheSubAgentRunning(t *testing.T) {
	delay := 4 * time.Second
	if d, err := time.ParseDuration(os.Getenv("E2E_SLOW_MODEL")); err == nil {
		delay = d
	}
	for _, tt := range []struct {
		name string
		// at is what is in flight at the stop: "step turn", "child turn"
		// (the sub-agent's second) or "child query" (its first).
		at string
	}{
		{"ChildTurnInFlight", "child turn"},
		{"ChildMidQuery", "child query"},
		{"StepTurnInFlight", "step turn"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inFlight := make(chan struct{})
			var caughtOnce, releaseOnce sync.Once
			caught := func() { caughtOnce.Do(func() { close(inFlight) }) }
			release := make(chan struct{})
			releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(releaseAll)
			hold := func() {
				select {
				case <-release:
				case <-time.After(2 * time.Minute):
				}
			}
			var arrived, answering func(string, int)
			switch tt.at {
			case "step turn":
				arrived = func(p string, n int) {
					if p == "step turn" && n == 1 {
						caught()
					}
				}
				answering = func(p string, n int) {
					if p == "step turn" && n == 1 {
						hold()
					}
				}
			case "child turn":
				arrived = func(p string, n int) {
					if p == "child turn" && n == 2 { // its first query answered: it has something to answer from
						caught()
					}
				}
				answering = func(p string, n int) {
					if p == "child turn" && n == 2 {
						hold()
					}
				}
			case "child query":
				t.Cleanup(func() { bqGate.holdNextQuery(nil) })
				answering = func(p string, n int) {
					if p == "child turn" && n == 1 { // the query this turn asks for is held
						bqGate.holdNextQuery(func() { caught(); hold() })
					}
				}
			}
			model.use(t, subAgentScript(delay, arrived, answering))
			res := starter(t, nil, "investigate", "--alert", exampleAlert, "--detach")
			require.Equal(t, 0, res.code, res.stderr)
			id := workflowIDFrom(t, res.stdout)
			child := id + "-bq-t1-step_1-i1-c1"
			select {
			case <-inFlight:
			case <-time.After(2 * time.Minute):
				w := starter(t, nil, "watch", id)
				t.Fatalf("the %s never came:\n%s\n%s", tt.at, w.stdout, w.stderr)
			}
			// A hint by signal (as `temporal workflow signal` sends it)
			// reaches the same handler as the update.
			require.NoError(t, tc.SignalWorkflow(context.Background(), id, "", investigation.UpdateHint, "Signalled: deploy is a CI account."))
			stopped := time.Now()
			reached := make(chan error, 1)
			go func() {
				defer releaseAll()
				if tt.at == "step turn" {
					reached <- stopReachedParent(id)
				} else {
					reached <- stopReachedChild(child)
				}
			}()
			stop := starter(t, nil, "stop", id, "enough")
			printed := time.Since(stopped)
			require.NoError(t, <-reached)
			require.Equal(t, 0, stop.code, stop.stderr)
			require.Contains(t, stop.stdout, "stopped early", "starter stop prints the conclusion")
			closed := waitClosed(t, id)
			var st investigation.Status
			q, err := tc.QueryWorkflow(context.Background(), id, "", investigation.StatusQuery)
			require.NoError(t, err)
			require.NoError(t, q.Get(&st))
			require.Contains(t, st.StopReason, "stopped by the analyst")
			require.Contains(t, st.Hints, "Signalled: deploy is a CI account.")

			calls := model.calls()
			var after []string
			conclusion := -1
			for i, c := range calls {
				if c.arrived.After(stopped) {
					after = append(after, subAgentPhase(c.req))
					conclusion = i
				}
			}
			require.Equal(t, []string{"conclude"}, after,
				"after the stop only the conclusion is asked for: no child or step turn, reflection, introspection or embedding (all: %v)", phasesOf(calls))
			for _, c := range calls[:conclusion] {
				require.False(t, c.answered.IsZero() || c.answered.After(calls[conclusion].arrived),
					"the conclusion waits for the %s in flight (all: %v)", subAgentPhase(c.req), phasesOf(calls))
			}
			if tt.at != "child query" {
				last := calls[conclusion-1]
				require.Equal(t, tt.at, subAgentPhase(last.req), "the %s was the call in flight (all: %v)", tt.at, phasesOf(calls))
				require.True(t, last.arrived.Before(stopped) && last.answered.After(stopped), "the %s was in flight at the stop", tt.at)
			}
			d, err := tc.DescribeWorkflowExecution(context.Background(), child, "")
			if tt.at == "step turn" {
				require.Error(t, err, "the turn answered after the stop does not start its call to the sub-agent")
			} else {
				require.NoError(t, err)
				require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.GetWorkflowExecutionInfo().GetStatus(), "a stopped child answers: it is not cancelled")
			}
			if tt.at == "child turn" {
				saveHistory(t, history(t, id), "stop.history.json")
				saveHistory(t, history(t, child), "stop-child.history.json")
			}
			t.Logf("REPORT stop with the sub-agent running (%s in flight): `starter stop` printed the conclusion %s after it started (investigation closed %s after) with a %s model (model calls: %v)",
				tt.at, printed.Round(100*time.Millisecond), closed.Sub(stopped).Round(100*time.Millisecond), delay, phasesOf(calls))
		})
	}
}

// stopReachedParent waits until the investigation took the stop.
func stopReachedParent(id string) error {
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		v, err := tc.QueryWorkflow(context.Background(), id, "", investigation.StatusQuery)
		var st investigation.Status
		if err == nil && v.Get(&st) == nil && st.StopReason != "" {
			return nil
		}
	}
	return fmt.Errorf("the stop never reached %s", id)
}

// stopReachedChild waits until the sub-agent's history holds the stop
// signal and a workflow task completed after it: it took the stop before
// the call held in flight returns.
func stopReachedChild(child string) error {
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		it := tc.GetWorkflowHistory(context.Background(), child, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		signalled := false
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				break
			}
			if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == investigation.UpdateStop {
				signalled = true
			}
			if signalled && e.GetEventType() == enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				return nil
			}
		}
	}
	return fmt.Errorf("the stop never reached the sub-agent %s", child)
}

// firstModelRetry is llmOptions' InitialInterval (workflows/options.go):
// the soonest a failed model call is tried again.
const firstModelRetry = 2 * time.Second

// TestCancelWithTheSubAgentRunning: `starter cancel` while the sub-agent's
// model turn is in flight ends the investigation and its child as Canceled,
// and no model request arrives after the cancel: no final turn in the
// child, no answer from what it had, no conclusion, no retry.
func TestCancelWithTheSubAgentRunning(t *testing.T) {
	const delay = 200 * time.Millisecond
	inFlight := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	model.use(t, subAgentScript(delay, func(p string, n int) {
		if p == "child turn" && n == 2 { // the child's second turn waits for the cancel
			once.Do(func() { close(inFlight) })
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
		}
	}, nil))
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
	case <-time.After(2 * time.Minute):
		w := starter(t, nil, "watch", id)
		t.Fatalf("the sub-agent's second turn never came:\n%s\n%s", w.stdout, w.stderr)
	}
	child := id + "-bq-t1-step_1-i1-c1"
	cancelled := time.Now()
	c := starter(t, nil, "cancel", id)
	require.Equal(t, 0, c.code, c.stderr)
	waitClosed(t, id)
	waitClosed(t, child)
	close(release) // the cancelled request returns; nothing may follow it
	// Wait for its answer, then for what a worker still acting on the run
	// would send next: two more calls, or one retried after its backoff
	// (doubled, for a loaded machine).
	require.Eventually(t, func() bool {
		for _, s := range model.calls() {
			if s.answered.IsZero() {
				return false
			}
		}
		return true
	}, time.Minute, 50*time.Millisecond, "the held request is answered")
	time.Sleep(2 * (2*delay + firstModelRetry))
	for _, wf := range []string{id, child} {
		d, err := tc.DescribeWorkflowExecution(context.Background(), wf, "")
		require.NoError(t, err)
		require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_CANCELED, d.GetWorkflowExecutionInfo().GetStatus(), "%s ends as Canceled", wf)
	}
	calls := model.calls()
	var late []string
	for _, s := range calls {
		if s.arrived.After(cancelled) {
			late = append(late, subAgentPhase(s.req))
		}
	}
	require.Empty(t, late, "no model request arrives after the cancel (all: %v)", phasesOf(calls))
	saveHistory(t, history(t, id), "cancel.history.json")
	saveHistory(t, history(t, child), "cancel-child.history.json")
	t.Logf("REPORT cancel with the sub-agent running: parent and child Canceled, no model request arrived in the %s after the cancel (before it: %v)",
		time.Since(cancelled).Round(100*time.Millisecond), phasesOf(calls))
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

	// Nothing asked the model during the call; after the restart every
	// request is a new one: the same phases as a run never killed, and no
	// body answered before the kill sent again.
	asked := model.calls()
	var phases []string
	for _, c := range asked {
		phases = append(phases, c.req.Phase())
	}
	require.Equal(t, []string{geminitest.PhasePlan, geminitest.PhaseToolCall, geminitest.PhaseToolResult, geminitest.PhaseReflect, geminitest.PhaseConclude}, phases,
		"the model calls of a run never killed, each once")
	for _, a := range asked {
		if a.arrived.Before(killed) {
			require.True(t, !a.answered.IsZero() && a.answered.Before(killed), "no model call was in flight at the kill (%s)", a.req.Phase())
			continue
		}
		for _, b := range asked {
			if b.arrived.Before(killed) {
				require.NotEqual(t, string(b.req.Body), string(a.req.Body), "the %s answered before the kill was asked again after the restart", b.req.Phase())
			}
		}
	}
	require.False(t, asked[len(asked)-1].arrived.Before(killed), "the conclusion arrives after the restart")

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
