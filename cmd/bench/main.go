// Command bench measures the investigator against itself: it starts the
// Temporal dev server, the Firestore emulator (behind a proxy that counts
// the worker's calls), a scripted Gemini-protocol server and fake
// threat-intelligence providers with configurable latencies, builds and
// starts the worker, runs investigations through the Temporal client, and
// prints one table of figures, each measured side by side in the same run.
//
//	go tool task bench
//	go run ./cmd/bench -latency 300ms,1s -n 10,100,500 -workers 2 --json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the command-line settings.
type options struct {
	latencies       []time.Duration
	providerLatency time.Duration
	batches         []int
	workers         int
	repeat          int
	json            bool
	trace           bool
	timeout         time.Duration
	// The intake scenario (intake.go) instead of the investigation figures.
	intake           bool
	intakeMessages   int
	intakeMaxRunning int
	intakeNoGroup    bool
	// cluster runs against the local cluster's Temporal server (cmd/stack's
	// cluster-server profile); the batches run with one worker, then with
	// -workers.
	cluster bool
	// memoryServer runs the dev server in memory instead of on a SQLite
	// file as the local stack runs it.
	memoryServer bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runBench(ctx, os.Args[1:], os.Stdout)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted:
		fmt.Fprintln(os.Stderr, "bench: interrupted; everything it started is stopped.")
		os.Exit(130)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "bench: "+oneSentence(err))
		os.Exit(1)
	}
}

// runBench parses args, measures, prints the table (or JSON) to out and
// stops everything it started.
func runBench(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.intake {
		return runIntakeBench(ctx, o, out)
	}
	rep, err := measureReport(ctx, o)
	if err != nil {
		return err
	}
	if o.json {
		return rep.writeJSON(out)
	}
	return rep.writeTable(out)
}

// measureReport starts the stack, runs every measurement and stops the
// stack again.
func measureReport(ctx context.Context, o options) (*report, error) {
	s, err := startStack(ctx, o)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("cannot start the stack: %w", err)
	}
	defer s.close()
	b := &bench{s: s, o: o}
	m, err := b.measure(ctx)
	if err != nil {
		return nil, err
	}
	if o.trace {
		writeTrace(os.Stderr, m)
	}
	return b.report(m), nil
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var lat, n string
	o := options{}
	fs.StringVar(&lat, "latency", "300ms,1s", "model latency per call; a comma-separated list measures each")
	fs.DurationVar(&o.providerLatency, "provider-latency", 300*time.Millisecond, "latency of each threat-intelligence lookup")
	fs.StringVar(&n, "n", "10,100", "investigations started at once; a comma-separated list runs a batch of each")
	fs.IntVar(&o.workers, "workers", 1, "worker processes on the task queue")
	fs.IntVar(&o.repeat, "repeat", 3, "runs of each lone measurement (each figure is the median run's)")
	fs.BoolVar(&o.json, "json", false, "print the figures as JSON instead of the table")
	fs.BoolVar(&o.trace, "trace", false, "also print each lone run's activities and model calls with their timings, to stderr")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest wait for one batch of concurrent investigations")
	fs.BoolVar(&o.cluster, "cluster", false, "run against the local cluster's Temporal server (PostgreSQL, frontend, history, matching, internal worker; go tool task cluster-setup builds it) instead of the dev server; the batches run with one worker, then again with -workers")
	fs.BoolVar(&o.memoryServer, "memory-server", false, "run the dev server in memory instead of on a SQLite file with the local stack's settings")
	fs.BoolVar(&o.intake, "intake", false, "measure the intake instead: a burst published to Pub/Sub, two starter intake processes, one killed mid-burst")
	fs.IntVar(&o.intakeMessages, "intake-messages", 1000, "messages of the intake burst")
	fs.IntVar(&o.intakeMaxRunning, "intake-max-running", 20, "the intakes' --max-running")
	fs.BoolVar(&o.intakeNoGroup, "intake-no-group", false, "the intakes' --no-group")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, f := range strings.Split(lat, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 {
			return o, fmt.Errorf("-latency takes durations such as 300ms,1s, not %q", f)
		}
		o.latencies = append(o.latencies, d)
	}
	for _, f := range strings.Split(n, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return o, fmt.Errorf("-n takes positive counts such as 10,100, not %q", f)
		}
		o.batches = append(o.batches, v)
	}
	switch {
	case o.workers < 1:
		return o, fmt.Errorf("-workers must be at least 1, not %d", o.workers)
	case o.repeat < 1:
		return o, fmt.Errorf("-repeat must be at least 1, not %d", o.repeat)
	case o.providerLatency < 0:
		return o, fmt.Errorf("-provider-latency must not be negative")
	case o.timeout <= 0:
		return o, fmt.Errorf("-timeout must be positive")
	case o.intakeMessages < 20:
		return o, fmt.Errorf("-intake-messages must be at least 20, not %d", o.intakeMessages)
	case o.intakeMaxRunning < 1:
		return o, fmt.Errorf("-intake-max-running must be at least 1, not %d", o.intakeMaxRunning)
	}
	return o, nil
}

// batchLatency is the index of the longest model latency, the one the
// batches run at: a real model's calls take seconds, and that is what lets
// many investigations overlap.
func (o options) batchLatency() int {
	longest := 0
	for i, l := range o.latencies {
		if l > o.latencies[longest] {
			longest = i
		}
	}
	return longest
}

// bench holds the started stack and the settings.
type bench struct {
	s *stack
	o options
}

// measurements are the runs the report is computed from; each lone
// measurement is repeated, the runs of a pair interleaved.
type measurements struct {
	lone        [][]*run    // the standard investigation: [latency][repeat]
	firestore   []callCount // Firestore calls during each lone run at the first latency
	callsPar    []*run
	callsSeq    []*run
	stepsPar    []*run
	stepsSeq    []*run
	batches     []*batch
	historyRuns []*run // every run whose history was read
	scale       *scaleOut
	// starterFirst is `starter investigate` right after the worker
	// started, starterWarm the same once warm (one per repeat),
	// starterRestart right after every worker restarted on the warm stack.
	starterFirst   *starterRun
	starterWarm    []*starterRun
	starterRestart *starterRun
	// restarted is how many workers the restart replaced.
	restarted int
}

// measure runs everything, one figure's runs after another.
func (b *bench) measure(ctx context.Context) (*measurements, error) {
	m := &measurements{lone: make([][]*run, len(b.o.latencies))}
	first := b.o.latencies[0]
	// What an analyst sees first: the starter's process, before anything
	// warmed the worker up.
	m.starterFirst = b.viaStarter(ctx, "starter-first", first)
	// A warm-up run: connections, caches and the first workflow task are
	// paid before anything is timed.
	if w := b.lone(ctx, "warmup", standard(b.s.alertID), 0); w.err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the stack started but the warm-up investigation failed: %w", w.err)
	}
	for i := range b.o.repeat {
		for j, lat := range b.o.latencies {
			before := b.s.proxy.Calls()
			m.lone[j] = append(m.lone[j], b.lone(ctx, fmt.Sprintf("lone-%d-%d", j, i), standard(b.s.alertID), lat))
			if j == 0 {
				m.firestore = append(m.firestore, b.s.proxy.Calls().since(before))
			}
		}
		m.starterWarm = append(m.starterWarm, b.viaStarter(ctx, fmt.Sprint("starter-", i), first))
		m.callsPar = append(m.callsPar, b.lone(ctx, fmt.Sprint("calls-parallel-", i), parallelCalls(), first))
		m.callsSeq = append(m.callsSeq, b.lone(ctx, fmt.Sprint("calls-sequential-", i), sequentialCalls(), first))
		m.stepsPar = append(m.stepsPar, b.lone(ctx, fmt.Sprint("steps-independent-", i), independentSteps(true), first))
		m.stepsSeq = append(m.stepsSeq, b.lone(ctx, fmt.Sprint("steps-in-order-", i), independentSteps(false), first))
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	// The workers restarted (a deploy) on a stack that stays up: their
	// first investigation, with the servers already warm. On the cluster
	// only the first worker runs yet.
	m.restarted = len(b.s.workers)
	if err := b.s.restartWorkers(ctx); err != nil {
		m.starterRestart = &starterRun{key: "starter-restart", err: fmt.Errorf("restart the workers: %w", err)}
	} else {
		m.starterRestart = b.viaStarter(ctx, "starter-restart", first)
	}
	for _, rs := range m.lone {
		m.historyRuns = append(m.historyRuns, rs...)
	}
	for _, rs := range [][]*run{m.callsPar, m.callsSeq, m.stepsPar, m.stepsSeq} {
		m.historyRuns = append(m.historyRuns, rs...)
	}
	for _, n := range b.o.batches {
		bt := b.concurrent(ctx, n, b.o.latencies[b.o.batchLatency()], b.o.timeout)
		m.batches = append(m.batches, bt)
		m.historyRuns = append(m.historyRuns, bt.runs...)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if b.o.cluster && b.o.workers > 1 {
		// The same batches again with every worker polling.
		m.scale = &scaleOut{one: m.batches, workers: b.o.workers}
		began := time.Now()
		if err := b.s.addWorkers(ctx, b.o.workers); err != nil {
			return nil, err
		}
		m.scale.started = time.Since(began)
		for _, n := range b.o.batches {
			bt := b.concurrent(ctx, n, b.o.latencies[b.o.batchLatency()], b.o.timeout)
			m.scale.all = append(m.scale.all, bt)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// oneSentence keeps the first line of an error (emulator output follows
// the sentence in some).
func oneSentence(err error) string {
	s := firstLine(err.Error())
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// machine describes where the figures were measured.
func machine() string {
	return fmt.Sprintf("%d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
}
