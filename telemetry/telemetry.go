// Package telemetry exports OpenTelemetry traces and metrics when the
// standard OTEL_* environment asks for them, and does nothing otherwise.
// One call (Start) sets a process up; its Telemetry then equips the
// Temporal client (Client: Temporal's tracing interceptor, made
// replay-safe, and the SDK's metrics handler) and the model calls
// (ModelCalls: GenAI spans and metrics). design/observability.md says what
// is exported and why.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// Scope is the instrumentation scope of the product's own spans and
// metrics.
const Scope = "github.com/secops-agent/investigator"

// The variables that switch export on, per signal: without one of them
// nothing is set up and nothing is exported.
const (
	envEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	envDisabled        = "OTEL_SDK_DISABLED"
)

// Telemetry is one process's exporters. A nil *Telemetry is valid: every
// method then does nothing, at no cost.
type Telemetry struct {
	tp      *sdktrace.TracerProvider // nil when traces are off
	mp      *sdkmetric.MeterProvider // nil when metrics are off
	tracing interceptor.Interceptor
	runs    *runs
	once    sync.Once
}

// Enabled reports whether the environment asks for traces or metrics.
func Enabled() bool { return tracesOn() || metricsOn() }

func tracesOn() bool  { return !disabled() && (set(envEndpoint) || set(envTracesEndpoint)) }
func metricsOn() bool { return !disabled() && (set(envEndpoint) || set(envMetricsEndpoint)) }

func set(name string) bool { return strings.TrimSpace(os.Getenv(name)) != "" }

func disabled() bool {
	b, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv(envDisabled)))
	return b
}

// Start sets up export as the OTEL_* environment says (exporter, protocol,
// endpoint, headers, sampler, resource; OTEL_SERVICE_NAME wins over
// service), or returns nil when no OTLP endpoint variable is set. Export
// errors are logged to logger, never returned to the caller's work; so is
// a metric reader that cannot start (a Prometheus port another process
// holds): the process runs on without metrics.
func Start(ctx context.Context, service string, logger *slog.Logger) (*Telemetry, error) {
	if !Enabled() {
		return nil, nil
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service), semconv.ServiceVersion(version())),
		// After the defaults: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		// Not the command line: a --question holds the analyst's words.
		resource.WithProcessPID(),
		resource.WithProcessExecutableName(),
		resource.WithProcessRuntimeName(),
		resource.WithProcessRuntimeVersion(),
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	var exp sdktrace.SpanExporter
	if tracesOn() {
		if exp, err = autoexport.NewSpanExporter(ctx); err != nil {
			return nil, fmt.Errorf("OpenTelemetry span exporter: %w", err)
		}
	}
	var reader sdkmetric.Reader
	if metricsOn() {
		// A Prometheus reader binds its port now: a second process on the
		// machine (a second worker, a starter command) finds it taken, and
		// runs on without metrics rather than fail.
		if reader, err = autoexport.NewMetricReader(ctx); err != nil {
			reader = nil
			logger.Warn("OpenTelemetry metrics are off: running without metrics", "error", err)
		}
	}
	if exp == nil && reader == nil {
		return nil, nil
	}
	// Export failures (a collector down) are logged, never returned to a
	// command or an activity.
	otel.SetErrorHandler(&errorLog{logger: logger})
	t, err := build(res, exp, reader)
	if err != nil {
		return nil, err
	}
	logger.Info("exporting OpenTelemetry", "traces", t.tp != nil, "metrics", t.mp != nil, "endpoint", endpoint())
	return t, nil
}

// build makes the providers of a span exporter and a metric reader (each
// nil when its signal is off).
func build(res *resource.Resource, exp sdktrace.SpanExporter, reader sdkmetric.Reader) (*Telemetry, error) {
	t := &Telemetry{runs: &runs{}}
	if exp != nil {
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithIDGenerator(idGenerator{}))
		var err error
		if t.tracing, err = newTracingInterceptor(t.tp.Tracer(temporalScope), t.runs); err != nil {
			return nil, err
		}
	}
	if reader != nil {
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	}
	return t, nil
}

// endpoint names where export goes, without user info or query.
func endpoint() string {
	for _, name := range []string{envEndpoint, envTracesEndpoint, envMetricsEndpoint} {
		if u, err := url.Parse(strings.TrimSpace(os.Getenv(name))); err == nil && u.Host != "" {
			return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
		}
	}
	return ""
}

// version is the module version the binary was built from.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// Shutdown flushes what is buffered and stops the exporters; ctx bounds
// the wait.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var err error
	t.once.Do(func() {
		// Side by side, each with the whole deadline: a trace collector
		// that does not answer must not starve the metrics' last flush.
		var tErr, mErr error
		var wg sync.WaitGroup
		if t.tp != nil {
			wg.Go(func() { tErr = t.tp.Shutdown(ctx) })
		}
		if t.mp != nil {
			wg.Go(func() { mErr = t.mp.Shutdown(ctx) })
		}
		wg.Wait()
		err = errors.Join(tErr, mErr)
	})
	return err
}

// TracerProvider is the provider of the process's spans (a no-op one when
// traces are off).
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if t == nil || t.tp == nil {
		return tracenoop.NewTracerProvider()
	}
	return t.tp
}

// MeterProvider is the provider of the process's metrics (a no-op one when
// metrics are off).
func (t *Telemetry) MeterProvider() metric.MeterProvider {
	if t == nil || t.mp == nil {
		return metricnoop.NewMeterProvider()
	}
	return t.mp
}

// Client equips Temporal client options: the tracing interceptor (which a
// worker created from the client uses too) and the SDK's metrics handler.
func (t *Telemetry) Client(o *client.Options) {
	if t == nil {
		return
	}
	if t.tracing != nil {
		// The guard comes first: a worker runs it outside the tracing
		// interceptor, so it knows whether a run replays before a workflow
		// span starts.
		o.Interceptors = append([]interceptor.ClientInterceptor{&guard{runs: t.runs}, t.tracing}, o.Interceptors...)
	}
	if t.mp != nil {
		o.MetricsHandler = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
			Meter:                t.mp.Meter(temporalScope),
			UseMonotonicCounters: true,
			OnError:              func(err error) { otel.Handle(err) },
		})
	}
}

// Span starts a span of the product's own under ctx's span, or a root span
// ("starter investigate", one alert the intake took in); end records
// whether it failed, never the error's text.
func (t *Telemetry) Span(ctx context.Context, name string) (_ context.Context, end func(failed bool)) {
	if t == nil || t.tp == nil {
		return ctx, func(bool) {}
	}
	ctx, span := t.tp.Tracer(Scope).Start(ctx, name)
	return ctx, func(failed bool) {
		if failed {
			span.SetStatus(codes.Error, "failed")
			span.SetAttributes(semconv.ErrorTypeOther)
		}
		span.End()
	}
}

// Traceparent is the W3C traceparent of ctx's span, "" without one: what
// a record that crosses a workflow (an alert the intake admitted) keeps,
// so that the investigation it later starts joins the trace.
func Traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceparent returns ctx under the span tp names (from Traceparent);
// ctx as it is when tp is empty or malformed. A client call made with it
// (starting an investigation) hangs under that span.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp}))
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// errorLog logs OpenTelemetry's internal errors, one a minute at most.
type errorLog struct {
	logger *slog.Logger
	mu     sync.Mutex
	last   int64
}

func (e *errorLog) Handle(err error) {
	now := time.Now().Unix()
	e.mu.Lock()
	quiet := now-e.last < 60
	if !quiet {
		e.last = now
	}
	e.mu.Unlock()
	if !quiet {
		e.logger.Warn("OpenTelemetry export failed (repeats within a minute are not logged)", "error", err)
	}
}
