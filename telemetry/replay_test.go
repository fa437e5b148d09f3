package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/internal/testenv"
)

const toyQueue = "telemetry-replay"

var quiet = tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))

// toy schedules an activity from the run's main coroutine and one from
// each "step" update's handler, waits for the "done" signal, then
// schedules a last one: on whichever worker holds the run by then.
func toy(ctx workflow.Context) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	sum := 0
	if err := workflow.SetUpdateHandler(ctx, "step", func(ctx workflow.Context, n int) (int, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
		var out int
		err := workflow.ExecuteActivity(ctx, double, n).Get(ctx, &out)
		sum += out
		return out, err
	}); err != nil {
		return 0, err
	}
	var out int
	if err := workflow.ExecuteActivity(ctx, double, 1).Get(ctx, &out); err != nil {
		return 0, err
	}
	sum += out
	workflow.GetSignalChannel(ctx, "done").Receive(ctx, nil)
	if err := workflow.ExecuteActivity(ctx, double, 100).Get(ctx, &out); err != nil {
		return 0, err
	}
	return sum + out, nil
}

func double(_ context.Context, n int) (int, error) { return 2 * n, nil }

// spans collects what every process of a test exported: unlike
// tracetest.InMemoryExporter, a process's shutdown keeps them.
type spans struct{ *tracetest.InMemoryExporter }

func newSpans() spans                        { return spans{tracetest.NewInMemoryExporter()} }
func (spans) Shutdown(context.Context) error { return nil }

// process is one worker process: its own exporters and client.
type process struct {
	tel *Telemetry
	c   client.Client
	w   worker.Worker
}

func startProcess(t *testing.T, hostPort string, exp spans, reader metric.Reader) *process {
	t.Helper()
	tel, err := build(resource.Empty(), exp, reader)
	require.NoError(t, err)
	opts := client.Options{HostPort: hostPort, Logger: quiet}
	tel.Client(&opts)
	c, err := client.Dial(opts)
	require.NoError(t, err)
	w := worker.New(c, toyQueue, worker.Options{})
	w.RegisterWorkflow(toy)
	w.RegisterActivity(double)
	require.NoError(t, w.Start())
	return &process{tel: tel, c: c, w: w}
}

// stop ends the worker (its cache, and every run in it, goes) and exports
// what it buffered.
func (p *process) stop(t *testing.T) {
	p.w.Stop()
	p.c.Close()
	require.NoError(t, p.tel.Shutdown(context.Background()))
}

// TestWorkflowSpansOnceAcrossReplays runs a workflow on the real dev server
// across three worker processes, each starting with a cold cache: the
// second replays the history before it handles an update, the third
// replays it to answer a query and again before it completes the run.
// Every workflow-side span is exported once, by the process that ran its
// code live, and every span's parent was exported: the spans scheduled
// after a replay hang under the same RunWorkflow and HandleUpdate spans as
// those before.
func TestWorkflowSpansOnceAcrossReplays(t *testing.T) {
	ctx := context.Background()
	srv, err := testenv.StartTemporal(ctx, testenv.WithoutSearchAttributes())
	require.NoError(t, err)
	defer srv.Stop()
	exp := newSpans()
	reader := metric.NewManualReader()

	// The caller: its own process, with a root span over everything it does.
	caller, err := build(resource.Empty(), exp, nil)
	require.NoError(t, err)
	opts := client.Options{HostPort: srv.FrontendHostPort(), Logger: quiet}
	caller.Client(&opts)
	cc, err := client.Dial(opts)
	require.NoError(t, err)
	defer cc.Close()
	rootCtx, end := caller.Span(ctx, "test caller")

	a := startProcess(t, srv.FrontendHostPort(), exp, nil)
	run, err := cc.ExecuteWorkflow(rootCtx, client.StartWorkflowOptions{ID: "toy-" + fmt.Sprint(time.Now().UnixNano()), TaskQueue: toyQueue}, toy)
	require.NoError(t, err)
	step := func(n int) {
		h, err := cc.UpdateWorkflow(rootCtx, client.UpdateWorkflowOptions{WorkflowID: run.GetID(), UpdateName: "step", Args: []any{n}, WaitForStage: client.WorkflowUpdateStageCompleted})
		require.NoError(t, err)
		var out int
		require.NoError(t, h.Get(rootCtx, &out))
		require.Equal(t, 2*n, out)
	}
	step(10)
	a.stop(t)

	b := startProcess(t, srv.FrontendHostPort(), exp, nil)
	step(20) // b replays the run first
	b.stop(t)

	c := startProcess(t, srv.FrontendHostPort(), exp, reader)
	// A replay only. One query RPC lasts at most 10 s (the SDK's cap), and
	// on a loaded machine the first, which the server may offer the
	// stopped worker's sticky queue first, outlasted it; asking again
	// changes nothing but the wait.
	for deadline := time.Now().Add(time.Minute); ; {
		_, err = cc.QueryWorkflow(rootCtx, run.GetID(), "", "__stack_trace")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err)
	require.NoError(t, cc.SignalWorkflow(rootCtx, run.GetID(), "", "done", nil))
	var sum int
	require.NoError(t, run.Get(rootCtx, &sum))
	require.Equal(t, 2+20+40+200, sum)
	// The SDK's metrics go out through the process's meter provider.
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	var names []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names = append(names, m.Name)
		}
	}
	require.Contains(t, names, "temporal_workflow_task_execution_latency")
	require.Contains(t, names, "temporal_activity_execution_latency")
	c.stop(t)
	end(false)
	require.NoError(t, caller.Shutdown(ctx))

	got := exp.GetSpans().Snapshots()
	count := map[string]int{}
	ids := map[string]bool{}
	traces := map[string]bool{}
	for _, s := range got {
		count[s.Name()]++
		ids[s.SpanContext().SpanID().String()] = true
		traces[s.SpanContext().TraceID().String()] = true
	}
	var scheduled int
	it := cc.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if e.GetEventType() == enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			scheduled++
		}
	}
	require.Equal(t, 4, scheduled)
	require.Equal(t, 1, count["RunWorkflow:toy"], "one RunWorkflow span, from the first worker: %v", count)
	require.Equal(t, 2, count["HandleUpdate:step"], "one span per update: %v", count)
	require.Equal(t, scheduled, count["StartActivity:double"], "one span per scheduled activity: %v", count)
	require.Equal(t, scheduled, count["RunActivity:double"], "one span per attempt: %v", count)
	require.Len(t, traces, 1, "one trace")
	for _, s := range got {
		if s.Name() == "test caller" {
			require.False(t, s.Parent().IsValid())
			continue
		}
		require.True(t, ids[s.Parent().SpanID().String()], "the parent of %s was exported", s.Name())
	}
	// The last activity, scheduled by the third worker after two replays,
	// hangs under the RunWorkflow span the first worker exported.
	var runWorkflow, last string
	parent := map[string]string{}
	for _, s := range got {
		parent[s.SpanContext().SpanID().String()] = s.Parent().SpanID().String()
		if s.Name() == "RunWorkflow:toy" {
			runWorkflow = s.SpanContext().SpanID().String()
		}
		if s.Name() == "StartActivity:double" {
			last = s.SpanContext().SpanID().String() // spans come in end order
		}
	}
	require.Equal(t, runWorkflow, parent[last])

}
