package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/telemetry"
)

type memStore struct {
	mu   sync.Mutex
	put  []string
	fail error
}

func (s *memStore) Create(_ context.Context, a alerts.Alert) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return false, s.fail
	}
	s.put = append(s.put, a.ID)
	return true, nil
}

// admitter answers each batch with kind, recording the batches; like the
// admission workflow's validator, it refuses a request whose Check fails.
type admitter struct {
	mu      sync.Mutex
	batches [][]intake.Alert
	kind    string
	err     error
	block   chan struct{}
}

func (a *admitter) admit(ctx context.Context, req intake.AdmitRequest) (intake.AdmitResult, error) {
	if a.block != nil {
		<-a.block
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batches = append(a.batches, req.Alerts)
	if a.err != nil {
		return intake.AdmitResult{}, a.err
	}
	if err := req.Check(); err != nil {
		return intake.AdmitResult{}, err
	}
	var res intake.AdmitResult
	for _, al := range req.Alerts {
		res.Outcomes = append(res.Outcomes, intake.Outcome{AlertID: al.AlertID, WorkflowID: intake.WorkflowID(al.Identity), Kind: a.kind})
	}
	if a.kind == intake.OutcomeShed {
		res.RetryAfter = 30 * 1e9
	}
	return res, nil
}

func pipeline(t *testing.T, store Store, ad *admitter) *Pipeline {
	b := &Batcher{Admit: ad.admit, Settings: intake.Settings{MaxRunning: 1}, Linger: 10 * time.Millisecond, InFlight: 2}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go b.Run(ctx)
	return &Pipeline{Store: store, Batcher: b, CallTimeout: time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

const alert = `{"id": "a-1", "title": "odd login", "severity": "high", "src_ip": "203.0.113.4"}`

func TestPipelineOutcomes(t *testing.T) {
	store := &memStore{}
	ad := &admitter{kind: intake.OutcomeStarted}
	p := pipeline(t, store, ad)
	res := p.Take(context.Background(), []byte(alert))
	if res.Invalid != nil || res.Retry != nil || res.Outcome.Kind != intake.OutcomeStarted {
		t.Fatalf("%+v", res)
	}
	if len(store.put) != 1 || ad.batches[0][0].Identity != "generic:id:a-1" || ad.batches[0][0].Keys[0] != "ip:203.0.113.4" {
		t.Errorf("stored %v, admitted %+v", store.put, ad.batches)
	}
	if res := p.Take(context.Background(), []byte(`{"id": `)); res.Invalid == nil || !strings.Contains(res.Invalid.Error(), "not valid JSON") {
		t.Errorf("malformed: %+v", res)
	}
	if len(ad.batches) != 1 {
		t.Error("a malformed alert was admitted")
	}
	// Firestore down: nothing is admitted, the message must come back.
	store.fail = errors.New("connection refused")
	if res := p.Take(context.Background(), []byte(alert)); res.Retry == nil || len(ad.batches) != 1 {
		t.Errorf("store down: %+v", res)
	}
	// Temporal down.
	store.fail, ad.err = nil, errors.New("Temporal at localhost:7233 did not answer")
	if res := p.Take(context.Background(), []byte(alert)); res.Retry == nil {
		t.Errorf("admission down: %+v", res)
	}
	ad.err, ad.kind = nil, intake.OutcomeShed
	if res := p.Take(context.Background(), []byte(alert)); res.RetryAfter != 30*time.Second {
		t.Errorf("shed: %+v", res)
	}
}

func TestBatcherGathersConcurrentAlerts(t *testing.T) {
	ad := &admitter{kind: intake.OutcomeQueued}
	p := pipeline(t, &memStore{}, ad)
	var wg sync.WaitGroup
	for i := range 250 {
		wg.Go(func() {
			body, _ := json.Marshal(map[string]any{"id": i, "title": "x"})
			if res := p.Take(context.Background(), body); res.Outcome.Kind != intake.OutcomeQueued {
				t.Errorf("alert %d: %+v", i, res)
			}
		})
	}
	wg.Wait()
	n := 0
	for _, b := range ad.batches {
		n += len(b)
		if len(b) > intake.MaxBatch {
			t.Errorf("batch of %d", len(b))
		}
	}
	if n != 250 || len(ad.batches) > 50 {
		t.Errorf("%d alerts in %d batches", n, len(ad.batches))
	}
}

// TestPoisonAlertStallsNoBatch: a user name of 128 "Ⱥ" (256 bytes, 384 in
// lower case) made a grouping key the admission workflow refuses; it
// refused the whole batch, so every alert batched with it came back, and so
// did the poison, for ever. Now the over-long key is not made, and every
// alert of the batch is admitted.
func TestPoisonAlertStallsNoBatch(t *testing.T) {
	ad := &admitter{kind: intake.OutcomeStarted}
	p := pipeline(t, &memStore{}, ad)
	poison := `{"id": "p-1", "title": "x", "user": "` + strings.Repeat("Ⱥ", 128) + `"}`
	results := make([]Result, 10)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			body := fmt.Sprintf(`{"id": "a-%d", "title": "x", "src_ip": "203.0.113.4"}`, i)
			if i == 0 {
				body = poison
			}
			results[i] = p.Take(context.Background(), []byte(body))
		})
	}
	wg.Wait()
	for i, res := range results {
		if res.Outcome.Kind != intake.OutcomeStarted {
			t.Errorf("message %d: invalid %v, retry %v, outcome %q; want started", i, res.Invalid, res.Retry, res.Outcome.Kind)
		}
	}
}

// TestPipelineDeadLettersWhatAdmissionRefuses: an alert the admission
// workflow would refuse (here its traceparent is too long) is malformed,
// dead-lettered alone, not a failure that comes back for ever.
func TestPipelineDeadLettersWhatAdmissionRefuses(t *testing.T) {
	ad := &admitter{kind: intake.OutcomeStarted}
	p := pipeline(t, &memStore{}, ad)
	p.Traceparent = func(context.Context) string { return strings.Repeat("0", 200) }
	res := p.Take(context.Background(), []byte(alert))
	if res.Invalid == nil || !strings.Contains(res.Invalid.Error(), "traceparent") || res.Retry != nil {
		t.Errorf("invalid %v, retry %v; want it dead-lettered", res.Invalid, res.Retry)
	}
	if len(ad.batches) != 0 {
		t.Errorf("admitted %d batches", len(ad.batches))
	}
}

// TestBatcherRefusesAnAlertAlone: an alert the admission workflow cannot
// hold, submitted by any caller, never shares a batch with others.
func TestBatcherRefusesAnAlertAlone(t *testing.T) {
	ad := &admitter{kind: intake.OutcomeQueued}
	b := pipeline(t, &memStore{}, ad).Batcher
	bad := intake.Alert{AlertID: "bad", Identity: "content:bad", Keys: []string{"user:" + strings.Repeat("x", intake.MaxKeyBytes)}}
	errs := make([]error, 5)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			a := intake.Alert{AlertID: fmt.Sprint("a-", i), Identity: fmt.Sprint("content:a-", i)}
			if i == 0 {
				a = bad
			}
			_, _, errs[i] = b.Submit(context.Background(), a)
		})
	}
	wg.Wait()
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "grouping key") {
		t.Errorf("bad alert: %v", errs[0])
	}
	for i, err := range errs[1:] {
		if err != nil {
			t.Errorf("alert a-%d: %v", i+1, err)
		}
	}
}

func TestHTTP(t *testing.T) {
	ad := &admitter{kind: intake.OutcomeStarted, block: make(chan struct{})}
	h := &HTTP{Token: "tok", Pipeline: pipeline(t, &memStore{}, ad), MaxInFlight: 1, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	post := func(body, token string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/alerts", strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp, out
	}
	// One call in flight (its admission blocked): the next is shed.
	first := make(chan *http.Response)
	go func() { r, _ := post(alert, "tok"); first <- r }()
	for h.inFlight.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	resp, out := post(alert, "tok")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over the limit: %d %v", resp.StatusCode, out)
	}
	close(ad.block)
	if r := <-first; r.StatusCode != http.StatusAccepted {
		t.Errorf("first: %d", r.StatusCode)
	}
	resp, out = post(alert, "tok")
	if resp.StatusCode != http.StatusAccepted || out["alert_id"] == "" || out["identity"] != "generic:id:a-1" {
		t.Errorf("202: %d %v", resp.StatusCode, out)
	}
	for _, tc := range []struct {
		body, token string
		status      int
	}{
		{alert, "", http.StatusUnauthorized},
		{alert, "tok2", http.StatusUnauthorized},
		{`{"id": `, "tok", http.StatusBadRequest},
		{`{"x":"` + strings.Repeat("a", alerts.MaxBytes) + `"}`, "tok", http.StatusBadRequest},
		{string(bytes.Repeat([]byte("a"), intake.MaxBodyBytes+1)), "tok", http.StatusBadRequest},
	} {
		if resp, out := post(tc.body, tc.token); resp.StatusCode != tc.status || out["error"] == "" {
			t.Errorf("%.20q with %q: %d %v, want %d", tc.body, tc.token, resp.StatusCode, out, tc.status)
		}
	}
	if r, err := http.Get(srv.URL + "/v1/alerts"); err != nil || r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v", r, err)
	}
}

// TestPipelineCarriesTheAlertsTrace: with tracing on, each alert is a span
// of its own, whose traceparent goes with the admitted alert (so the
// investigation started for it joins that trace); a malformed alert's span
// ends as failed.
func TestPipelineCarriesTheAlertsTrace(t *testing.T) {
	ad := &admitter{kind: intake.OutcomeStarted}
	p := pipeline(t, &memStore{}, ad)
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	var names []string
	var failed []bool
	p.Traceparent = telemetry.Traceparent
	p.Span = func(ctx context.Context, name string) (context.Context, func(bool)) {
		names = append(names, name)
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled})
		return trace.ContextWithSpanContext(ctx, sc), func(f bool) { failed = append(failed, f) }
	}
	if res := p.Take(context.Background(), []byte(alert)); res.Outcome.Kind != intake.OutcomeStarted {
		t.Fatalf("%+v", res)
	}
	if got, want := ad.batches[0][0].Traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; got != want {
		t.Errorf("admitted with traceparent %q, want %q", got, want)
	}
	p.Take(context.Background(), []byte(`{"id": `))
	if !slices.Equal(names, []string{"intake alert", "intake alert"}) || !slices.Equal(failed, []bool{false, true}) {
		t.Errorf("spans %v, failed %v", names, failed)
	}
	// Without tracing, no traceparent.
	p.Span, p.Traceparent = nil, nil
	p.Take(context.Background(), []byte(alert))
	if tp := ad.batches[len(ad.batches)-1][0].Traceparent; tp != "" {
		t.Errorf("traceparent %q without tracing", tp)
	}
}

// pubsubLimits refuses, as Pub/Sub does, a message over its limits: 100
// attributes, keys of 256 bytes not starting with "goog", values of 1,024
// bytes, 10 MB in all.
func pubsubLimits(got *[]*pubsub.Message) func(context.Context, string, *pubsub.Message) (string, error) {
	return func(_ context.Context, _ string, m *pubsub.Message) (string, error) {
		size := len(m.Data)
		for k, v := range m.Attributes {
			if len(k) > 256 || len(v) > 1024 || strings.HasPrefix(k, "goog") {
				return "", fmt.Errorf("attribute %.20q: %d bytes of key, %d of value", k, len(k), len(v))
			}
			size += len(k) + len(v)
		}
		if len(m.Attributes) > 100 || size > 1e7 {
			return "", fmt.Errorf("%d attributes, %d bytes", len(m.Attributes), size)
		}
		*got = append(*got, m)
		return "1", nil
	}
}

// TestDeadLetterCopyWithinPubSubLimits: the dead-letter copy added its
// attributes to the original's, so a malformed message that came with 100
// attributes (or a 10 MB body) could not be dead-lettered and came back
// for ever. The copy keeps within Pub/Sub's limits, with the reason and
// where it came from, and the original attributes folded into one.
func TestDeadLetterCopyWithinPubSubLimits(t *testing.T) {
	var got []*pubsub.Message
	s := &PubSub{Subscription: "projects/p/subscriptions/alerts-intake", DeadLetterTopic: "projects/p/topics/dl", publish: pubsubLimits(&got)}
	attempt := 7
	full := map[string]string{}
	for i := range 100 {
		full[fmt.Sprintf("k%03d", i)] = strings.Repeat("v", 1024)
	}
	hostile := map[string]string{"goog-x": "1", strings.Repeat("k", 256): strings.Repeat("é", 512), "quote": strings.Repeat(`"`, 1000)}
	for name, m := range map[string]*pubsub.Message{
		"100 attributes": {ID: "m-1", Data: []byte(`{"id": `), Attributes: full, DeliveryAttempt: &attempt, PublishTime: time.Unix(1, 0)},
		"hostile keys":   {ID: "m-2", Data: []byte(`{"id": `), Attributes: hostile},
		"10 MB of data":  {ID: "m-3", Data: bytes.Repeat([]byte("a"), 1e7-10), Attributes: map[string]string{"a": "b"}},
	} {
		n := len(got)
		if err := s.deadLetter(context.Background(), m, "the alert is not valid JSON"); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(got) != n+1 {
			continue
		}
		a := got[n].Attributes
		if a["reason"] != "the alert is not valid JSON" || a["message_id"] != m.ID || a["subscription"] != s.Subscription {
			t.Errorf("%s: attributes %v", name, a)
		}
		var folded map[string]string
		if err := json.Unmarshal([]byte(a["attributes"]), &folded); err != nil || len(folded) == 0 {
			t.Errorf("%s: folded attributes %q: %v", name, a["attributes"], err)
		}
		if left, _ := strconv.Atoi(a["attributes_left_out"]); len(folded)+left != len(m.Attributes) {
			t.Errorf("%s: %d attributes folded, %d left out, of %d", name, len(folded), left, len(m.Attributes))
		}
		if len(got[n].Data) < len(m.Data) && a["data_bytes"] != strconv.Itoa(len(m.Data)) {
			t.Errorf("%s: data cut to %d bytes, data_bytes %q", name, len(got[n].Data), a["data_bytes"])
		}
	}
}

// TestMalformedMessageWaitsBeforeItComesBack: without a dead-letter topic a
// malformed message is nacked and redelivered at once; it waits the
// back-off first, as every other failure does, so it is no tight loop.
func TestMalformedMessageWaitsBeforeItComesBack(t *testing.T) {
	s := &PubSub{Subscription: "projects/p/subscriptions/alerts-intake", Pipeline: pipeline(t, &memStore{}, &admitter{kind: intake.OutcomeStarted}),
		Backoff: 200 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for i := range 2 {
		start := time.Now()
		s.handle(context.Background(), &pubsub.Message{ID: strconv.Itoa(i), Data: []byte("not an alert")})
		if took := time.Since(start); took < s.Backoff {
			t.Errorf("nack %d after %s, want at least %s", i+1, took, s.Backoff)
		}
	}
	// Malformed messages say nothing about the services: the failure
	// streak, whose pause grows to a minute, is not lengthened by them.
	if next := s.failing.next(s.Backoff); next != s.Backoff {
		t.Errorf("after two malformed messages a failure waits %s, want %s", next, s.Backoff)
	}
}

// An alert Firestore refuses as invalid, or whose ID another alert's
// content holds, is the message's fault: dead letter (400), not a retry
// (nack forever, 503), and nothing is admitted.
func TestPipelineDeadLettersWhatTheStoreRefuses(t *testing.T) {
	for _, refusal := range []error{
		fmt.Errorf("Firestore refused to store alert generic-1: maximum entity size is 1048576 bytes: %w", alerts.ErrUnstorable),
		fmt.Errorf("%w: generic-1, so this alert was not stored", alerts.ErrIDTaken),
	} {
		store := &memStore{fail: refusal}
		ad := &admitter{kind: intake.OutcomeStarted}
		p := pipeline(t, store, ad)
		res := p.Take(context.Background(), []byte(alert))
		if res.Invalid == nil || res.Retry != nil || !errors.Is(res.Invalid, refusal) {
			t.Errorf("%v: %+v", refusal, res)
		}
		if len(ad.batches) != 0 {
			t.Errorf("%v: admitted %+v", refusal, ad.batches)
		}
	}
}

// heldStore holds each Create until release is closed, saying on entered
// that it holds one: the alerts it holds are in flight, with no timing.
type heldStore struct {
	memStore
	entered chan struct{}
	release chan struct{}
}

func (s *heldStore) Create(ctx context.Context, a alerts.Alert) (bool, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.memStore.Create(ctx, a)
}

// heavyAlert is a distinct alert of n tiny objects: a few KiB that decode
// to far more (the weight the budget counts).
func heavyAlert(t *testing.T, id string, n int) (string, int) {
	body := `{"id":"` + id + `","title":"heavy","x":[` + strings.Repeat(`{"a":[]},`, n-1) + `{"a":[]}]}`
	weight := 0
	if _, err := alerts.ParseWeighed([]byte(body), func(w int) error { weight = w; return nil }); err != nil {
		t.Fatal(err)
	}
	return body, weight
}

// TestWebhookBoundsDecodedBytesInFlight: heavy alerts held in flight take
// the decoded-bytes budget, and the next is shed with 429 and Retry-After
// (within the count limit); one at a time, all are taken, and one heavier
// than the whole budget is taken alone.
func TestWebhookBoundsDecodedBytesInFlight(t *testing.T) {
	store := &heldStore{entered: make(chan struct{}), release: make(chan struct{})}
	const n = 4
	bodies := make([]string, n)
	weight := 0
	for i := range bodies {
		bodies[i], weight = heavyAlert(t, "heavy-"+strconv.Itoa(i), 2000)
	}
	huge, hugeWeight := heavyAlert(t, "huge", 20000)
	h := &HTTP{Token: "tok", Pipeline: pipeline(t, store, &admitter{kind: intake.OutcomeStarted}), MaxInFlight: 100,
		MaxDecodedInFlight: int64(weight * 5 / 2), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if int64(hugeWeight) <= h.MaxDecodedInFlight {
		t.Fatalf("the huge alert (%d bytes decoded) is within the budget (%d)", hugeWeight, h.MaxDecodedInFlight)
	}
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	post := func(body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/alerts", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return &http.Response{}
		}
		resp.Body.Close()
		return resp
	}
	// Two fit in the budget of two and a half: both are held in the store.
	held := make(chan int, n)
	for _, body := range bodies[:2] {
		go func() { held <- post(body).StatusCode }()
		<-store.entered
	}
	nHeld := 2
	for _, body := range bodies[2:] {
		shed := make(chan *http.Response, 1)
		go func() { shed <- post(body) }()
		select {
		case resp := <-shed:
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Errorf("over the budget: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		case <-store.entered:
			t.Errorf("an alert over the decoded-bytes budget (%d held of %d bytes each, budget %d) was decoded and stored", nHeld, weight, h.MaxDecodedInFlight)
			nHeld++
			go func() { held <- (<-shed).StatusCode }()
		}
	}
	close(store.release)
	for range nHeld {
		if code := <-held; code != http.StatusAccepted {
			t.Errorf("held alert: %d, want 202", code)
		}
	}
	go func() {
		for range store.entered {
		}
	}()
	defer close(store.entered)
	for i, body := range append(bodies, huge) {
		if code := post(body).StatusCode; code != http.StatusAccepted {
			t.Errorf("alert %d sent alone: %d, want 202", i, code)
		}
	}
}

// TestBudgetWaitIsBounded: a message waiting for room gives up after its
// wait (and is nacked), the room comes back once on any number of
// releases, and an alert heavier than the whole budget takes all of it.
func TestBudgetWaitIsBounded(t *testing.T) {
	b := newBudget(100)
	release, err := b.acquire(context.Background(), 1000, 0)
	if err != nil {
		t.Fatalf("heavier than the budget, alone: %v", err)
	}
	if _, err := b.acquire(context.Background(), 1, time.Millisecond); !errors.Is(err, errOverBudget) {
		t.Errorf("budget full, bounded wait: %v, want errOverBudget", err)
	}
	release()
	release()
	r1, err1 := b.acquire(context.Background(), 60, 0)
	_, err2 := b.acquire(context.Background(), 60, 0)
	if err1 != nil || !errors.Is(err2, errOverBudget) {
		t.Errorf("after a double release: %v, %v; want the room given back once", err1, err2)
	}
	r1()
}
