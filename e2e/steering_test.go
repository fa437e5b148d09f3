package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/investigation"
)

// status queries an investigation's status through the real client.
func status(t *testing.T, id string) investigation.Status {
	t.Helper()
	v, err := tc.QueryWorkflow(context.Background(), id, "", investigation.StatusQuery)
	require.NoError(t, err)
	var st investigation.Status
	require.NoError(t, v.Get(&st))
	return st
}

// waitFor polls the status until cond holds.
func waitFor(t *testing.T, id, what string, cond func(investigation.Status) bool) investigation.Status {
	t.Helper()
	return waitStatus(t, tc, id, what, cond)
}

// waitStatus is waitFor through client c (one that holds a payload key).
func waitStatus(t *testing.T, c client.Client, id, what string, cond func(investigation.Status) bool) investigation.Status {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, err := c.QueryWorkflow(context.Background(), id, "", investigation.StatusQuery)
		if err == nil {
			var st investigation.Status
			if v.Get(&st) == nil && cond(st) {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func historyLength(t *testing.T, id, runID string) int {
	t.Helper()
	d, err := tc.DescribeWorkflowExecution(context.Background(), id, runID)
	require.NoError(t, err)
	return int(d.WorkflowExecutionInfo.GetHistoryLength())
}

// TestSteering drives one investigation the way an analyst would: approve
// after one revision, a hint while a model call runs, an ask_user answered,
// then two follow-ups (the first continues the active plan) with a
// continue-as-new in between, while `starter watch` prints everything.
func TestSteering(t *testing.T) {
	const (
		hint   = "Focus on the deploy account."
		answer = "deploy is a CI account; it never logs in interactively."
	)
	inFlight, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var afterHint, afterAnswer, directTurn *geminitest.Request
	p := &phased{seen: map[string][]*geminitest.Request{}, queues: map[string][]geminitest.Handler{
		"plan": {
			reply(geminitest.JSON(map[string]any{"objective": "Decide whether the login was malicious.", "steps": []map[string]any{
				{"id": "1", "description": "Read the alert.", "tools": []string{"get_alert"}, "expected": "details"}}})),
			func(r *geminitest.Request) geminitest.Reply {
				require.Contains(t, r.Text(), `Requested change (from the analyst, follow it): "Also check bastion-01."`)
				return geminitest.JSON(map[string]any{"objective": "Decide whether the login was malicious, bastion-01 included.", "steps": []map[string]any{
					{"id": "1", "description": "Read the alert and note bastion-01.", "tools": []string{"get_alert"}, "expected": "details"}}})
			},
			func(r *geminitest.Request) geminitest.Reply {
				require.Contains(t, r.Text(), "A plan is in progress from earlier exchanges")
				return geminitest.JSON(map[string]any{"objective": "Same, now with the bastion.", "continues_active_plan": true, "steps": []map[string]any{
					{"id": "1", "description": "Search past alerts for bastion-01.", "tools": []string{"search_alerts"}, "expected": "history"}}})
			},
		},
		"parent": {
			func(r *geminitest.Request) geminitest.Reply {
				once.Do(func() { close(inFlight) })
				<-release // the hint arrives while this model call runs
				return geminitest.Calls(&genai.FunctionCall{Name: "ask_user", Args: map[string]any{"question": "Is deploy allowed to log in over SSH?"}})
			},
			func(r *geminitest.Request) geminitest.Reply {
				afterHint = r
				return geminitest.Text("The login by deploy was not expected.")
			},
			reply(geminitest.Text("bastion-01 has earlier alerts from the same IP.")),
			func(r *geminitest.Request) geminitest.Reply {
				directTurn = r
				return geminitest.Text("deploy logged in at 08:47:12 UTC.")
			},
		},
		"reflect": {
			reply(geminitest.JSON(map[string]any{"achieved": true, "insights": []string{"deploy should never log in."}, "plan_updates": []any{}})),
			reply(geminitest.JSON(map[string]any{"achieved": true, "insights": []string{}, "plan_updates": []any{}})),
		},
		"conclude": {
			reply(geminitest.Conclusion("## Summary\nConclusion 1: compromise of deploy.", "true_positive", "medium")),
			// Long enough that the follow-up after it names the conversation,
			// and its own question, by the stored context's key.
			reply(geminitest.Conclusion("## Summary\nConclusion 2: bastion-01 targeted too.\n\n## Findings\n"+
				strings.Repeat("- bastion-01 logged a failed SSH login from 198.51.100.23 before deploy's login.\n", 30), "true_positive", "medium")),
		},
		"mode": {
			reply(geminitest.JSON(map[string]any{"mode": "plan", "reason": "new evidence needed"})),
			reply(geminitest.JSON(map[string]any{"mode": "direct", "reason": "already known"})),
		},
		// The direct answer's review: a login time does not change the verdict.
		"verdict": {func(r *geminitest.Request) geminitest.Reply {
			require.Contains(t, r.Text(), `"verdict": "true_positive"`, "the review is given the standing verdict")
			require.Contains(t, r.Text(), "When exactly did deploy log in?", "and the question, from the stored context")
			return geminitest.JSON(map[string]any{"evidence": []any{}, "reason": "The login time does not bear on it.", "verdict": "true_positive", "confidence": "medium"})
		}},
	}}
	model.use(t, func(r *geminitest.Request) geminitest.Reply {
		if r.Phase() == geminitest.PhaseMode {
			p.mu.Lock()
			q := p.queues["mode"]
			p.queues["mode"] = q[1:]
			p.mu.Unlock()
			return q[0](r)
		}
		if len(r.FunctionResponses()) > 0 && r.FunctionResponses()[0].Name == "ask_user" {
			afterAnswer = r
		}
		return p.handle(r)
	})

	start := starter(t, nil, "investigate", "--alert", exampleAlert, "--approve-plan", "--detach", "--max-history-events", "100")
	require.Equal(t, 0, start.code, start.stderr)
	id := workflowIDFrom(t, start.stdout)

	// starter watch follows the whole session in the background.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := exec.CommandContext(ctx, filepath.Join(bin, "starter"), "watch", id)
	watch.Env, watch.Dir = stack, ".."
	var watched bytes.Buffer
	watch.Stdout, watch.Stderr = &watched, &watched
	require.NoError(t, watch.Start())

	waitFor(t, id, "approval", func(s investigation.Status) bool { return s.Phase == investigation.PhaseAwaitingApproval })
	early := starter(t, nil, "answer", id, "too early")
	require.Equal(t, 1, early.code, "an answer with no question pending is rejected")
	require.Contains(t, early.stderr, "no question is waiting for an answer")
	rev := starter(t, nil, "revise", id, "Also check bastion-01.")
	require.Equal(t, 0, rev.code, rev.stderr)
	waitFor(t, id, "the revised plan", func(s investigation.Status) bool {
		return s.Phase == investigation.PhaseAwaitingApproval && strings.Contains(s.Plan.Objective, "bastion-01")
	})
	app := starter(t, nil, "approve", id)
	require.Equal(t, 0, app.code, app.stderr)

	<-inFlight
	h := starter(t, nil, "hint", id, hint)
	require.Equal(t, 0, h.code, h.stderr)
	close(release)

	st := waitFor(t, id, "the ask_user question", func(s investigation.Status) bool { return len(s.Questions) > 0 })
	require.Equal(t, "Is deploy allowed to log in over SSH?", st.Questions[0].Question)
	ans := starter(t, nil, "answer", id, answer)
	require.Equal(t, 0, ans.code, ans.stderr)
	waitFor(t, id, "the first conclusion", func(s investigation.Status) bool { return s.Phase == investigation.PhaseIdle })

	require.NotNil(t, afterHint)
	require.Contains(t, afterHint.SystemText(), hint, "the next model request after the hint carries it")
	require.NotNil(t, afterAnswer)
	require.Equal(t, answer, afterAnswer.FunctionResponses()[0].Response["answer"])

	first, err := tc.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	runBefore := first.WorkflowExecutionInfo.GetExecution().GetRunId()

	f1 := starter(t, nil, "ask", id, "Check bastion-01 for the same IP.")
	require.Equal(t, 0, f1.code, f1.stderr)
	require.Contains(t, f1.stdout, "Conclusion 2: bastion-01 targeted too.")
	lenBefore := historyLength(t, id, runBefore)

	f2 := starter(t, nil, "ask", id, "When exactly did deploy log in?")
	require.Equal(t, 0, f2.code, f2.stderr)
	require.Contains(t, f2.stdout, "deploy logged in at 08:47:12 UTC.")
	require.NotContains(t, f2.stdout, "VERDICT", "a narrow question keeps the verdict: no change to print")
	after, err := tc.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	runAfter := after.WorkflowExecutionInfo.GetExecution().GetRunId()
	require.NotEqual(t, runBefore, runAfter, "the session continued as new")
	require.NotNil(t, directTurn)
	require.Contains(t, directTurn.Text(), "Conclusion 2", "the conversation survived continue-as-new")
	require.Contains(t, directTurn.SystemText(), hint, "so did the hint")
	require.Contains(t, directTurn.Text(), "When exactly did deploy log in?", "the question reached the answer through the stored context")
	q, err := tc.QueryWorkflow(context.Background(), id, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	var meta sdkpb.WorkflowMetadata
	require.NoError(t, q.Get(&meta))
	require.True(t, strings.HasPrefix(meta.GetCurrentDetails(), "Investigate "+exampleID(t)+": "),
		"the continued run's details open with the investigation's summary:\n%s", meta.GetCurrentDetails())
	final := status(t, id)
	require.Equal(t, investigation.PhaseIdle, final.Phase)
	require.Equal(t, 4, final.Turn)
	require.Len(t, final.Plan.Steps, 2, "the active plan (extended by the first follow-up) survived too")

	// Close the session and let watch print the end.
	stop := starter(t, nil, "stop", id)
	require.Equal(t, 0, stop.code, stop.stderr)
	run := tc.GetWorkflow(context.Background(), id, "")
	var res investigation.Result
	require.NoError(t, run.Get(context.Background(), &res))
	done := make(chan error, 1)
	go func() { done <- watch.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = watch.Process.Signal(syscall.SIGINT)
		<-done
	}
	out := watched.String()
	for _, want := range []string{hint, "Is deploy allowed to log in over SSH?", answer, "Conclusion 1", "Conclusion 2", "deploy logged in at 08:47:12 UTC."} {
		require.Contains(t, out, want)
	}
	for _, once := range []string{"Conclusion 1: compromise", "Conclusion 2: bastion"} {
		require.Equal(t, 1, strings.Count(out, once), "watch prints each event once, across continue-as-new:\n%s", out)
	}
	saveHistory(t, runHistory(t, id, runBefore), "steering-run1.history.json")
	saveHistory(t, runHistory(t, id, runAfter), "steering-run2.history.json")
	t.Logf("REPORT history length before continue-as-new: %d events (run %s); after, at the end: %d events (run %s)",
		lenBefore, runBefore, historyLength(t, id, runAfter), runAfter)
	t.Logf("REPORT starter watch transcript:\n%s", out)
}

// TestHintBurst: 100 hints sent at once during one run are all recorded.
func TestHintBurst(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	inFlight := make(chan struct{})
	model.use(t, func(r *geminitest.Request) geminitest.Reply {
		switch {
		case strings.Contains(strings.Join(r.SchemaProperties(), ","), "steps"):
			return geminitest.JSON(map[string]any{"objective": "o", "steps": []map[string]any{{"id": "1", "description": "d", "tools": []string{"get_alert"}, "expected": "e"}}})
		case r.Phase() == geminitest.PhaseReflect:
			return geminitest.JSON(map[string]any{"achieved": true, "insights": []string{}, "plan_updates": []any{}})
		case len(r.FunctionNames()) > 0:
			once.Do(func() { close(inFlight) })
			<-release
			return geminitest.Text("done")
		}
		return geminitest.Conclusion("## Summary\nok", "true_positive", "medium")
	})
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--detach")
	require.Equal(t, 0, res.code, res.stderr)
	id := workflowIDFrom(t, res.stdout)
	<-inFlight
	var wg sync.WaitGroup
	var retries atomic.Int32
	errs := make(chan error, 100)
	// The server admits ten in-flight updates per workflow. With a hundred
	// concurrent clients the dev server keeps aborting the admitted ones
	// ("workflow update was aborted", Unavailable) and clients retry in a
	// storm (seen: 666 to 1,254 retries and 60 to 125 s on a loaded machine);
	// with ten at a time there are none and the burst takes about 2 s.
	slots := make(chan struct{}, 10)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			// Should the server abort an update all the same, the client
			// retries it under the same update ID, which the server records
			// once; until a deadline, not a count, as a loaded machine may
			// need several.
			var err error
			deadline := time.Now().Add(3 * time.Minute)
			for attempt := 0; attempt == 0 || time.Now().Before(deadline); attempt++ {
				if attempt > 0 {
					time.Sleep(min(time.Duration(attempt)*200*time.Millisecond, 2*time.Second))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
				var h client.WorkflowUpdateHandle
				h, err = tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
					UpdateID: fmt.Sprintf("burst-%d", i), WorkflowID: id, UpdateName: investigation.UpdateHint,
					Args: []any{fmt.Sprintf("hint number %d", i)}, WaitForStage: client.WorkflowUpdateStageCompleted,
				})
				if err == nil {
					var ack investigation.Ack
					err = h.Get(ctx, &ack)
				}
				cancel()
				if err == nil {
					break
				}
				retries.Add(1)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	close(release)
	st := waitFor(t, id, "the conclusion", func(s investigation.Status) bool { return s.Phase == investigation.PhaseIdle })
	seen := map[string]bool{}
	for after := 0; ; {
		q, err := tc.QueryWorkflow(context.Background(), id, "", investigation.ProgressQuery, after)
		require.NoError(t, err)
		var evs []investigation.Event
		require.NoError(t, q.Get(&evs))
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Kind == investigation.EventHint {
				seen[e.Text] = true
			}
		}
		after = evs[len(evs)-1].Seq
	}
	require.Len(t, seen, 100, "all 100 hints recorded, each once")
	require.Len(t, st.Hints, 50, "the latest 50 are kept for the model (the bound)")
	raw, _ := json.Marshal(st.Hints[:3])
	t.Logf("REPORT 100-hint burst: %d recorded, %d kept (%d update attempts retried), first kept: %s", len(seen), len(st.Hints), retries.Load(), raw)
	stop := starter(t, nil, "stop", id)
	require.Equal(t, 0, stop.code, stop.stderr)
}
