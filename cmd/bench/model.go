package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
)

var (
	// keyPattern finds the run key that the question and the objective carry.
	keyPattern = regexp.MustCompile(`\[bench:([A-Za-z0-9_-]+)\]`)
)

// callHeader numbers a request within its run, from the recording wrapper
// to the scripted handler.
const callHeader = "X-Bench-Call"

// modelCall is one model request as the server saw it.
type modelCall struct {
	phase string
	span  interval // request received → reply written
	bytes int      // request body
	// carried is the bytes of the step's earlier turns and tool results the
	// request re-sent; whole is the bytes of every turn and tool result of
	// the investigation before it (what a naive agent would re-send).
	carried, whole int
}

// runTrace is everything the model server saw of one investigation.
type runTrace struct {
	sc      *scenario
	latency time.Duration

	mu         sync.Mutex
	calls      []modelCall
	transcript int
	seen       map[string]bool // function-response contents counted in transcript
}

func (t *runTrace) begin(at time.Time, size int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, modelCall{span: interval{start: at}, bytes: size})
	return len(t.calls) - 1
}

func (t *runTrace) finish(i int, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls[i].span.end = at
}

// snapshot returns a copy of the calls recorded so far.
func (t *runTrace) snapshot() []modelCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]modelCall(nil), t.calls...)
}

// modelServer speaks the Gemini REST protocol (through geminitest), answers
// each run from its scenario after the run's latency, and records when each
// request arrived and was answered.
type modelServer struct {
	URL  string
	srv  *httptest.Server
	mu   sync.Mutex
	runs map[string]*runTrace
}

func newModelServer() *modelServer {
	m := &modelServer{runs: map[string]*runTrace{}}
	inner := geminitest.NewHTTPHandler(m.answer)
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		start := time.Now()
		body, err := io.ReadAll(io.LimitReader(hr.Body, 64<<20))
		if err != nil {
			http.Error(w, "bench: cannot read the request", http.StatusBadRequest)
			return
		}
		tr := m.trace(body)
		idx := -1
		if tr != nil {
			idx = tr.begin(start, len(body))
			hr.Header.Set(callHeader, strconv.Itoa(idx))
		}
		hr.Body = io.NopCloser(bytes.NewReader(body))
		inner.ServeHTTP(w, hr)
		if tr != nil {
			tr.finish(idx, time.Now())
		}
	}))
	m.URL = m.srv.URL
	return m
}

func (m *modelServer) Close() { m.srv.Close() }

// register makes the server answer the run key with sc after latency.
func (m *modelServer) register(key string, sc *scenario, latency time.Duration) *runTrace {
	t := &runTrace{sc: sc, latency: latency, seen: map[string]bool{}}
	m.mu.Lock()
	m.runs[key] = t
	m.mu.Unlock()
	return t
}

func (m *modelServer) trace(body []byte) *runTrace {
	k := keyPattern.FindSubmatch(body)
	if k == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs[string(k[1])]
}

// answer routes by phase: the response schema's title names the structured
// phases; a request without one is a step's model turn.
func (m *modelServer) answer(r *geminitest.Request) geminitest.Reply {
	tr := m.trace(r.Body)
	idx, err := strconv.Atoi(r.Header.Get(callHeader))
	if tr == nil || err != nil {
		return geminitest.Error(http.StatusBadRequest, "bench: the request names no benchmark run", "")
	}
	key := string(keyPattern.FindSubmatch(r.Body)[1])
	var reply geminitest.Reply
	phase := r.SchemaTitle()
	carried, whole := 0, 0
	switch phase {
	case "plan":
		reply = geminitest.JSON(tr.sc.plan(key))
	case "reflect":
		reply = geminitest.JSON(map[string]any{"insights": []string{}, "plan_updates": []any{}, "achieved": false})
	case "conclude":
		reply = geminitest.Conclusion("## Summary\nBenchmark run "+key+": nothing conclusive.", "undetermined", "low")
	case "":
		phase = "turn"
		reply, carried, whole = tr.turn(r)
	default:
		reply = geminitest.Error(http.StatusBadRequest, fmt.Sprintf("bench: unexpected phase %q", phase), "")
	}
	tr.mu.Lock()
	tr.calls[idx].phase, tr.calls[idx].carried = phase, carried
	if phase == "turn" {
		tr.calls[idx].whole = whole
	} else {
		tr.calls[idx].whole = tr.transcript
	}
	tr.mu.Unlock()
	time.Sleep(tr.latency)
	return reply
}

// turn answers a step's model turn: the scripted calls of this turn, or a
// text answer after the last one. It also keeps the transcript's size.
func (t *runTrace) turn(r *geminitest.Request) (geminitest.Reply, int, int) {
	step := 0
	if len(r.Contents) > 0 {
		step = t.sc.stepOf(text(r.Contents[0]))
	}
	turns, carried := 0, 0
	t.mu.Lock()
	for i, c := range r.Contents[1:] {
		size := jsonSize(c)
		carried += size
		if c.Role == genai.RoleModel {
			turns++
		} else if k := fmt.Sprintf("%d/%d", step, i); !t.seen[k] {
			t.seen[k] = true
			t.transcript += size
		}
	}
	whole := t.transcript
	content := &genai.Content{Role: genai.RoleModel}
	calls := t.sc.calls(step, turns)
	for _, c := range calls {
		content.Parts = append(content.Parts, &genai.Part{FunctionCall: c})
	}
	if len(calls) == 0 {
		content.Parts = []*genai.Part{{Text: fmt.Sprintf("step_%d: the providers know %s; nothing else was established.", step, benchIP)}}
	}
	t.transcript += jsonSize(content)
	t.mu.Unlock()
	if len(calls) > 0 {
		return geminitest.Calls(calls...), carried, whole
	}
	return geminitest.Text(content.Parts[0].Text), carried, whole
}

func text(c *genai.Content) string {
	var b strings.Builder
	for _, p := range c.Parts {
		if p != nil {
			b.WriteString(p.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}
