package e2e

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/otlptest"
	"github.com/secops-agent/investigator/investigation"
)

// TestTelemetry runs an investigation with a BigQuery sub-agent while the
// starter and the worker export to a real OTLP receiver (the starter over
// HTTP, the worker over gRPC). The worker is killed twice: while the plan
// waits for approval (the next worker replays the history, then handles the
// approval and runs the rest), and once the investigation concluded (the
// next replays it all to answer a query). One trace runs from `starter
// investigate` through the workflow, its activities and the child; every
// model call is one GenAI span, however many workers replayed the run;
// nothing of the alert, the prompts or the answers is in a span; and the
// SDK's and the product's metrics arrive.
func TestTelemetry(t *testing.T) {
	rcv, err := otlptest.Start()
	require.NoError(t, err)
	t.Cleanup(rcv.Close) // after the worker's last flush
	otel := []string{"OTEL_METRIC_EXPORT_INTERVAL=300", "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=", "OTEL_RESOURCE_ATTRIBUTES=", "OTEL_EXPORTER_OTLP_HEADERS="}
	workerEnv := append(slices.Clone(stack), append(otel, "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.GRPCEndpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")...)
	starterOtel := append(slices.Clone(stack), append(otel, "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.HTTPEndpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")...)
	restart := func(sig syscall.Signal, env []string) {
		t.Helper()
		require.NoError(t, stopWorker(sig))
		require.NoError(t, startWorkerEnv(env))
		waitPolling(t)
	}
	restart(syscall.SIGKILL, workerEnv) // it may not have set up its signal handler yet
	t.Cleanup(func() { restart(syscall.SIGTERM, stack) })

	failedOnce := false
	p := &phased{seen: map[string][]*geminitest.Request{}, queues: map[string][]geminitest.Handler{
		"plan": {reply(geminitest.JSON(map[string]any{"objective": "Decide whether the brute force led to a login.", "steps": []map[string]any{
			{"id": "1", "description": "Ask the logs about SSH logins on web-server-prod-01.", "tools": []string{"bigquery_agent"}, "expected": "logins"},
		}}))},
		"parent": {
			func(*geminitest.Request) geminitest.Reply {
				// One retryable failure: an activity failure the SDK counts.
				failedOnce = true
				return geminitest.Error(503, "The model is overloaded.", "")
			},
			reply(geminitest.Calls(&genai.FunctionCall{Name: "bigquery_agent", Args: map[string]any{"request": "Count failed SSH logins per source IP on web-server-prod-01 on 2026-11-20."}})),
			reply(geminitest.Text("198.51.100.23 made the failed SSH logins.")),
		},
		"child": {
			reply(geminitest.Calls(&genai.FunctionCall{Name: "bigquery_query", Args: map[string]any{"sql": "SELECT source_ip, COUNT(*) AS n FROM `security_logs.auth_events` WHERE event_type = 'ssh_failed' GROUP BY source_ip"}})),
			reply(geminitest.Text("198.51.100.23 made the failed SSH logins.")),
		},
		"introspect": {reply(geminitest.JSON(map[string]any{"claims": []any{}, "helpful_memory_ids": []string{}, "harmful_memory_ids": []string{}}))},
		"reflect":    {reply(geminitest.JSON(map[string]any{"achieved": true, "insights": []string{"The brute force came from one address."}, "plan_updates": []any{}}))},
		"conclude":   {reply(geminitest.Conclusion("## Summary\nThe brute force came from 198.51.100.23.", "true_positive", "high"))},
	}}
	model.use(t, p.handle)

	res := starterEnv(t, starterOtel, nil, "investigate", "--alert", exampleAlert, "--question", "Did the attacker get in?", "--approve-plan", "--detach")
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	id := workflowIDFrom(t, res.stdout)
	waitFor(t, id, "the plan waiting for approval", func(s investigation.Status) bool { return s.Phase == investigation.PhaseAwaitingApproval })
	waitReceived(t, "plan span", func() bool { // exported before the kill
		return slices.ContainsFunc(rcv.Spans(), func(s otlptest.Span) bool { return s.Name == "RunActivity:GeneratePlan" })
	})

	restart(syscall.SIGKILL, workerEnv) // the next worker starts with a cold cache
	approve := starterEnv(t, starterOtel, nil, "approve", id)
	require.Equal(t, 0, approve.code, approve.stderr)
	waitFor(t, id, "the conclusion", func(s investigation.Status) bool { return s.Phase == investigation.PhaseIdle })
	require.True(t, failedOnce)
	waitReceived(t, "verdict count", func() bool { return len(rcv.Latest(investigation.MetricInvestigations)) > 0 })

	restart(syscall.SIGKILL, workerEnv)
	waitFor(t, id, "an answer from a worker that replays the whole history", func(investigation.Status) bool { return true })
	status := starterEnv(t, starterOtel, nil, "status", id)
	require.Equal(t, 0, status.code, status.stderr)
	require.Equal(t, 0, starterEnv(t, starterOtel, nil, "stop", id).code)
	restart(syscall.SIGTERM, workerEnv) // flushes what it buffered

	spans := rcv.Spans()
	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	var root otlptest.Span
	for _, s := range spans {
		if s.Name == "starter investigate" {
			root = s
		}
	}
	require.Equal(t, "investigator-starter", root.Service)
	require.Empty(t, root.ParentID)
	trace := map[string]int{}
	var inTrace []otlptest.Span
	for _, s := range spans {
		if s.TraceID == root.TraceID {
			inTrace = append(inTrace, s)
			trace[s.Name]++
		}
	}
	t.Logf("REPORT spans of the investigation's trace: %d: %v", len(inTrace), trace)

	// One trace, nothing missing: every span but the root hangs under one
	// that was exported, across both worker kills. Only Temporal's and the
	// product's spans: none from a library (the BigQuery client's HTTP
	// calls) whose attributes nobody vetted.
	for _, s := range inTrace {
		require.Contains(t, []string{"temporal-sdk-go", "github.com/secops-agent/investigator"}, s.Scope, s.Name)
		if s.SpanID != root.SpanID {
			_, ok := byID[s.ParentID]
			require.True(t, ok, "the parent of %s (%s) was exported", s.Name, s.Service)
		}
	}
	ancestry := func(s otlptest.Span) []string {
		var names []string
		for s.ParentID != "" {
			s = byID[s.ParentID]
			names = append(names, s.Name)
		}
		return names
	}
	isModel := func(s otlptest.Span) bool { return strings.HasPrefix(s.Name, "generate_content ") }
	var childTurn otlptest.Span
	for _, s := range inTrace {
		if isModel(s) && byID[s.ParentID].Name == "RunActivity:SubAgentTurn" {
			childTurn = s
		}
	}
	require.Equal(t, []string{"RunActivity:SubAgentTurn", "StartActivity:SubAgentTurn", "RunWorkflow:BigQueryAgent", "StartChildWorkflow:BigQueryAgent",
		"RunWorkflow:Investigation", "StartWorkflow:Investigation", "starter investigate"}, ancestry(childTurn))
	require.Equal(t, 1, trace["RunWorkflow:Investigation"], "one RunWorkflow span though three workers ran or replayed the run")
	require.Equal(t, 1, trace["RunWorkflow:BigQueryAgent"])

	// Every model call the stand-in answered is one span, whichever worker
	// made it; each scheduled activity one StartActivity span.
	calls := 0
	for _, reqs := range p.seen {
		calls += len(reqs) // generateContent requests only
	}
	var modelSpans, embedSpans, failed int
	for _, s := range inTrace {
		switch {
		case isModel(s):
			modelSpans++
			require.Equal(t, "generate_content", s.Attrs["gen_ai.operation.name"])
			require.Equal(t, "gcp.gemini", s.Attrs["gen_ai.provider.name"])
			require.Equal(t, "gemini-2.5-flash", s.Attrs["gen_ai.request.model"])
			if s.Attrs["error.type"] != nil {
				failed++
				require.Equal(t, "GeminiUnavailable", s.Attrs["error.type"])
				continue
			}
			require.Greater(t, s.Attrs["gen_ai.usage.input_tokens"], int64(0), s.Name)
			require.Greater(t, s.Attrs["gen_ai.usage.output_tokens"], int64(0), s.Name)
			require.Equal(t, []any{"stop"}, s.Attrs["gen_ai.response.finish_reasons"])
		case strings.HasPrefix(s.Name, "embeddings "):
			embedSpans++
			require.Equal(t, "embeddings", s.Attrs["gen_ai.operation.name"])
			require.Equal(t, "gemini-embedding-001", s.Attrs["gen_ai.request.model"])
			require.Nil(t, s.Attrs["gen_ai.usage.input_tokens"], "the embeddings answer reports no tokens")
		}
	}
	require.Equal(t, calls, modelSpans, "one span per model call")
	require.Equal(t, 1, failed)
	require.Equal(t, 1, embedSpans, "the child's memory recall")
	scheduled := map[string]int{}
	for _, wf := range []string{id, childIDs(t, id)[0]} {
		for _, e := range history(t, wf).Events {
			if at := e.GetActivityTaskScheduledEventAttributes(); at != nil {
				scheduled["StartActivity:"+at.ActivityType.GetName()]++
			}
		}
	}
	require.NotEmpty(t, scheduled)
	for name, n := range scheduled {
		require.Equal(t, n, trace[name], name)
	}

	// The analyst's approval is its own command's trace, handled once.
	handled := 0
	for _, s := range spans {
		if s.Name == "HandleUpdate:"+investigation.UpdateApprove {
			handled++
		}
	}
	require.Equal(t, 1, handled)

	// Nothing of the alert, the question, the prompts, the answers, the
	// query or the key in any span or metric attribute.
	all := fmt.Sprint(spans, rcv.Metrics())
	for _, leak := range []string{"198.51.100", "i-0abc1234def567890", "SSH brute force", "SSHBruteForce", "Did the attacker", "Count failed", "SELECT", "overloaded", "e2e-test-key", "Summary"} {
		require.NotContains(t, all, leak)
	}

	// Metrics: the SDK's, with the failed attempt; the product's.
	require.Positive(t, rcv.Total("temporal_activity_execution_failed", map[string]any{"activity_type": "ModelTurn"}))
	require.Positive(t, rcv.Total("temporal_workflow_task_execution_latency", nil))
	require.Equal(t, 1.0, rcv.Total(investigation.MetricInvestigations, map[string]any{"verdict": "true_positive", "confidence": "high"}),
		"counted once, though two workers replayed the verdict")
	require.Positive(t, rcv.Total("investigator.model.tokens", map[string]any{"investigator.activity": "SubAgentTurn", "gen_ai.token.type": "input"}))
	require.Positive(t, rcv.Total("investigator.model.cost", nil))
	require.Positive(t, rcv.Total("gen_ai.client.token.usage", nil))
	t.Logf("REPORT model calls %d = GenAI spans %d (1 failed); embeddings %d; investigations counted %v",
		calls, modelSpans, embedSpans, rcv.Total(investigation.MetricInvestigations, nil))
}

// waitReceived waits until the receiver has what got looks for.
func waitReceived(t *testing.T, what string, got func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !got() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s arrived", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
