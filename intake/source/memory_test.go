package source

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/pubsub/v2"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/intake"
)

// liveHeap is the heap still in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// heapStore records the live heap while each alert is being written, the
// moment the intake holds its decoded data.
type heapStore struct {
	mu     sync.Mutex
	base   uint64
	stored []string
	peak   uint64
}

func (s *heapStore) Create(_ context.Context, a alerts.Alert) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if live := liveHeap(); live > s.base && live-s.base > s.peak {
		s.peak = live - s.base
	}
	s.stored = append(s.stored, a.ID)
	return true, nil
}

// fill repeats item, comma-separated, between prefix and suffix, up to
// size bytes.
func fill(prefix, item, suffix string, size int) []byte {
	n := (size - len(prefix) - len(suffix)) / (len(item) + 1)
	return []byte(prefix + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + suffix)
}

// A 1 MiB alert of nothing but tiny objects, where Firestore indexes none
// of them (inside an array of objects), passed every check and held 21 to
// 41 MiB of decoded data through its Firestore write, with up to
// --max-outstanding others. It is refused before it is decoded, the same
// way on the webhook (400) and on Pub/Sub (dead-lettered), and nothing is
// stored; what is admitted holds at most about the 8 MiB an alert may
// take.
func TestFinelyDividedAlertIsRefused(t *testing.T) {
	const reason = "the alert is too finely divided to take"
	attacks := map[string][]byte{
		"empty objects":          fill(`{"a":[{"b":[`, `{}`, `]}]}`, alerts.MaxBytes),
		"one-key objects":        fill(`{"a":[{"b":[`, `{"k":null}`, `]}]}`, alerts.MaxBytes),
		"objects of arrays":      fill(`{"a":[{"b":[`, `{"c":[{}]}`, `]}]}`, alerts.MaxBytes),
		"empty strings":          fill(`{"a":[{"b":[`, `""`, `]}]}`, alerts.MaxBytes),
		"in a Pub/Sub push body": pushBody(fill(`{"a":[{"b":[`, `{}`, `]}]}`, alerts.MaxBytes)),
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for name, body := range attacks {
		t.Run(name, func(t *testing.T) {
			store := &heapStore{}
			ad := &admitter{kind: intake.OutcomeStarted}
			p := pipeline(t, store, ad)

			h := &HTTP{Token: "tok", Pipeline: p, MaxInFlight: 1, Log: log}
			srv := httptest.NewServer(h.Handler())
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/alerts", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer tok")
			store.base = liveHeap()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var out Refused
			_ = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(out.Error, reason) {
				t.Errorf("webhook: %d %q, want 400 %q (%d MiB live at the store write)", resp.StatusCode, out.Error, reason, store.peak>>20)
			}

			var dead []*pubsub.Message
			s := &PubSub{Subscription: "projects/p/subscriptions/alerts-intake", DeadLetterTopic: "projects/p/topics/dl", Pipeline: p, Log: log, publish: pubsubLimits(&dead)}
			s.handle(context.Background(), &pubsub.Message{ID: "1", Data: body})
			if len(dead) != 1 || !strings.Contains(dead[0].Attributes["reason"], reason) {
				t.Errorf("Pub/Sub: dead-lettered %d, want 1 with %q", len(dead), reason)
			}
			if len(store.stored) != 0 || len(ad.batches) != 0 {
				t.Errorf("stored %v, admitted %v", store.stored, ad.batches)
			}
		})
	}

	// Just under the bound, the live heap at the write (decoded data, the
	// body and the alert's own bytes) stays near it, and nothing of the
	// data is held while the admission workflow decides.
	store := &heapStore{}
	var atAdmit uint64
	ad := &admitter{kind: intake.OutcomeStarted}
	p := pipeline(t, store, ad)
	p.Batcher.Admit = func(ctx context.Context, req intake.AdmitRequest) (intake.AdmitResult, error) {
		if live := liveHeap(); live > store.base {
			atAdmit = live - store.base
		}
		return ad.admit(ctx, req)
	}
	body := fill(`{"a":[{"b":[`, `{"k":null}`, `]}]}`, 240<<10)
	store.base = liveHeap()
	if res := p.Take(context.Background(), body); res.Invalid != nil || res.Outcome.Kind != intake.OutcomeStarted {
		t.Fatalf("an alert under the bound: %+v", res.Invalid)
	}
	t.Logf("%d KiB alert: %.1f MiB live at the store write, %.1f MiB at admission", len(body)>>10, float64(store.peak)/(1<<20), float64(atAdmit)/(1<<20))
	if store.peak > 10<<20 {
		t.Errorf("%.1f MiB live at the store write, over 10 MiB", float64(store.peak)/(1<<20))
	}
	if atAdmit > 2<<20 {
		t.Errorf("%.1f MiB live while the admission decides: the decoded data is still held", float64(atAdmit)/(1<<20))
	}
}

func pushBody(data []byte) []byte {
	b, _ := json.Marshal(map[string]any{"message": map[string]any{"data": data, "messageId": "1"}, "subscription": "projects/p/subscriptions/push"})
	return b
}

// Real alerts, of every source the examples hold, are all admitted.
func TestExampleAlertsAreAdmitted(t *testing.T) {
	var files []string
	for _, dir := range []string{"../../examples/alerts", "../../examples/evals/alerts"} {
		m, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found %d example alerts", len(files))
	}
	ad := &admitter{kind: intake.OutcomeStarted}
	p := pipeline(t, &memStore{}, ad)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if res := p.Take(context.Background(), raw); res.Invalid != nil || res.Retry != nil {
			t.Errorf("%s: %v %v", f, res.Invalid, res.Retry)
		}
	}
}

// A token holder learns nothing from a 202 of what the intake already
// knows: a new alert, a retry of it, a repeat of a closed investigation and
// an alert joined to another identity's investigation (whose workflow ID
// names that identity) all get the same answer, naming only what the
// alert itself determines.
func TestWebhookAnswerIsTheSameWhateverTheOutcome(t *testing.T) {
	var bodies []string
	for _, kind := range []string{intake.OutcomeStarted, intake.OutcomeSeenAgain, intake.OutcomeRepeat, intake.OutcomeGrouped, intake.OutcomeFollowUp} {
		ad := &admitter{kind: kind}
		p := pipeline(t, &memStore{}, ad)
		p.Batcher.Admit = func(ctx context.Context, req intake.AdmitRequest) (intake.AdmitResult, error) {
			res, err := ad.admit(ctx, req)
			for i := range res.Outcomes {
				if kind == intake.OutcomeGrouped || kind == intake.OutcomeFollowUp {
					res.Outcomes[i].WorkflowID = intake.WorkflowID("guardduty:123456789012:secret-finding")
				}
				res.Outcomes[i].Message = "joined the investigation of guardduty:123456789012:secret-finding"
			}
			return res, err
		}
		h := &HTTP{Token: "tok", Pipeline: p, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		srv := httptest.NewServer(h.Handler())
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/alerts", strings.NewReader(alert))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: %d %s", kind, resp.StatusCode, body)
		}
		bodies = append(bodies, string(body))
	}
	for i, b := range bodies {
		if b != bodies[0] {
			t.Errorf("answer %d differs from the first:\n%s\n%s", i, b, bodies[0])
		}
		if strings.Contains(b, "secret-finding") || strings.Contains(b, "outcome") || strings.Contains(b, "workflow_id") {
			t.Errorf("the answer tells of what the intake knows: %s", b)
		}
	}
}
