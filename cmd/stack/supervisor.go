package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
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
	// gates hold back the start of a new instance of a service with
	// several until every old one that must go has stopped (bring).
	gates map[string]*gate

	// force: a stop goes on when BeforeStop fails (stop --force).
	force bool

	lockMu    sync.Mutex // lock.go
	lockDepth int
	release   func()
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
		if err := s.mkdirPrivate(d); err != nil {
			return err
		}
	}
	unlock, err := sv.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
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
	if err := sv.refuseForeign(ctx, pl.order); err != nil {
		return err
	}
	sv.gates = gatesFor(pl.order)
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
			was, now := settingsDiff(o.settings, wantSettings)
			was, now = unhashed(was), unhashed(now)
			if o.settings == "" {
				was = "unknown"
			}
			why = fmt.Sprintf("it runs with other settings (%s; this run: %s)", orDefault(was, "none"), orDefault(now, "none"))
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
	case ReuseOwn:
		switch {
		case o.recorded && (o.answering || o.portBusy):
			return reuse, ""
		case o.recorded:
			return restart, "it listens on none of its ports"
		case o.answering || o.portBusy:
			return refuse, ""
		}
		return start, ""
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

// settingsDiff is what differs between two settings lines of items
// separated by ", ": the items only the first has, and those only the
// second has (each whole when that leaves nothing to show).
func settingsDiff(was, now string) (string, string) {
	a, b := strings.Split(was, ", "), strings.Split(now, ", ")
	onlyA := slices.DeleteFunc(slices.Clone(a), func(x string) bool { return slices.Contains(b, x) })
	onlyB := slices.DeleteFunc(slices.Clone(b), func(x string) bool { return slices.Contains(a, x) })
	if len(onlyA) == 0 && len(onlyB) == 0 {
		return was, now
	}
	return strings.Join(onlyA, ", "), strings.Join(onlyB, ", ")
}

// hashedValue is a hashed value in settings (NAME=#h, "token #h",
// "content #h").
var hashedValue = regexp.MustCompile(`(=| )#[0-9a-f]{12}\b`)

// unhashed names a hashed setting without its hash: a log line says which
// secret changed, never a hash of it.
func unhashed(settings string) string { return hashedValue.ReplaceAllString(settings, "") }

// bring starts or reuses one instance and waits until it is ready.
func (sv *supervisor) bring(ctx context.Context, in *instance) error {
	s, svc := sv.s, in.svc
	if svc.Job {
		return sv.runJob(ctx, in)
	}
	defer sv.arrive(in) // whatever happens: its siblings must not wait for it
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
		if svc.Reuse != ReuseAnswering {
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
		if svc.Reuse == ReuseOwn {
			s.log.error("%s", sv.held(ctx, in))
			return errFailed
		}
		for _, p := range svc.Ports {
			if dialOK(ctx, s.addr(p.Var)) == nil {
				s.log.error("port %d is in use, but not by the %s (move it with STACK_%s_PORT)", s.port(p.Var), svc.Title, p.Var)
			}
		}
		return errFailed
	case restart:
		pid, _ := s.recordedPid(in.name, svc.Match)
		s.log.info("%s: restarting the one running (pid %d): %s", in.name, pid, why)
		sv.stopOne(in, true)
	}
	// A new worker refuses to start beside a running one of its queue with
	// other settings (worker/fingerprint.go): no instance starts until
	// every old one of its service is gone, a draining one included.
	sv.arrive(in)
	if err := sv.waitSiblings(ctx, in); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !prepare() {
		return errFailed
	}
	p, err := spawn(launch.Argv, append(s.envFor(svc), launch.Env...), s.Root, s.logFile(in.name), launch.Credential)
	if err != nil {
		s.log.error("cannot start %s: %v", in.name, err)
		return errFailed
	}
	sv.mu.Lock()
	sv.started = append(sv.started, in)
	sv.procs[in.name] = p
	sv.mu.Unlock()
	// The pid first: from here on, stop finds it whatever happens to us.
	if err := s.recordPid(in.name, p.pid, p.start); err != nil {
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
	if svc.Reuse == ReuseRecorded || svc.Reuse == ReuseNever {
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
	}
	// ReuseOwn: answering is not enough, the instance must be the recorded one.
	if !o.answering || svc.Reuse == ReuseOwn {
		_, o.recorded = s.recordedPid(in.name, svc.Match)
	}
	return o
}

// refuseForeign fails the start, before anything is started, when a
// ReuseOwn service's port is held by something this stack did not start
// for it: a cluster around a dev server's frontend would say it runs while
// every workflow went to the dev server's SQLite.
func (sv *supervisor) refuseForeign(ctx context.Context, order []*instance) error {
	for _, in := range order {
		if in.svc.Reuse != ReuseOwn || in.svc.Job {
			continue
		}
		if d, _ := decide(ReuseOwn, sv.observe(ctx, in), "", ""); d == refuse {
			sv.s.log.error("%s", sv.held(ctx, in))
			return errFailed
		}
	}
	return nil
}

// held is the one sentence a refused ReuseOwn service logs: which of its
// ports is taken, and by what, as far as this stack knows. A service of
// another entry this data directory recorded (the dev profile's Temporal
// server on the cluster's 7233 or 8233) is told apart from a stranger.
func (sv *supervisor) held(ctx context.Context, in *instance) string {
	s, svc := sv.s, in.svc
	port := svc.Ports[0]
	for _, p := range svc.Ports {
		if dialOK(ctx, s.addr(p.Var)) == nil {
			port = p
			break
		}
	}
	for i := range sv.table {
		other := &sv.table[i]
		if other.Name == svc.Name || !slices.ContainsFunc(other.Ports, func(p Port) bool { return p.Var == port.Var }) {
			continue
		}
		if pid, ok := s.recordedPid(other.Name, other.Match); ok {
			var profiles []string
			for _, p := range other.Profiles {
				profiles = append(profiles, string(p))
			}
			return fmt.Sprintf("%s: this data directory's %s stack runs its %s (pid %d) on %s, where the %s profile starts its own; stop it first with 'go tool task stop'",
				svc.Title, strings.Join(profiles, " or "), other.Title, pid, s.addr(port.Var), sv.profile)
		}
	}
	return fmt.Sprintf("%s: %s is in use by something this stack did not start from %s (a server of your own, or another data directory's stack); stop it, or move the %s profile's with STACK_%s_PORT",
		svc.Title, s.addr(port.Var), s.show(s.DataDir), sv.profile, port.Var)
}

// await polls Ready until it passes. It fails, after printing the end of
// the log and stopping the service, when the service's process group dies
// or the timeout passes. ready is false for a ReadyOnTimeout service taken
// as started without passing Ready.
func (sv *supervisor) await(ctx context.Context, in *instance, p *proc, hint string) (ready bool, err error) {
	s, svc := sv.s, in.svc
	timeout, err := svc.timeout()
	if err != nil {
		return false, err
	}
	deadline := time.Now().Add(timeout)
	fail := func(format string, a ...any) (bool, error) {
		s.log.error(format, a...)
		s.log.tail(s.logFile(in.name), 20)
		sv.stopOne(in, false) // never ready: nothing of it to save
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
	f, err := createPrivate(s.logFile(in.name))
	if err != nil {
		return err
	}
	defer f.Close()
	timeout, err := in.svc.timeout()
	if err != nil {
		return err
	}
	jctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		jctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(jctx, launch.Argv[0], launch.Argv[1:]...)
	cmd.Env = append(s.envFor(in.svc), launch.Env...)
	cmd.Dir = s.Root
	cmd.Stdout, cmd.Stderr = f, f
	// Its own group, ended as a whole when the start is abandoned or the
	// job outlives its timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = startPrivate(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if jctx.Err() != nil {
			err = fmt.Errorf("it did not finish within %s (STACK_%s_TIMEOUT), so it was stopped", timeout, in.svc.TimeoutVar)
		}
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
// It reports false when something was left running: the lock could not be
// had, or a save before a stop failed (stopOne).
func (sv *supervisor) cleanup() bool {
	sv.mu.Lock()
	started := append([]*instance{}, sv.started...)
	sv.started = nil
	sv.mu.Unlock()
	if len(started) == 0 {
		return true
	}
	unlock, err := sv.lock(context.Background())
	if err != nil {
		sv.s.log.error("%v; what this run started is left running, for 'go tool task stop'", err)
		return false
	}
	defer unlock()
	return sv.stopAll(started)
}

// stopAll stops instances, each after what needs it, the rest side by
// side; false when one was kept.
func (sv *supervisor) stopAll(ins []*instance) bool {
	var mu sync.Mutex
	ok := true
	_ = walk(context.Background(), ins, true, func(_ context.Context, in *instance) error {
		if sv.stopOne(in, true) {
			mu.Lock()
			ok = false
			mu.Unlock()
		}
		return nil
	})
	return ok
}

// workerExitMargin is how long a worker may take after its stop timeout:
// it writes queued progress and exports telemetry, up to 10 s each
// (worker/main.go, worker/telemetry.go).
const workerExitMargin = 20 * time.Second

// stopWait is how long a stop waits for an instance before SIGKILL:
// STACK_STOP_TIMEOUT, or longer where its start recorded a longer wait
// (a worker's own stop timeout and its exit).
func (sv *supervisor) stopWait(name string) time.Duration {
	wait := sv.s.StopTimeout
	if d, err := time.ParseDuration(sv.s.readRecord(name, "stopwait")); err == nil && d > wait {
		wait = d
	}
	return wait
}

// stopOne stops an instance if it runs and forgets it. With beforeStop it
// first runs BeforeStop (the Firestore save) unless the stop is a clean's;
// when that fails the instance is kept running, recorded, and kept is true:
// stopping the emulator would lose what the save could not write. A forced
// stop (stop --force) goes on.
func (sv *supervisor) stopOne(in *instance, beforeStop bool) (kept bool) {
	s, svc := sv.s, in.svc
	pid, ok := s.recordedPid(in.name, svc.Match)
	if !ok {
		if pid, ok = s.olderRecordPid(in.name, svc.Match); ok {
			s.log.info("%s: %s names pid %d without its start time (an older stack wrote it), but it is the process recorded (it started before the record was written, in %s, as the %s): stopping it",
				in.name, s.show(s.pidFile(in.name)), pid, s.show(s.Root), in.name)
		}
	}
	if !ok {
		s.warnUnproven(in.name, svc.Match)
		s.forget(in.name)
		return false
	}
	if beforeStop && svc.BeforeStop != nil && s.SaveOnStop {
		if err := svc.BeforeStop(s); err != nil { // it said what went wrong
			if !sv.force {
				s.log.error("%s: left running (pid %d) because its data could not be saved: retry with 'go tool task save' and then 'go tool task stop', or stop it without saving with 'go tool task stop -- --force'",
					svc.Title, pid)
				return true
			}
			s.log.warn("%s: stopping it without a save (--force): what changed since the last save is lost", svc.Title)
		}
	}
	wait := sv.stopWait(in.name)
	s.log.info("stopping %s (pid %d)", in.name, pid)
	if procgroup.Stop(pid, wait) {
		s.log.warn("%s did not stop within %s; killed it", in.name, wait)
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
	return false
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
// It reports false when something was left running (the lock could not
// be had, or a save before a stop failed).
func (sv *supervisor) stopRecorded() bool {
	stoppedDev := sv.stopDev()
	// The session takes the lock to stop its own services: taken before it
	// ended, both would wait for each other.
	unlock, err := sv.lock(context.Background())
	if err != nil {
		sv.s.log.error("%v", err)
		return false
	}
	defer unlock()
	return sv.stopRecordedLocked(stoppedDev)
}

// stopDev ends a running dev session (which stops its own services) and
// reports whether there was one.
func (sv *supervisor) stopDev() bool {
	s := sv.s
	pid, ok := s.runningDev()
	if ok {
		s.log.info("stopping the 'go tool task dev' session (pid %d)", pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		// Its worker may drain longer than STACK_STOP_TIMEOUT.
		deadline := time.Now().Add(addWaits(s.StopTimeout, s.StopTimeout, s.StopTimeout, s.StopTimeout, sv.longestStopWait()))
		for procgroup.PidAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	} else {
		s.warnUnproven(devSession, devMatch)
	}
	s.forget(devSession)
	return ok
}

// addWaits sums non-negative waits, saturating at the longest Duration: a
// caller's wait at the limit (WORKER_STOP_TIMEOUT) must not wrap around
// into a deadline already past.
func addWaits(ws ...time.Duration) time.Duration {
	var sum time.Duration
	for _, w := range ws {
		w = max(w, 0)
		if w > math.MaxInt64-sum {
			return math.MaxInt64
		}
		sum += w
	}
	return sum
}

// longestStopWait is the longest stop wait a recorded instance has.
func (sv *supervisor) longestStopWait() time.Duration {
	var longest time.Duration
	for _, in := range sv.recorded() {
		longest = max(longest, sv.stopWait(in.name))
	}
	return longest
}

// stopRecordedLocked is stopRecorded once the session is gone and the lock
// held; anyRunning says something already stopped.
func (sv *supervisor) stopRecordedLocked(anyRunning bool) bool {
	s := sv.s
	recorded := sv.recorded()
	for _, in := range recorded {
		if _, ok := s.recordedPid(in.name, in.svc.Match); ok {
			anyRunning = true
		}
	}
	ok := sv.stopAll(recorded)
	if !anyRunning {
		s.log.info("nothing recorded under %s is running", s.show(s.PidDir()))
	}
	return ok
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

// timeout is how long a service may take to be ready, or a job to finish:
// Timeout, or STACK_<TimeoutVar>_TIMEOUT seconds.
func (svc *Service) timeout() (time.Duration, error) {
	if svc.TimeoutVar == "" {
		return svc.Timeout, nil
	}
	return seconds("STACK_"+svc.TimeoutVar+"_TIMEOUT", svc.Timeout)
}

// gate is the instances of one service in a start: none spawns until each
// has decided and stopped its old process (bring).
type gate struct {
	mu      sync.Mutex
	left    int
	arrived map[string]bool
	open    chan struct{}
}

// gatesFor makes a gate for each service with several instances in order.
func gatesFor(order []*instance) map[string]*gate {
	n := map[string]int{}
	for _, in := range order {
		if !in.svc.Job {
			n[in.svc.Name]++
		}
	}
	gates := map[string]*gate{}
	for name, k := range n {
		if k > 1 {
			gates[name] = &gate{left: k, arrived: map[string]bool{}, open: make(chan struct{})}
		}
	}
	return gates
}

// arrive says in has decided, and stopped what it had to; once per instance.
func (sv *supervisor) arrive(in *instance) {
	g := sv.gates[in.svc.Name]
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.arrived[in.name] {
		return
	}
	g.arrived[in.name] = true
	if g.left--; g.left == 0 {
		close(g.open)
	}
}

// waitSiblings waits until every instance of in's service has arrived.
func (sv *supervisor) waitSiblings(ctx context.Context, in *instance) error {
	g := sv.gates[in.svc.Name]
	if g == nil {
		return nil
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
