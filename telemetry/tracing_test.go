package telemetry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// TestWorkflowSpansKeepTheirIDs: the RunWorkflow span ends as soon as it
// starts, yet it is exported with the workflow and run IDs Temporal tags
// it with (as HandleUpdate is with its update ID), which Temporal's tracer
// sets only after the span has started.
func TestWorkflowSpansKeepTheirIDs(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(idGenerator{}))
	opts := temporalotel.TracerOptions{Tracer: tp.Tracer(temporalScope), SpanStarter: startSafe}
	base, err := temporalotel.NewTracer(opts)
	require.NoError(t, err)
	tr := &tracer{Tracer: base, options: opts, runs: &runs{}}
	for _, op := range []string{opRunWorkflow, opHandleUpdate} {
		span, err := tr.StartSpan(&interceptor.TracerStartSpanOptions{
			Operation: op, Name: "Investigation", FromHeader: true, Time: time.Now(),
			Tags:           map[string]string{"temporalWorkflowID": "investigation-x", runIDTag: "run-1", updateIDTag: "u-1"},
			IdempotencyKey: "WorkflowInboundInterceptor:default:investigation-x:run-1:1",
		})
		require.NoError(t, err)
		span.Finish(&interceptor.TracerFinishSpanOptions{})
	}
	got := exp.GetSpans()
	require.Len(t, got, 2)
	for _, s := range got {
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		assert.Equal(t, "investigation-x", attrs["temporalWorkflowID"], "%s: %v", s.Name, s.Attributes)
		assert.Equal(t, "run-1", attrs[runIDTag], "%s: %v", s.Name, s.Attributes)
		assert.Equal(t, "u-1", attrs[updateIDTag], "%s: %v", s.Name, s.Attributes)
	}
}
