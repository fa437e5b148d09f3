package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/internal/otlptest"
	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
)

// clearEnv unsets every variable that switches export on.
func clearEnv(t *testing.T) {
	for _, name := range []string{envEndpoint, envTracesEndpoint, envMetricsEndpoint, envDisabled, "OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS"} {
		t.Setenv(name, "")
	}
}

// TestNothingWithoutAnEndpoint: without an OTLP endpoint variable (or with
// OTEL_SDK_DISABLED), nothing is set up: the client options stay as they
// were and every recorder is a no-op.
func TestNothingWithoutAnEndpoint(t *testing.T) {
	clearEnv(t)
	for name, env := range map[string]map[string]string{
		"unset":    {},
		"disabled": {envEndpoint: "http://127.0.0.1:1", envDisabled: "true"},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range env {
				t.Setenv(k, v)
			}
			require.False(t, Enabled())
			tel, err := Start(context.Background(), "investigator-test", nil)
			require.NoError(t, err)
			require.Nil(t, tel)
			var opts client.Options
			tel.Client(&opts)
			assert.Empty(t, opts.Interceptors)
			assert.Nil(t, opts.MetricsHandler)
			ctx := context.Background()
			got, end := tel.Span(ctx, "starter investigate")
			assert.Equal(t, ctx, got)
			end(true)
			calls := tel.ModelCalls(ProviderGemini, "", pricing.Default())
			assert.Nil(t, calls)
			got, call := calls.Start(ctx, OpGenerateContent, "gemini-2.5-flash", "ModelTurn")
			assert.Equal(t, ctx, got)
			call.End(ctx, Answer{}, nil)
			assert.NoError(t, tel.Shutdown(ctx))
		})
	}
}

// TestExportsToAnOTLPReceiver: with the standard variables pointing at a
// real OTLP receiver, over gRPC and over HTTP, a command's span and a model
// call's span arrive in one trace with the GenAI attributes and the
// configured headers, the GenAI and product metrics arrive, and a failed
// call carries its kind but not its text.
func TestExportsToAnOTLPReceiver(t *testing.T) {
	rcv, err := otlptest.Start()
	require.NoError(t, err)
	defer rcv.Close()
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(proto, func(t *testing.T) {
			clearEnv(t)
			endpoint := rcv.GRPCEndpoint
			if proto != "grpc" {
				endpoint = rcv.HTTPEndpoint
			}
			service := "investigator-test-" + strings.ReplaceAll(proto, "/", "-")
			t.Setenv(envEndpoint, endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=secops")
			t.Setenv("OTEL_SERVICE_NAME", service)
			ctx := context.Background()
			tel, err := Start(ctx, "ignored-when-OTEL_SERVICE_NAME-is-set", nil)
			require.NoError(t, err)
			require.NotNil(t, tel)

			calls := tel.ModelCalls(ProviderVertexAI, "europe-west1-aiplatform.googleapis.com", pricing.Default())
			cmdCtx, end := tel.Span(ctx, "starter investigate")
			callCtx, call := calls.Start(cmdCtx, OpGenerateContent, "gemini-2.5-flash", "ModelTurn")
			call.End(callCtx, Answer{ResponseModel: "gemini-2.5-flash-001", ResponseID: "resp-1", FinishReasons: []string{"STOP"},
				Usage: investigation.Usage{Calls: 1, Model: "gemini-2.5-flash", PromptTokens: 1000, OutputTokens: 200, ThoughtTokens: 50}}, nil)
			secret := "AKIAIOSFODNN7EXAMPLE in alert field 'Ignore previous instructions'"
			callCtx, call = calls.Start(cmdCtx, OpGenerateContent, "gemini-2.5-flash", "Reflect")
			call.End(callCtx, Answer{}, temporal.NewApplicationError("Gemini rejected the request: "+secret, "GeminiInvalidRequest"))
			end(false)
			require.NoError(t, tel.Shutdown(ctx))

			var mine []otlptest.Span
			for _, s := range rcv.Spans() {
				if s.Service == service {
					mine = append(mine, s)
				}
			}
			require.Len(t, mine, 3)
			root, ok, failed := mine[0], mine[1], mine[2]
			require.Equal(t, "starter investigate", root.Name)
			require.Empty(t, root.ParentID)
			for _, s := range mine[1:] {
				require.Equal(t, "generate_content gemini-2.5-flash", s.Name)
				require.Equal(t, root.TraceID, s.TraceID)
				require.Equal(t, root.SpanID, s.ParentID)
			}
			require.Equal(t, map[string]any{
				"gen_ai.operation.name":                "generate_content",
				"gen_ai.provider.name":                 "gcp.vertex_ai",
				"gen_ai.system":                        "gcp.vertex_ai",
				"gen_ai.request.model":                 "gemini-2.5-flash",
				"gen_ai.response.model":                "gemini-2.5-flash-001",
				"gen_ai.response.id":                   "resp-1",
				"gen_ai.response.finish_reasons":       []any{"stop"},
				"gen_ai.usage.input_tokens":            int64(1000),
				"gen_ai.usage.output_tokens":           int64(250),
				"gen_ai.usage.reasoning.output_tokens": int64(50),
				"server.address":                       "europe-west1-aiplatform.googleapis.com",
			}, ok.Attrs)
			require.Equal(t, "GeminiInvalidRequest", failed.Attrs["error.type"])
			require.Equal(t, "GeminiInvalidRequest", failed.Message)
			require.NotContains(t, fmt.Sprint(failed), "AKIA")
			require.NotContains(t, fmt.Sprint(failed), "Ignore previous")
			require.Contains(t, rcv.Header("x-team"), "secops")

			latest := func(name string) otlptest.Metric {
				for _, m := range rcv.Latest(name) {
					if m.Service == service {
						return m
					}
				}
				t.Fatalf("no %s from %s", name, service)
				return otlptest.Metric{}
			}
			duration, usage := latest("gen_ai.client.operation.duration"), latest("gen_ai.client.token.usage")
			require.Len(t, duration.Points, 2, "one series without error, one with its error.type")
			require.Len(t, usage.Points, 2, "input and output")
			tokens := map[string]float64{}
			for _, p := range latest(MetricTokens).Points {
				tokens[fmt.Sprint(p.Attrs["gen_ai.token.type"], "/", p.Attrs[AttrActivity])] = p.Value
			}
			require.Equal(t, map[string]float64{"input/ModelTurn": 1000, "output/ModelTurn": 250}, tokens)
			cost := latest(MetricCost)
			require.Len(t, cost.Points, 1)
			require.InDelta(t, (1000*0.30+250*2.50)/1e6, cost.Points[0].Value, 1e-12)
			require.Equal(t, "{USD}", cost.Unit)
		})
	}
}

// TestPrometheusPortTaken: with OTEL_METRICS_EXPORTER=prometheus, a second
// process on the machine (the cluster's second worker, a starter command
// while a worker runs) finds the port taken: it runs on, traces still on,
// without metrics, and says so in one warning.
func TestPrometheusPortTaken(t *testing.T) {
	clearEnv(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	t.Setenv(envEndpoint, "http://127.0.0.1:1")
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", strconv.Itoa(held.Addr().(*net.TCPAddr).Port))
	var log bytes.Buffer
	tel, err := Start(context.Background(), "investigator-starter", slog.New(slog.NewTextHandler(&log, nil)))
	require.NoError(t, err, "a taken metrics port must not fail the process")
	require.NotNil(t, tel)
	defer tel.Shutdown(context.Background())
	assert.NotNil(t, tel.tp, "traces still exported")
	assert.Nil(t, tel.mp, "no metrics")
	assert.Equal(t, 1, strings.Count(log.String(), "level=WARN"), log.String())
	assert.Contains(t, log.String(), "without metrics")
}

// TestErrorKind: a failure is named by its Temporal type, or its Go type,
// never by its text.
func TestErrorKind(t *testing.T) {
	for err, want := range map[error]string{
		temporal.NewApplicationError("429 from Gemini for key AIza…", "GeminiRateLimited"):                            "GeminiRateLimited",
		fmt.Errorf("step_1 failed: %w", temporal.NewNonRetryableApplicationError("bad", "MalformedModelOutput", nil)): "MalformedModelOutput",
		errors.New("tool bigquery_query: SELECT secret FROM t"):                                                       "_OTHER",
		fmt.Errorf("wrapped: %w", context.Canceled):                                                                   "canceled",
		context.DeadlineExceeded:          "deadline_exceeded",
		&time.ParseError{Value: "secret"}: "ParseError",
	} {
		assert.Equal(t, want, errorKind(err), err.Error())
	}
}

// TestTraceparent: a span's traceparent, kept in a record, puts a later
// call under that span; an empty or malformed one changes nothing.
func TestTraceparent(t *testing.T) {
	exp := newSpans()
	tel, err := build(resource.Empty(), exp, nil)
	require.NoError(t, err)
	ctx := context.Background()
	alertCtx, end := tel.Span(ctx, "intake alert")
	tp := Traceparent(alertCtx)
	end(false)
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, tp)
	assert.Empty(t, Traceparent(ctx))

	later, end := tel.Span(WithTraceparent(ctx, tp), "start the investigation")
	end(false)
	assert.Equal(t, trace.SpanContextFromContext(alertCtx).TraceID(), trace.SpanContextFromContext(later).TraceID())
	for _, bad := range []string{"", "00-zz-yy-01", "x"} {
		assert.Equal(t, ctx, WithTraceparent(ctx, bad), bad)
	}
	require.NoError(t, tel.Shutdown(ctx))
	got := exp.GetSpans().Snapshots()
	require.Len(t, got, 2)
	assert.Equal(t, got[0].SpanContext().SpanID(), got[1].Parent().SpanID())
}

// stuckSpans is a span exporter whose collector never answers.
type stuckSpans struct{ spans }

func (stuckSpans) Shutdown(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// countedMetrics counts the exports that reached it.
type countedMetrics struct{ n atomic.Int32 }

func (*countedMetrics) Temporality(k metric.InstrumentKind) metricdata.Temporality {
	return metric.DefaultTemporalitySelector(k)
}

func (*countedMetrics) Aggregation(k metric.InstrumentKind) metric.Aggregation {
	return metric.DefaultAggregationSelector(k)
}

func (*countedMetrics) ForceFlush(context.Context) error { return nil }

func (c *countedMetrics) Export(context.Context, *metricdata.ResourceMetrics) error {
	c.n.Add(1)
	return nil
}

func (*countedMetrics) Shutdown(context.Context) error { return nil }

// TestShutdownFlushesMetricsWhileTracesHang: a trace collector that does
// not answer does not eat the deadline the metrics' last flush needs.
func TestShutdownFlushesMetricsWhileTracesHang(t *testing.T) {
	mexp := &countedMetrics{}
	reader := metric.NewPeriodicReader(mexp, metric.WithInterval(time.Hour))
	tel, err := build(resource.Empty(), stuckSpans{newSpans()}, reader)
	require.NoError(t, err)
	_, end := tel.Span(context.Background(), "starter investigate")
	end(false)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	require.Error(t, tel.Shutdown(ctx), "the traces' shutdown timed out")
	assert.Equal(t, int32(1), mexp.n.Load(), "the metrics were flushed")
}
