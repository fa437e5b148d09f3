// Package otlptest is a real OTLP receiver for tests: it serves the
// official OTLP collector services (go.opentelemetry.io/proto/otlp) over
// gRPC and over HTTP with protobuf bodies, as a collector does, and keeps
// what it receives so a test can look at the spans and metrics a process
// exported.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one HTTP export request.
const maxBody = 64 << 20

// Receiver is an OTLP endpoint on 127.0.0.1: GRPCEndpoint for
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc, HTTPEndpoint for http/protobuf.
type Receiver struct {
	GRPCEndpoint string
	HTTPEndpoint string

	grpc *grpc.Server
	http *http.Server

	mu      sync.Mutex
	spans   []Span
	metrics []Metric
	headers map[string][]string
}

// Span is one span received, with its resource's service name.
type Span struct {
	Service  string
	Scope    string
	Name     string
	Kind     tracepb.Span_SpanKind
	TraceID  string
	SpanID   string
	ParentID string // "" for a root span
	Start    time.Time
	End      time.Time
	Attrs    map[string]any
	Status   tracepb.Status_StatusCode
	Message  string   // the status message
	Events   []string // event names
}

// Metric is one metric of one export, with its resource's service name and
// process ID (each process exports its own cumulative series).
type Metric struct {
	Service string
	PID     int64
	Scope   string
	Name    string
	Unit    string
	Points  []Point
}

// Point is one data point: Value for a sum or a gauge, Count and Sum for a
// histogram.
type Point struct {
	Attrs map[string]any
	Value float64
	Count uint64
	Sum   float64
}

// Start listens on two free ports of 127.0.0.1 and serves until Close.
func Start() (*Receiver, error) {
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("OTLP receiver: %w", err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		return nil, fmt.Errorf("OTLP receiver: %w", err)
	}
	r := &Receiver{GRPCEndpoint: "http://" + gl.Addr().String(), HTTPEndpoint: "http://" + hl.Addr().String(), headers: map[string][]string{}}
	r.grpc = grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		r.addHeaders(md)
		return next(ctx, req)
	}))
	colltrace.RegisterTraceServiceServer(r.grpc, traceService{r: r})
	collmetrics.RegisterMetricsServiceServer(r.grpc, metricsService{r: r})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		r.addHeaders(req.Header)
		var in colltrace.ExportTraceServiceRequest
		if serveHTTP(w, req, &in, &colltrace.ExportTraceServiceResponse{}) {
			r.addSpans(in.GetResourceSpans())
		}
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, req *http.Request) {
		r.addHeaders(req.Header)
		var in collmetrics.ExportMetricsServiceRequest
		if serveHTTP(w, req, &in, &collmetrics.ExportMetricsServiceResponse{}) {
			r.addMetrics(in.GetResourceMetrics())
		}
	})
	r.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go r.grpc.Serve(gl)
	go r.http.Serve(hl)
	return r, nil
}

// Close stops both servers.
func (r *Receiver) Close() {
	r.grpc.Stop()
	r.http.Close()
}

// serveHTTP decodes an OTLP/HTTP protobuf request (gzip or not) into in
// and answers with out; it says whether in was read.
func serveHTTP(w http.ResponseWriter, req *http.Request, in, out proto.Message) bool {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "only application/x-protobuf, not "+ct, http.StatusUnsupportedMediaType)
		return false
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return false
		}
		defer zr.Close()
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err == nil {
		err = proto.Unmarshal(raw, in)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	b, _ := proto.Marshal(out)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(b))
	return true
}

type traceService struct {
	colltrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(_ context.Context, in *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	s.r.addSpans(in.GetResourceSpans())
	return &colltrace.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	collmetrics.UnimplementedMetricsServiceServer
	r *Receiver
}

func (s metricsService) Export(_ context.Context, in *collmetrics.ExportMetricsServiceRequest) (*collmetrics.ExportMetricsServiceResponse, error) {
	s.r.addMetrics(in.GetResourceMetrics())
	return &collmetrics.ExportMetricsServiceResponse{}, nil
}

func (r *Receiver) addSpans(rs []*tracepb.ResourceSpans) {
	var got []Span
	for _, res := range rs {
		service := serviceName(res.GetResource())
		for _, ss := range res.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{
					Service: service, Scope: ss.GetScope().GetName(), Name: sp.GetName(), Kind: sp.GetKind(),
					TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					Start: time.Unix(0, int64(sp.GetStartTimeUnixNano())), End: time.Unix(0, int64(sp.GetEndTimeUnixNano())),
					Attrs: attrs(sp.GetAttributes()), Status: sp.GetStatus().GetCode(), Message: sp.GetStatus().GetMessage(),
				}
				if len(sp.GetParentSpanId()) > 0 {
					s.ParentID = hex.EncodeToString(sp.GetParentSpanId())
				}
				for _, e := range sp.GetEvents() {
					s.Events = append(s.Events, e.GetName())
				}
				got = append(got, s)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
}

func (r *Receiver) addMetrics(rm []*metricpb.ResourceMetrics) {
	var got []Metric
	for _, res := range rm {
		service := serviceName(res.GetResource())
		pid, _ := attrs(res.GetResource().GetAttributes())["process.pid"].(int64)
		for _, sm := range res.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				got = append(got, Metric{Service: service, PID: pid, Scope: sm.GetScope().GetName(), Name: m.GetName(), Unit: m.GetUnit(), Points: points(m)})
			}
		}
	}
	r.mu.Lock()
	r.metrics = append(r.metrics, got...)
	r.mu.Unlock()
}

func (r *Receiver) addHeaders(h map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, vs := range h {
		k = strings.ToLower(k)
		r.headers[k] = append(r.headers[k], vs...)
	}
}

// Header returns every value of a request header (or gRPC metadata) that
// exports carried.
func (r *Receiver) Header(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.headers[strings.ToLower(name)]...)
}

// Spans returns every span received so far, by start time.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	out := append([]Span(nil), r.spans...)
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Metrics returns every metric of every export so far, in arrival order (a
// cumulative metric appears once per export).
func (r *Receiver) Metrics() []Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Metric(nil), r.metrics...)
}

// Latest returns the last export of the metric named name from each
// process, by service and process ID.
func (r *Receiver) Latest(name string) []Metric {
	type proc struct {
		service string
		pid     int64
	}
	last := map[proc]int{}
	all := r.Metrics()
	var order []proc
	for i, m := range all {
		if m.Name != name {
			continue
		}
		p := proc{m.Service, m.PID}
		if _, ok := last[p]; !ok {
			order = append(order, p)
		}
		last[p] = i
	}
	out := make([]Metric, 0, len(order))
	for _, p := range order {
		out = append(out, all[last[p]])
	}
	return out
}

// Total sums the latest value of every point of the metric named name
// whose attributes include match, over every process.
func (r *Receiver) Total(name string, match map[string]any) float64 {
	total := 0.0
	for _, m := range r.Latest(name) {
		for _, p := range m.Points {
			if includes(p.Attrs, match) {
				total += p.Value + p.Sum
			}
		}
	}
	return total
}

func includes(attrs, match map[string]any) bool {
	for k, v := range match {
		if attrs[k] != v {
			return false
		}
	}
	return true
}

func points(m *metricpb.Metric) []Point {
	var out []Point
	number := func(dps []*metricpb.NumberDataPoint) {
		for _, p := range dps {
			v := p.GetAsDouble()
			if _, ok := p.GetValue().(*metricpb.NumberDataPoint_AsInt); ok {
				v = float64(p.GetAsInt())
			}
			out = append(out, Point{Attrs: attrs(p.GetAttributes()), Value: v})
		}
	}
	switch d := m.GetData().(type) {
	case *metricpb.Metric_Sum:
		number(d.Sum.GetDataPoints())
	case *metricpb.Metric_Gauge:
		number(d.Gauge.GetDataPoints())
	case *metricpb.Metric_Histogram:
		for _, p := range d.Histogram.GetDataPoints() {
			out = append(out, Point{Attrs: attrs(p.GetAttributes()), Count: p.GetCount(), Sum: p.GetSum()})
		}
	case *metricpb.Metric_ExponentialHistogram:
		for _, p := range d.ExponentialHistogram.GetDataPoints() {
			out = append(out, Point{Attrs: attrs(p.GetAttributes()), Count: p.GetCount(), Sum: p.GetSum()})
		}
	}
	return out
}

func serviceName(r *resourcepb.Resource) string {
	return fmt.Sprint(attrs(r.GetAttributes())["service.name"])
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		out[kv.GetKey()] = value(kv.GetValue())
	}
	return out
}

// value is an attribute value as Go: string, bool, int64, float64 or
// []any.
func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	}
	return nil
}
