package agentclient

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
)

// fakeRun is one run of a fake workflow: the events it holds (numbered on
// from where the run before stopped), its status and the run it continued as.
type fakeRun struct {
	id       string
	events   []investigation.Event
	status   enums.WorkflowExecutionStatus
	next     string
	queryErr error
	history  int64  // the run's history length, as Describe reports it
	session  string // the session its memo names
}

// fakeStream is a scripted Temporal: workflows are chains of runs, the last
// one the latest; a progress query answers at most
// investigation.MaxProgressEvents events, as the workflow does. onDescribe(n) changes the world before the n-th describe
// of the main workflow (1-based), i.e. once per follower tick.
type fakeStream struct {
	mu         sync.Mutex
	main       string
	wfs        map[string][]*fakeRun
	describes  int
	onDescribe func(n int)
	downFrom   int      // describes of the main workflow from this one on fail (Temporal is down)
	queries    []string // "workflow/run>after" of every progress query
	result     investigation.Result
	resultErr  error
	st         investigation.Status
	stErr      error
	stDelay    time.Duration // how long a status query takes
	taskFailed string        // the last workflow task failure's message
}

func newFakeStream(main string, runs ...*fakeRun) *fakeStream {
	return &fakeStream{main: main, wfs: map[string][]*fakeRun{main: runs}}
}

func (f *fakeStream) run(wf, runID string) (*fakeRun, error) {
	runs := f.wfs[wf]
	if len(runs) == 0 {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + wf)
	}
	if runID == "" {
		return runs[len(runs)-1], nil
	}
	for _, r := range runs {
		if r.id == runID {
			return r, nil
		}
	}
	return nil, serviceerror.NewNotFound("workflow run not found: " + runID)
}

func (f *fakeStream) describe(_ context.Context, wf, runID string) (execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if wf == f.main && runID == "" {
		f.describes++
		if f.onDescribe != nil {
			f.onDescribe(f.describes)
		}
		if f.downFrom > 0 && f.describes >= f.downFrom {
			return execution{}, serviceerror.NewUnavailable("connection refused")
		}
	}
	r, err := f.run(wf, runID)
	if err != nil {
		return execution{}, err
	}
	return execution{runID: r.id, firstRunID: f.wfs[wf][0].id, status: r.status, historyLength: r.history, memoSession: r.session}, nil
}

func (f *fakeStream) events(_ context.Context, wf, runID string, after int) ([]investigation.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, fmt.Sprintf("%s/%s>%d", wf, runID, after))
	r, err := f.run(wf, runID)
	if err != nil {
		return nil, err
	}
	if r.queryErr != nil {
		return nil, r.queryErr
	}
	var out []investigation.Event
	for _, e := range r.events {
		if e.Seq > after && len(out) < investigation.MaxProgressEvents {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *fakeStream) nextRun(_ context.Context, wf, runID string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := f.run(wf, runID)
	if err != nil {
		return "", err
	}
	if r.next == "" {
		return "", fmt.Errorf("run %s did not continue as new", runID)
	}
	return r.next, nil
}

func (f *fakeStream) outcome(context.Context, string, string) (investigation.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.result, f.resultErr
}

func (f *fakeStream) taskFailure(context.Context, string, string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.taskFailed, nil
}

func (f *fakeStream) status(context.Context, string) (investigation.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	time.Sleep(f.stDelay)
	return f.st, f.stErr
}

// add appends a run to a workflow (under the caller's lock in onDescribe).
func (f *fakeStream) add(wf string, r *fakeRun) { f.wfs[wf] = append(f.wfs[wf], r) }

// notes returns note events numbered from..to; each prints "  note: e<seq>".
func notes(from, to int) []investigation.Event { return notesNamed("e", from, to) }

// notesNamed returns note events numbered from..to, each with the text
// name<seq>.
func notesNamed(name string, from, to int) []investigation.Event {
	var out []investigation.Event
	for i := from; i <= to; i++ {
		out = append(out, investigation.Event{Seq: i, Kind: investigation.EventNote, Text: fmt.Sprintf("%s%d", name, i)})
	}
	return out
}

const (
	running   = enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	completed = enums.WORKFLOW_EXECUTION_STATUS_COMPLETED
	failed    = enums.WORKFLOW_EXECUTION_STATUS_FAILED
	canStatus = enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
)

// fastPolling makes followers poll every millisecond during a test.
func fastPolling(t *testing.T) {
	old := pollInterval
	pollInterval = time.Millisecond
	t.Cleanup(func() { pollInterval = old })
}

// testClient is a client of src whose settings are the defaults.
func testClient(src stream) *Client {
	return &Client{src: src, timeout: DefaultCallTimeout, cfg: config.Temporal{
		TaskQueue: investigation.DefaultQueue, Namespace: "default", UIURL: "http://localhost:8233"}}
}

// watch is Watch with the text renderer on out, as starter watch runs it.
func (c *Client) watch(ctx context.Context, out io.Writer, id string, from int) error {
	return c.Watch(ctx, NewTextRenderer(out, id, pricing.Default()), id, from)
}

// followText is followTurn with the text renderer on out, as starter
// investigate and ask run it.
func (c *Client) followText(ctx context.Context, out io.Writer, id string, after int, until func(investigation.Event) bool) error {
	return c.followTurn(ctx, NewTextRenderer(out, id, pricing.Default()), id, after, until)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// spend is what an investigation of toolCalls calls used, the phases'
// usage given in order (plan, steps, ...).
func spend(toolCalls int, phases ...investigation.Usage) investigation.Spend {
	var p investigation.UsageByPhase
	for i, u := range phases {
		*[]*investigation.Usage{&p.Plan, &p.Steps, &p.Reflection, &p.Conclusion, &p.SubAgent}[i] = u
	}
	return investigation.Spend{Usage: p.Total(), ByPhase: p, ToolCalls: toolCalls}
}
