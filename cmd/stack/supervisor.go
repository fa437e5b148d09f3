package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// supervisor starts a profile's services from the table, remembers what
// it started itself, and stops services: its own (cleanup) or every one
// recorded under .data/pids (stop).
type supervisor struct {
	s       *Stack
	table   []Service
	profile Profile

	mu      sync.Mutex
	started []*instance      // by this invocation, in start order
	procs   map[string]*proc // its children, to reap and to watch
}

func newSupervisor(s *Stack, table []Service, p Profile) *supervisor {
	return &supervisor{s: s, table: table, profile: p, procs: map[string]*proc{}}
}

// errFailed is returned once the reason has been logged.
var errFailed = errors.New("the stack did not start")

// up starts, or reuses, every service of the profile: each once what it
// needs is ready, side by side otherwise. On error (after logging why) the
// caller's cleanup stops what was started.
func (sv *supervisor) up(ctx context.Context) error {
	s := sv.s
	began := time.Now()
	for _, d := range []string{s.LogDir(), s.PidDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := sv.checkPorts(); err != nil {
		return err
	}
	if err := writeFileAtomic(s.portsFile(), []byte(s.portLines())); err != nil {
		return err
	}
	if err := writeFileAtomic(s.profileFile(), []byte(string(sv.profile)+"\n")); err != nil {
		return err
	}
	pl, err := planFor(sv.table, sv.profile, s)
	if err != nil {
		return err
	}
	for _, why := range pl.skipped {
		s.log.info("%s", why)
	}
	if err := walk(ctx, pl.order, false, sv.bring); err != nil {
		return err
	}
	if err := s.writeEnvFile(); err != nil {
		return err
	}
	s.log.info("stack up in %ds: %s", int(time.Since(began).Seconds()), s.summary())
	return nil
}

// checkPorts refuses to start on other ports than a stack of the same
// data directory that still runs: it would lose track of it.
func (sv *supervisor) checkPorts() error {
	s := sv.s
	recorded := &Stack{ports: maps.Clone(s.ports), DataDir: s.DataDir}
	if err := recorded.loadPorts(); err != nil || maps.Equal(recorded.ports, s.ports) {
		return nil
	}
	var running []string
	if _, ok := s.runningDev(); ok {
		running = append(running, devSession)
	}
	for _, in := range sv.recorded() {
		if _, ok := s.recordedPid(in.name, in.svc.Match); ok {
			running = append(running, in.name)
		}
	}
	if len(running) == 0 {
		return nil
	}
	s.log.error("a stack on other ports is running from %s (%s; ports in %s): stop it first with 'go tool task stop', or use the same STACK_*_PORT settings",
		s.show(s.DataDir), strings.Join(running, " "), s.show(s.portsFile()))
	return errFailed
}

// decision is what bring does with a service.
type decision int

const (
	start   decision = iota
	reuse            // it runs and fits: take it
	restart          // a recorded instance that does not fit: stop it, start anew
	keep             // does not fit, but a dev session owns it: take it, with a warning
	refuse           // its port is held by something else
)

// observed is what runs of a service before it is started.
type observed struct {
	answering bool // Ready passes
	portBusy  bool // one of its ports accepts connections
	recorded  bool // a recorded instance is alive
	settings  string
	binary    string
	devOwner  bool // a dev session other than this one runs
}

// decide is the reuse rule. want are the settings and program checksum this
// run would start a ReuseRecorded service with; the reason says why a
// recorded instance does not fit.
func decide(r Reuse, o observed, wantSettings, wantBinary string) (decision, string) {
	switch r {
	case ReuseNever:
		if o.recorded {
			return restart, "a new one starts with each run"
		}
		return start, ""
	case ReuseRecorded:
		if !o.recorded {
			return start, ""
		}
		why := ""
		if o.settings != wantSettings {
			why = fmt.Sprintf("it runs with other settings (%s; this run: %s)", orDefault(o.settings, "unknown"), wantSettings)
		} else if o.binary != wantBinary {
			why = "its program changed since it started"
		}
		switch {
		case why == "":
			return reuse, ""
		case o.devOwner:
			return keep, why
		default:
			return restart, why
		}
	default:
		// One this stack started that holds its port but misses the probe
		// is busy (the BigQuery emulator under load), not a stranger.
		if o.answering || o.portBusy && o.recorded {
			return reuse, ""
		}
		if o.portBusy {
			return refuse, ""
		}
		return start, ""
	}
}

// bring starts or reuses one instance and waits until it is ready.
func (sv *supervisor) bring(ctx context.Context, in *instance) error {
	s, svc := sv.s, in.svc
	if svc.Job {
		return sv.runJob(ctx, in)
	}
	var launch Launch
	launched := false
	prepare := func() bool { // only when it is needed: a reused server needs no binary
		if launched {
			return true
		}
		var err error
		if launch, err = svc.Launch(s, in.index); err != nil {
			s.log.error("%s", err)
			return false
		}
		launched = true
		return true
	}
	o := sv.observe(ctx, in)
	wantSettings, wantBinary := "", ""
	if svc.Reuse == ReuseRecorded {
		if !prepare() {
			return errFailed
		}
		wantSettings = svc.Settings(s)
		wantBinary = fileSum(launch.Argv[0])
	}
	d, why := decide(svc.Reuse, o, wantSettings, wantBinary)
	switch d {
	case reuse:
		if svc.Reuse == ReuseRecorded {
			pid, _ := s.recordedPid(in.name, svc.Match)
			s.log.info("%s: reusing the one already running (pid %d)%s", in.name, pid, sv.reuseNote())
		} else {
			s.log.info("%s: reusing the one already answering on %s%s", svc.Title, s.addr(svc.Ports[0].Var), sv.reuseNote())
		}
		return sv.setup(ctx, in)
	case keep:
		pid, _ := s.runningDev()
		s.log.warn("%s: keeping the one of the 'go tool task dev' session (pid %d) although %s; stop that session to change it", in.name, pid, why)
		return sv.setup(ctx, in)
	case refuse:
		for _, p := range svc.Ports {
			if dialOK(ctx, s.addr(p.Var)) == nil {
				s.log.error("port %d is in use, but not by the %s (move it with STACK_%s_PORT)", s.port(p.Var), svc.Title, p.Var)
			}
		}
		return errFailed
	case restart:
		pid, _ := s.recordedPid(in.name, svc.Match)
		s.log.info("%s: restarting the one running (pid %d): %s", in.name, pid, why)
		sv.stopOne(in)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !prepare() {
		return errFailed
	}
	p, err := spawn(launch.Argv, append(append([]string{}, s.env...), launch.Env...), s.Root, s.logFile(in.name), launch.Credential)
	if err != nil {
		s.log.error("cannot start %s: %v", in.name, err)
		return errFailed
	}
	sv.mu.Lock()
	sv.started = append(sv.started, in)
	sv.procs[in.name] = p
	sv.mu.Unlock()
	// The pid first: from here on, stop finds it whatever happens to us.
	if err := s.writeRecord(in.name, "pid", strconv.Itoa(p.pid)); err != nil {
		return err
	}
	records := map[string]string{}
	maps.Copy(records, launch.Record)
	if svc.Reuse == ReuseRecorded {
		records["settings"], records["binary"] = wantSettings, wantBinary
	}
	for k, v := range records {
		if err := s.writeRecord(in.name, k, v); err != nil {
			return err
		}
	}
	s.log.info("started %s (pid %d, log %s)", in.name, p.pid, s.show(s.logFile(in.name)))
	began := time.Now()
	ready, err := sv.await(ctx, in, p, launch.Hint)
	if err != nil {
		return err
	}
	if ready {
		on, title := "", svc.Title
		if in.name != svc.Name { // one of Count: its own ports are in its note
			title += " " + strings.TrimPrefix(in.name, svc.Name+"-")
		} else if len(svc.Ports) > 0 {
			on = " on " + s.addr(svc.Ports[0].Var)
		}
		s.log.info("%s: ready in %.1fs%s%s", title, time.Since(began).Seconds(), on, launch.Note)
	}
	return sv.setup(ctx, in)
}

func (sv *supervisor) reuseNote() string {
	if sv.s.StopOnExit {
		return " (not stopped on exit)"
	}
	return ""
}

func (sv *supervisor) observe(ctx context.Context, in *instance) observed {
	s, svc := sv.s, in.svc
	var o observed
	if svc.Reuse != ReuseAnswering {
		if _, ok := s.recordedPid(in.name, svc.Match); ok {
			o.recorded = true
			o.settings = s.readRecord(in.name, "settings")
			o.binary = s.readRecord(in.name, "binary")
		}
		_, o.devOwner = s.runningDev()
		return o
	}
	o.answering = svc.Ready != nil && svc.Ready.Check(ctx, s, in.name) == nil
	if !o.answering {
		for _, p := range svc.Ports {
			if dialOK(ctx, s.addr(p.Var)) == nil {
				o.portBusy = true
			}
		}
		_, o.recorded = s.recordedPid(in.name, svc.Match)
	}
	return o
}

// await polls Ready until it passes. It fails, after printing the end of
// the log and stopping the service, when the service's process group dies
// or the timeout passes. ready is false for a ReadyOnTimeout service taken
// as started without passing Ready.
func (sv *supervisor) await(ctx context.Context, in *instance, p *proc, hint string) (ready bool, err error) {
	s, svc := sv.s, in.svc
	timeout := svc.Timeout
	if svc.TimeoutVar != "" {
		if timeout, err = seconds("STACK_"+svc.TimeoutVar+"_TIMEOUT", svc.Timeout); err != nil {
			return false, err
		}
	}
	deadline := time.Now().Add(timeout)
	fail := func(format string, a ...any) (bool, error) {
		s.log.error(format, a...)
		s.log.tail(s.logFile(in.name), 20)
		sv.stopOne(in)
		if hint != "" {
			s.log.error("%s", hint)
		}
		return false, errFailed
	}
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		if svc.Ready == nil || svc.Ready.Check(ctx, s, in.name) == nil {
			return true, nil
		}
		if !procgroup.Alive(p.pid) {
			return fail("%s exited during startup", in.name)
		}
		if time.Now().After(deadline) {
			if svc.ReadyOnTimeout {
				s.log.info("%s: running (not ready by its probe after %s; continuing)", in.name, timeout)
				return false, nil
			}
			return fail("%s was not ready within %s", in.name, timeout)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (sv *supervisor) setup(ctx context.Context, in *instance) error {
	if in.svc.Setup == nil {
		return nil
	}
	if err := in.svc.Setup(ctx, sv.s); err != nil {
		sv.s.log.error("%s: %v", in.svc.Title, err)
		return errFailed
	}
	return nil
}

// runJob runs a Job entry to completion; its output goes to its log.
func (sv *supervisor) runJob(ctx context.Context, in *instance) error {
	s := sv.s
	launch, err := in.svc.Launch(s, in.index)
	if err != nil {
		s.log.error("%s", err)
		return errFailed
	}
	f, err := os.Create(s.logFile(in.name))
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, launch.Argv[0], launch.Argv[1:]...)
	cmd.Env = append(append([]string{}, s.env...), launch.Env...)
	cmd.Dir = s.Root
	cmd.Stdout, cmd.Stderr = f, f
	// Its own group, ended as a whole when the start is abandoned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		s.log.error("%s failed: %v", in.name, err)
		s.log.tail(s.logFile(in.name), 20)
		if launch.Hint != "" {
			s.log.error("%s", launch.Hint)
		}
		return errFailed
	}
	s.log.info("%s: done%s", in.name, launch.Note)
	return sv.setup(ctx, in)
}

// cleanup stops what this invocation started, each after what needs it.
func (sv *supervisor) cleanup() {
	sv.mu.Lock()
	started := append([]*instance{}, sv.started...)
	sv.started = nil
	sv.mu.Unlock()
	_ = walk(context.Background(), started, true, func(_ context.Context, in *instance) error {
		sv.stopOne(in)
		return nil
	})
}

// stopOne stops an instance if it runs (saving first what BeforeStop saves)
// and forgets it.
func (sv *supervisor) stopOne(in *instance) {
	s, svc := sv.s, in.svc
	pid, ok := s.recordedPid(in.name, svc.Match)
	if !ok {
		s.forget(in.name)
		return
	}
	if svc.BeforeStop != nil && s.SaveOnStop {
		_ = svc.BeforeStop(s) // it says what went wrong
	}
	s.log.info("stopping %s (pid %d)", in.name, pid)
	if procgroup.Stop(pid, s.StopTimeout) {
		s.log.warn("%s did not stop within %s; killed it", in.name, s.StopTimeout)
	}
	sv.mu.Lock()
	p := sv.procs[in.name]
	sv.mu.Unlock()
	if p != nil && p.pid == pid {
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
		}
	}
	s.forget(in.name)
}

// recorded is every instance of the table (any profile) that has a pid
// file, with needs among them.
func (sv *supervisor) recorded() []*instance {
	s := sv.s
	byService := map[string][]string{}
	var out []*instance
	for i := range sv.table {
		svc := &sv.table[i]
		if svc.Job {
			continue
		}
		names := []string{svc.Name}
		max := 0
		for _, n := range svc.Count {
			max = maxInt(max, n)
		}
		for k := 1; k <= max; k++ {
			names = append(names, fmt.Sprintf("%s-%d", svc.Name, k))
		}
		for k, name := range names {
			if _, err := os.Stat(s.pidFile(name)); err == nil {
				byService[svc.Name] = append(byService[svc.Name], name)
				out = append(out, &instance{svc: svc, name: name, index: maxInt(k, 1)})
			}
		}
	}
	for _, in := range out {
		for _, n := range in.svc.Needs {
			in.needs = append(in.needs, byService[n]...)
		}
	}
	return out
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// stopRecorded stops a dev session (it stops its own services), then every
// service recorded under .data/pids: what `investigate` left running, or
// what a killed session left behind. Each stops after what needs it: the
// worker before the Firestore save, so nothing writes while it is saved.
func (sv *supervisor) stopRecorded() {
	s := sv.s
	any := false
	if pid, ok := s.runningDev(); ok {
		any = true
		s.log.info("stopping the 'go tool task dev' session (pid %d)", pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(4 * s.StopTimeout)
		for procgroup.PidAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	s.forget(devSession)
	recorded := sv.recorded()
	var mu sync.Mutex
	_ = walk(context.Background(), recorded, true, func(_ context.Context, in *instance) error {
		if _, ok := s.recordedPid(in.name, in.svc.Match); ok {
			mu.Lock()
			any = true
			mu.Unlock()
		}
		sv.stopOne(in)
		return nil
	})
	if !any {
		s.log.info("nothing recorded under %s is running", s.show(s.PidDir()))
	}
}

// walk runs fn for every instance, each once fn has returned for those it
// must follow: what it needs, or (reverse) what needs it. Instances with
// nothing between them run side by side. After an error, instances not
// begun yet are skipped; walk returns the first error that is not a
// cancellation.
func walk(parent context.Context, nodes []*instance, reverse bool, fn func(context.Context, *instance) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	present := map[string]bool{}
	for _, n := range nodes {
		present[n.name] = true
	}
	after := map[string][]string{}
	for _, n := range nodes {
		for _, need := range n.needs {
			if !present[need] {
				continue
			}
			if reverse {
				after[need] = append(after[need], n.name)
			} else {
				after[n.name] = append(after[n.name], need)
			}
		}
	}
	done := map[string]chan struct{}{}
	for _, n := range nodes {
		done[n.name] = make(chan struct{})
	}
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[n.name])
			for _, prev := range after[n.name] {
				select {
				case <-done[prev]:
				case <-ctx.Done():
				}
			}
			if ctx.Err() != nil {
				return
			}
			if err := fn(ctx, n); err != nil {
				mu.Lock()
				if first == nil || errors.Is(first, context.Canceled) {
					first = err
				}
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	if first == nil {
		return parent.Err() // a signal ended the caller's context
	}
	return first
}
