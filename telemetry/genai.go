package telemetry

import (
	"context"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
)

// Model call operations (gen_ai.operation.name).
const (
	OpGenerateContent = "generate_content"
	OpEmbeddings      = "embeddings"
)

// Providers of the Gemini models (gen_ai.provider.name).
const (
	ProviderGemini   = "gcp.gemini"
	ProviderVertexAI = "gcp.vertex_ai"
)

// The product's own metrics of model usage, by activity; the workflow
// counts investigations by verdict (investigation.MetricInvestigations).
const (
	MetricTokens = "investigator.model.tokens"
	MetricCost   = "investigator.model.cost"
	// AttrActivity names the activity that made a model call.
	AttrActivity = "investigator.activity"
)

// gen_ai.system is the name gen_ai.provider.name had until semantic
// conventions 1.37; backends built on the older conventions still read it.
const attrSystem = "gen_ai.system"

// The bucket boundaries the GenAI semantic conventions advise.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

// ModelCalls records model calls: a span per call with the GenAI semantic
// conventions (operation, provider, model, tokens, finish reasons; never a
// prompt or an answer), the GenAI client metrics, and the product's token
// and cost counters. A nil *ModelCalls records nothing.
type ModelCalls struct {
	tracer   trace.Tracer
	provider string
	server   string
	prices   pricing.Table
	duration genaiconv.ClientOperationDuration
	usage    genaiconv.ClientTokenUsage
	tokens   metric.Int64Counter
	cost     metric.Float64Counter
}

// ModelCalls returns the recorder of model calls to a provider
// (ProviderGemini or ProviderVertexAI) at server (a host, "" unknown),
// pricing them with prices; nil when t is nil.
func (t *Telemetry) ModelCalls(provider, server string, prices pricing.Table) *ModelCalls {
	if t == nil {
		return nil
	}
	meter := t.MeterProvider().Meter(Scope)
	m := &ModelCalls{tracer: t.TracerProvider().Tracer(Scope), provider: provider, server: server, prices: prices}
	// Instruments that fail to build are no-ops (the semconv helpers
	// return one); the SDK reports why through its error handler.
	m.duration, _ = genaiconv.NewClientOperationDuration(meter, metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.usage, _ = genaiconv.NewClientTokenUsage(meter, metric.WithExplicitBucketBoundaries(tokenBuckets...))
	m.tokens, _ = meter.Int64Counter(MetricTokens, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens the model was billed for, by model, token type (input, output with thinking) and activity."))
	currency := prices.Currency
	if currency == "" {
		currency = "USD"
	}
	m.cost, _ = meter.Float64Counter(MetricCost, metric.WithUnit("{"+currency+"}"),
		metric.WithDescription("Estimated cost of the model calls, from the price table, by model and activity."))
	return m
}

// ModelCall is one call in flight.
type ModelCall struct {
	m        *ModelCalls
	span     trace.Span
	start    time.Time
	op       string
	model    string
	activity string
}

// Start begins a model call of operation op to model, made by activity
// (its Temporal activity type, "" outside one).
func (m *ModelCalls) Start(ctx context.Context, op, model, activity string) (context.Context, *ModelCall) {
	if m == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(op),
		semconv.GenAIProviderNameKey.String(m.provider),
		attribute.String(attrSystem, m.provider),
		semconv.GenAIRequestModel(model),
	}
	if m.server != "" {
		attrs = append(attrs, semconv.ServerAddress(m.server))
	}
	_, span := m.tracer.Start(ctx, op+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return trace.ContextWithSpan(ctx, &safeSpan{Span: span}), &ModelCall{m: m, span: span, start: time.Now(), op: op, model: model, activity: activity}
}

// Answer is what a model call returned, without its content.
type Answer struct {
	ResponseModel string
	ResponseID    string
	FinishReasons []string
	// Usage is what the provider billed: prompt, output and thinking tokens.
	Usage investigation.Usage
}

// End records the call's outcome: the answer, or err by its kind only.
func (c *ModelCall) End(ctx context.Context, a Answer, err error) {
	if c == nil {
		return
	}
	m := c.m
	op, provider := genaiconv.OperationNameAttr(c.op), genaiconv.ProviderNameAttr(m.provider)
	metricAttrs := []attribute.KeyValue{semconv.GenAIRequestModel(c.model)}
	if m.server != "" {
		metricAttrs = append(metricAttrs, semconv.ServerAddress(m.server))
	}
	if err != nil {
		kind := semconv.ErrorTypeKey.String(errorKind(err))
		c.span.SetAttributes(kind)
		c.span.SetStatus(codes.Error, kind.Value.AsString())
		c.span.End()
		m.duration.Record(ctx, time.Since(c.start).Seconds(), op, provider, slices.Concat(metricAttrs, []attribute.KeyValue{kind})...)
		return
	}
	// Embeddings calls bill no tokens the answer reports.
	billed := c.op == OpGenerateContent
	in, out := int64(a.Usage.PromptTokens), int64(a.Usage.OutputTokens+a.Usage.ThoughtTokens)
	var attrs []attribute.KeyValue
	if billed {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(int(in)), semconv.GenAIUsageOutputTokens(int(out)))
	}
	if a.Usage.ThoughtTokens > 0 {
		attrs = append(attrs, semconv.GenAIUsageReasoningOutputTokens(a.Usage.ThoughtTokens))
	}
	if a.ResponseModel != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(value(a.ResponseModel, 128)))
	}
	if a.ResponseID != "" {
		attrs = append(attrs, semconv.GenAIResponseID(value(a.ResponseID, 128)))
	}
	if reasons := finishReasons(a.FinishReasons); len(reasons) > 0 {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(reasons...))
	}
	c.span.SetAttributes(attrs...)
	c.span.End()

	m.duration.Record(ctx, time.Since(c.start).Seconds(), op, provider, metricAttrs...)
	if !billed {
		return
	}
	m.usage.Record(ctx, in, op, provider, genaiconv.TokenTypeInput, metricAttrs...)
	m.usage.Record(ctx, out, op, provider, genaiconv.TokenTypeOutput, metricAttrs...)
	byActivity := slices.Concat(metricAttrs, []attribute.KeyValue{attribute.String(AttrActivity, c.activity)})
	m.tokens.Add(ctx, in, metric.WithAttributes(slices.Concat(byActivity, []attribute.KeyValue{semconv.GenAITokenTypeInput})...))
	m.tokens.Add(ctx, out, metric.WithAttributes(slices.Concat(byActivity, []attribute.KeyValue{semconv.GenAITokenTypeOutput})...))
	if cost, ok := m.prices.Estimate(a.Usage); ok {
		m.cost.Add(ctx, cost, metric.WithAttributes(byActivity...))
	}
}

// finishReasons are the candidates' finish reasons in lower case ("stop",
// "max_tokens", "safety"), bounded: they come from the provider's answer.
func finishReasons(in []string) []string {
	var out []string
	for _, r := range in {
		if len(out) == 8 {
			break
		}
		if r = strings.ToLower(strings.TrimSpace(r)); r != "" {
			out = append(out, value(r, 32))
		}
	}
	return out
}

// value makes text from outside an attribute value: valid UTF-8 (OTLP
// refuses a batch with one invalid string) and at most n bytes.
func value(s string, n int) string { return clip.String(strings.ToValidUTF8(s, "\uFFFD"), n) }
