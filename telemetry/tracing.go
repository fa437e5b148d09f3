package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// temporalScope is the instrumentation scope of Temporal's spans and
// metrics, as the SDK's contrib package names it.
const temporalScope = "temporal-sdk-go"

// Tags Temporal's tracing interceptor puts on its spans.
const (
	runIDTag    = "temporalRunID"
	updateIDTag = "temporalUpdateID"
)

// Operations of the workflow-side spans that other spans hang under.
const (
	opRunWorkflow  = "RunWorkflow"
	opHandleUpdate = "HandleUpdate"
)

// newTracingInterceptor is Temporal's OpenTelemetry tracing interceptor
// (go.temporal.io/sdk/contrib/opentelemetry) with its tracer made
// replay-safe (tracer).
func newTracingInterceptor(t trace.Tracer, r *runs) (interceptor.Interceptor, error) {
	opts := temporalotel.TracerOptions{
		Tracer: t,
		// The starter's follower and the Web UI query progress every few
		// seconds: a span per query would bury the investigation's own.
		DisableQueryTracing: true,
		SpanStarter:         startSafe,
	}
	base, err := temporalotel.NewTracer(opts)
	if err != nil {
		return nil, fmt.Errorf("Temporal's OpenTelemetry tracer: %w", err)
	}
	return interceptor.NewTracingInterceptor(&tracer{Tracer: base, options: opts, runs: r}), nil
}

// tracer is Temporal's OpenTelemetry tracer but for the workflow-side spans
// other spans hang under (RunWorkflow, HandleUpdate). Temporal's
// interceptor starts those again each time a worker replays a run's
// history (after a restart, a cache eviction, a query on a cold cache),
// each time with a new span ID. Here such a span
//   - has an ID derived from the run (and the update), so a span that a
//     replaying worker starts later (an activity scheduled after a restart)
//     has the same parent as one started before;
//   - is exported only by the worker that runs it live, never by a replay;
//   - for RunWorkflow, ends as soon as it starts: a run can outlive any one
//     worker (and wait for follow-ups for hours), so a span held open until
//     the run returns would be lost with a killed worker.
//
// Outbound spans (StartActivity, StartChildWorkflow, SignalWorkflow) are
// already skipped on replay by Temporal's interceptor; activity spans are
// once per attempt.
type tracer struct {
	interceptor.Tracer
	options temporalotel.TracerOptions
	runs    *runs
}

func (t *tracer) StartSpan(o *interceptor.TracerStartSpanOptions) (interceptor.TracerSpan, error) {
	key := stableKey(o)
	if key == "" {
		return t.Tracer.StartSpan(o)
	}
	replaying := t.runs.replaying(o.Tags[runIDTag])
	instant := o.Operation == opRunWorkflow
	// Temporal's tracer sets the tags only once SpanStarter returns, when an
	// instant span has ended and drops them: they go in at the start.
	tags := make([]attribute.KeyValue, 0, len(o.Tags))
	for k, v := range o.Tags {
		tags = append(tags, attribute.String(k, v))
	}
	opts := t.options
	opts.SpanStarter = func(ctx context.Context, tr trace.Tracer, name string, so ...trace.SpanStartOption) trace.Span {
		so = append(so, trace.WithAttributes(tags...))
		_, s := tr.Start(withStableIDs(ctx, key), name, so...)
		if replaying {
			return replayedSpan{s}
		}
		if instant {
			s.End()
		}
		return &safeSpan{Span: s}
	}
	one, err := temporalotel.NewTracer(opts)
	if err != nil {
		return nil, err
	}
	return one.StartSpan(o)
}

// stableKey names a workflow-side span that other spans hang under, the
// same on every replay; "" for every other span.
func stableKey(o *interceptor.TracerStartSpanOptions) string {
	if o.IdempotencyKey == "" { // set only on the workflow side
		return ""
	}
	switch o.Operation {
	case opRunWorkflow:
		return opRunWorkflow + "/" + o.Tags[runIDTag]
	case opHandleUpdate:
		return opHandleUpdate + "/" + o.Tags[runIDTag] + "/" + o.Tags[updateIDTag]
	}
	return ""
}

// runs records, per run this worker executes, whether its code is
// replaying history at the moment a workflow-side span starts.
type runs struct{ m sync.Map } // run ID → *runState

type runState struct{ replaying atomic.Bool }

func (r *runs) replaying(runID string) bool {
	st, ok := r.m.Load(runID)
	return ok && st.(*runState).replaying.Load()
}

// guard records the replay state for the tracer. It runs outside the
// tracing interceptor (Telemetry.Client puts it first), so the state is set
// before the span starts; a run's code runs one coroutine at a time, so
// nothing changes it in between.
type guard struct {
	interceptor.InterceptorBase
	runs *runs
}

func (g *guard) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &guardInbound{
		WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next},
		runs:                           g.runs,
		runID:                          workflow.GetInfo(ctx).WorkflowExecution.RunID,
		state:                          &runState{},
	}
}

type guardInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	runs  *runs
	runID string
	state *runState
}

func (g *guardInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	g.state.replaying.Store(workflow.IsReplaying(ctx))
	g.runs.m.Store(g.runID, g.state)
	// Also when the run leaves the cache (its coroutines exit); only this
	// execution's entry, not one a newer execution of the run stored.
	defer g.runs.m.CompareAndDelete(g.runID, g.state)
	return g.Next.ExecuteWorkflow(ctx, in)
}

func (g *guardInbound) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	g.state.replaying.Store(workflow.IsReplaying(ctx))
	return g.Next.ExecuteUpdate(ctx, in)
}

// stableIDs carries the hash a workflow-side span's IDs come from to the
// ID generator.
type stableIDs struct{}

func withStableIDs(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, stableIDs{}, sha256.Sum256([]byte(key)))
}

// idGenerator makes random IDs, or the stable ones the context asks for.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	if sum, ok := ctx.Value(stableIDs{}).([32]byte); ok {
		copy(tid[:], sum[:16])
	} else {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	if !tid.IsValid() {
		tid[15] = 1
	}
	return tid, idGenerator{}.NewSpanID(ctx, tid)
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	if sum, ok := ctx.Value(stableIDs{}).([32]byte); ok {
		copy(sid[:], sum[16:24])
	} else {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	if !sid.IsValid() {
		sid[7] = 1
	}
	return sid
}

// replayedSpan is a workflow-side span started by a replay: its IDs are
// those of the span the live run exported, and it is never ended, so never
// exported again.
type replayedSpan struct{ trace.Span }

func (replayedSpan) End(...trace.SpanEndOption) {}

// startSafe starts every other span of Temporal's interceptor.
func startSafe(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) trace.Span {
	_, s := t.Start(ctx, name, opts...)
	return &safeSpan{Span: s}
}

// safeSpan records a failure by its kind only: error text can quote an
// alert, a model's words or a query (which payload encryption keeps out of
// history), so it stays out of spans too. And it hands a library that
// starts spans from the context's span (otelhttp under the BigQuery client
// does) a no-op provider: only the spans this package vets are exported,
// not one whose URL or attributes might hold an indicator or a query.
type safeSpan struct {
	trace.Span
	kind string
}

func (*safeSpan) TracerProvider() trace.TracerProvider { return tracenoop.NewTracerProvider() }

func (s *safeSpan) RecordError(err error, _ ...trace.EventOption) {
	if err == nil {
		return
	}
	s.kind = errorKind(err)
	s.Span.SetAttributes(semconv.ErrorTypeKey.String(s.kind))
}

func (s *safeSpan) SetStatus(code codes.Code, _ string) {
	desc := ""
	if code == codes.Error {
		desc = s.kind
	}
	s.Span.SetStatus(code, desc)
}

// errorKind names a failure without its text: a Temporal application
// error's type (GeminiRateLimited, MalformedModelOutput, ...), else the
// error's Go type, else "_OTHER".
func errorKind(err error) string {
	var typed interface{ Type() string }
	switch {
	case errors.As(err, &typed) && typed.Type() != "":
		return value(typed.Type(), 64)
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	name := fmt.Sprintf("%T", err)
	name = name[strings.LastIndex(name, ".")+1:]
	switch name {
	case "errorString", "wrapError", "wrapErrors", "joinError", "":
		return "_OTHER"
	}
	return value(name, 64)
}
