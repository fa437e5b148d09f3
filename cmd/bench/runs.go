package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/investigation"
)

// run is one investigation the bench started.
type run struct {
	key   string
	sc    *scenario
	trace *runTrace
	id    string
	start time.Time // just before the start request
	wr    client.WorkflowRun

	err    error // why the run did not conclude, or could not be read
	result investigation.Result
	hist   histInfo
	// wall is start → the conclusion activity completed (history time; the
	// server and the bench share this machine's clock).
	wall time.Duration
}

// ok says the run concluded with a verdict and its history was read.
func (r *run) ok() bool { return r.err == nil && r.wall > 0 }

// begin starts an investigation of the bench alert scripted by sc. The
// question and the objective carry the run key, so the model server routes
// every phase to the run. A one-millisecond idle timeout ends the workflow
// right after its conclusion, with the same events as the idle end of a
// real investigation.
func (b *bench) begin(ctx context.Context, key string, sc *scenario, latency time.Duration) *run {
	r := &run{key: key, sc: sc, id: "bench-" + key, trace: b.s.model.register(key, sc, latency)}
	r.start = time.Now()
	r.wr, r.err = b.s.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:            r.id,
		TaskQueue:     taskQueue,
		StaticSummary: "bench " + key,
	}, investigation.WorkflowName, investigation.Input{
		AlertID:          b.s.alertID,
		Question:         fmt.Sprintf("Is %s malicious? [bench:%s]", benchIP, key),
		Language:         "en",
		IdleTimeout:      investigation.Duration(time.Millisecond),
		SearchAttributes: []string{investigation.VerdictAttribute},
	})
	if r.err != nil {
		r.err = fmt.Errorf("start %s: %w", r.id, r.err)
	}
	return r
}

// finish waits for the run's result and reads its history.
func (b *bench) finish(ctx context.Context, r *run) {
	if r.err != nil {
		return
	}
	if err := r.wr.Get(ctx, &r.result); err != nil {
		r.err = fmt.Errorf("%s did not complete: %w", r.id, err)
		return
	}
	if r.result.Verdict == nil {
		r.err = fmt.Errorf("%s completed without a verdict", r.id)
		return
	}
	h, err := fetchHistory(ctx, b.s.tc, r.id)
	if err != nil {
		r.err = err
		return
	}
	r.hist = analyze(h)
	end, ok := r.hist.concluded()
	if !ok {
		r.err = fmt.Errorf("%s has no completed conclusion in its history", r.id)
		return
	}
	r.wall = end.Sub(r.start)
}

// lone runs one investigation by itself and checks, through the progress
// query the starter follows, that it ran as scripted.
func (b *bench) lone(ctx context.Context, key string, sc *scenario, latency time.Duration) *run {
	r := b.begin(ctx, key, sc, latency)
	b.finish(ctx, r)
	if r.err == nil {
		r.err = b.checkProgress(ctx, r)
	}
	return r
}

func (b *bench) checkProgress(ctx context.Context, r *run) error {
	calls, concluded, after := 0, false, 0
	for {
		v, err := b.s.tc.QueryWorkflow(ctx, r.id, "", investigation.ProgressQuery, after)
		if err != nil {
			return fmt.Errorf("query the progress of %s: %w", r.id, err)
		}
		var page []investigation.Event
		if err := v.Get(&page); err != nil {
			return fmt.Errorf("decode the progress of %s: %w", r.id, err)
		}
		for _, e := range page {
			calls += btoi(e.Kind == investigation.EventToolCall)
			concluded = concluded || e.Kind == investigation.EventConclusion
			after = e.Seq
		}
		if len(page) < investigation.MaxProgressEvents {
			break
		}
	}
	if !concluded || calls != r.sc.toolCalls() {
		return fmt.Errorf("%s did not run as scripted: %d tool calls (want %d), concluded %t", r.id, calls, r.sc.toolCalls(), concluded)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// batch is n investigations started at once.
type batch struct {
	n       int
	runs    []*run
	elapsed time.Duration
	cpu     float64 // worker CPU-seconds from the first start to the last result
	cpuErr  error
	// servers is the CPU time the Temporal dev server ("temporal") and the
	// Firestore emulator ("java") spent over the batch.
	servers  map[string]float64
	peakKiB  int64 // VmHWM summed over the workers
	idleKiB  int64 // VmRSS summed over the workers before the batch
	rssErr   error
	timedOut bool
}

// concurrent starts n standard investigations at once and waits for all of
// them, at most timeout.
func (b *bench) concurrent(ctx context.Context, n int, latency, timeout time.Duration) *batch {
	bt := &batch{n: n, runs: make([]*run, n)}
	bt.idleKiB, bt.rssErr = b.sumKiB("VmRSS")
	for _, w := range b.s.workers {
		if err := resetPeakRSS(w.pid()); err != nil && bt.rssErr == nil {
			bt.rssErr = fmt.Errorf("cannot reset the peak RSS: %w", err)
		}
	}
	cpu0, err0 := b.cpu()
	srv0 := b.serverCPU()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bt.runs[i] = b.begin(ctx, fmt.Sprintf("n%d-%d", n, i), standard(b.s.alertID), latency)
			if bt.runs[i].err == nil {
				if err := bt.runs[i].wr.Get(ctx, &bt.runs[i].result); err != nil {
					bt.runs[i].err = fmt.Errorf("%s did not complete: %w", bt.runs[i].id, err)
				}
			}
		}()
	}
	wg.Wait()
	bt.elapsed = time.Since(start)
	bt.timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	cpu1, err1 := b.cpu()
	bt.cpu, bt.cpuErr = cpu1-cpu0, errors.Join(err0, err1)
	bt.servers = b.serverCPU()
	for k, v := range srv0 {
		bt.servers[k] -= v
	}
	if bt.rssErr == nil {
		bt.peakKiB, bt.rssErr = b.sumKiB("VmHWM")
	}
	// Histories are read after the batch, outside the measured window.
	b.readHistories(context.WithoutCancel(ctx), bt.runs)
	return bt
}

// readHistories finishes runs that completed: history, conclusion time.
func (b *bench) readHistories(ctx context.Context, runs []*run) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, r := range runs {
		if r.err != nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			b.finish(ctx, r)
		}()
	}
	wg.Wait()
}

func (b *bench) cpu() (float64, error) {
	total := 0.0
	for _, w := range b.s.workers {
		s, err := cpuSeconds(w.pid())
		if err != nil {
			return 0, err
		}
		total += s
	}
	return total, nil
}

func (b *bench) sumKiB(field string) (int64, error) {
	var total int64
	for _, w := range b.s.workers {
		v, err := statusKiB(w.pid(), field)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

func (b *bench) workerPIDs() []int {
	pids := make([]int, len(b.s.workers))
	for i, w := range b.s.workers {
		pids[i] = w.pid()
	}
	return pids
}

// starterRun is one `starter investigate` as an analyst runs it: the
// process's wall time, from its start to its exit after the conclusion.
type starterRun struct {
	key   string
	trace *runTrace
	start time.Time
	wall  time.Duration
	err   error
	// timeline is its run's history events (-trace only).
	timeline []timedEvent
}

// startedID finds the workflow ID in what `starter investigate` printed.
var startedID = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.-])(investigation-[A-Za-z0-9_.-]*[A-Za-z0-9])`)

// workflowID returns the workflow ID the starter printed, or "".
func workflowID(out []byte) string {
	if m := startedID.FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

// viaStarter runs `starter investigate` on the bench alert, scripted as
// the standard investigation, and times the process.
func (b *bench) viaStarter(ctx context.Context, key string, latency time.Duration) *starterRun {
	r := &starterRun{key: key, trace: b.s.model.register(key, standard(b.s.alertID), latency)}
	cmd := exec.CommandContext(ctx, filepath.Join(b.s.dir, "starter"), "investigate", "--alert-id", b.s.alertID,
		"--question", fmt.Sprintf("Is %s malicious? [bench:%s]", benchIP, key), "--idle-timeout", "1s")
	cmd.Env = b.s.starterEnv
	r.start = time.Now()
	out, err := cmd.CombinedOutput()
	r.wall = time.Since(r.start)
	switch {
	case err != nil:
		r.err = fmt.Errorf("starter investigate (%s): %v: %s", key, err, lastLine(strings.TrimSpace(string(out))))
	case !strings.Contains(string(out), "VERDICT"):
		r.err = fmt.Errorf("starter investigate (%s) printed no verdict", key)
	case b.o.trace:
		if id := workflowID(out); id != "" {
			if h, err := fetchHistory(ctx, b.s.tc, id); err == nil {
				r.timeline = analyze(h).timeline
			}
		}
	}
	return r
}

// serverCPU is the CPU time of the servers so far, by name: the dev server
// and the emulator (the bench's descendants) or the cluster's services.
func (b *bench) serverCPU() map[string]float64 {
	out := descendantCPU(b.workerPIDs())
	if b.s.cluster != nil {
		for k, v := range b.s.cluster.cpu() {
			out[k] = v
		}
	}
	return out
}
