package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/firestore"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/testenv"
)

const (
	modulePath = "github.com/secops-agent/investigator"
	taskQueue  = "bench"
	benchAlert = "examples/alerts/guardduty-ssh-bruteforce.json"
)

// stack is everything the bench starts; close stops all of it.
type stack struct {
	dir      string // holds the worker binary
	temporal *testsuite.DevServer
	// cluster is the local cluster's Temporal server (-cluster) instead.
	cluster  *clusterServer
	frontend string
	env      []string // the workers'
	stopFS   func()
	proxy    *countingProxy
	model    *modelServer
	intel    *providers
	tc       client.Client
	fs       *firestore.Client
	workers  []*workerProc
	// slot is each worker process ever started, by pid: its index in
	// workers, which a restarted worker's replacement takes over.
	slot    map[int]int
	alertID string
	// starterEnv is the environment `starter investigate` runs in: the
	// worker's settings, Firestore reached directly.
	starterEnv []string
}

// workerProc is one worker process.
type workerProc struct {
	cmd  *exec.Cmd
	log  *startLog
	done chan struct{}
}

// startStack builds the worker, starts the Temporal dev server, the
// Firestore emulator behind the counting proxy, the model and provider
// servers and the workers, and stores the alert the runs investigate.
func startStack(ctx context.Context, o options) (s *stack, err error) {
	s = &stack{}
	defer func() {
		if err != nil {
			s.close()
			s = nil
		}
	}()
	root, err := moduleRoot()
	if err != nil {
		return s, err
	}
	if s.dir, err = os.MkdirTemp("", "investigator-bench-"); err != nil {
		return s, err
	}
	built := make(chan error, 1)
	go func() { built <- build(ctx, root, s.dir) }()
	var buildErr error
	buildDone := false
	waitBuilt := func() error {
		if !buildDone {
			buildErr, buildDone = <-built, true
		}
		return buildErr
	}

	if o.cluster {
		// bin/stack starts it: built first.
		if err := waitBuilt(); err != nil {
			return s, err
		}
		if s.cluster, err = startClusterServer(ctx, root, s.dir); err != nil {
			return s, err
		}
		s.frontend = s.cluster.frontend
	} else {
		var db []testenv.TemporalOption
		if !o.memoryServer {
			// As the local stack runs it: the server's writes are part of
			// what an analyst waits for.
			db = append(db, testenv.WithDatabase(filepath.Join(s.dir, "temporal.db")))
		}
		if s.temporal, err = testenv.StartTemporal(ctx, db...); err != nil {
			_ = waitBuilt()
			return s, err
		}
		s.frontend = s.temporal.FrontendHostPort()
	}
	var fsHost string
	fsHost, s.stopFS, err = testenv.StartFirestore()
	if err != nil {
		_ = waitBuilt()
		return s, err
	}
	if err := waitBuilt(); err != nil {
		return s, err
	}
	if err := ctx.Err(); err != nil {
		return s, err
	}
	if s.proxy, err = startProxy(fsHost); err != nil {
		return s, fmt.Errorf("start the Firestore counting proxy: %w", err)
	}
	s.model = newModelServer()
	s.intel = newProviders(o.providerLatency)
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if s.tc, err = client.Dial(client.Options{HostPort: s.frontend, Logger: logger}); err != nil {
		return s, fmt.Errorf("connect to the Temporal dev server: %w", err)
	}
	// The bench's own Firestore client goes to the emulator directly (the
	// client reads FIRESTORE_EMULATOR_HOST), so the proxy counts the
	// worker's calls only.
	if err := os.Setenv("FIRESTORE_EMULATOR_HOST", fsHost); err != nil {
		return s, err
	}
	if s.fs, err = firestore.NewClient(ctx, testenv.Project); err != nil {
		return s, fmt.Errorf("connect to the Firestore emulator: %w", err)
	}
	if s.alertID, err = storeAlert(ctx, s.fs, filepath.Join(root, benchAlert)); err != nil {
		return s, err
	}
	env := append(os.Environ(),
		"TEMPORAL_ADDRESS="+s.frontend, "TEMPORAL_NAMESPACE=default", "TEMPORAL_TASK_QUEUE="+taskQueue,
		"TEMPORAL_API_KEY=", "TEMPORAL_TLS=", "TEMPORAL_TLS_CLIENT_CERT_PATH=", "TEMPORAL_TLS_CLIENT_KEY_PATH=", "PAYLOAD_KEY_FILE=",
		"FIRESTORE_EMULATOR_HOST="+s.proxy.Addr(), "GOOGLE_CLOUD_PROJECT="+testenv.Project, "FIRESTORE_DATABASE=",
		"GOOGLE_GEMINI_BASE_URL="+s.model.URL, "GEMINI_API_KEY=bench-key", "GOOGLE_API_KEY=", "GOOGLE_GENAI_USE_VERTEXAI=",
		"BIGQUERY_TABLES_CONFIG=", "LOG_LEVEL=warn")
	s.env = append(env, s.intel.env()...)
	s.starterEnv = append(append([]string(nil), s.env...), "FIRESTORE_EMULATOR_HOST="+fsHost)
	// On the cluster the batches run with one worker first, then with all
	// (measure): the others start later.
	first := o.workers
	if o.cluster {
		first = 1
	}
	return s, s.addWorkers(ctx, first)
}

// addWorkers starts workers until n run, and waits until all poll.
func (s *stack) addWorkers(ctx context.Context, n int) error {
	for len(s.workers) < n {
		w, err := startWorker(filepath.Join(s.dir, "worker"), s.env)
		if err != nil {
			return err
		}
		s.setSlot(w, len(s.workers))
		s.workers = append(s.workers, w)
	}
	return s.waitWorkers(ctx)
}

// restartWorkers stops every worker, then starts as many new ones, as a
// deploy does, and waits until they poll: a warm worker left polling would
// take part of the next run's tasks.
func (s *stack) restartWorkers(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, w := range s.workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.stop() }()
	}
	wg.Wait()
	for i := range s.workers {
		w, err := startWorker(filepath.Join(s.dir, "worker"), s.env)
		if err != nil {
			return err
		}
		s.setSlot(w, i)
		s.workers[i] = w
	}
	return s.waitWorkers(ctx)
}

func (s *stack) setSlot(w *workerProc, i int) {
	if s.slot == nil {
		s.slot = map[int]int{}
	}
	s.slot[w.pid()] = i
}

// workerOf is the index in workers of the process that named itself
// identity (pid@host@queue), or false for none the bench started.
func (s *stack) workerOf(identity string) (int, bool) {
	pid, _, found := strings.Cut(identity, "@")
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(pid)
	if err != nil {
		return 0, false
	}
	i, ok := s.slot[n]
	return i, ok
}

func storeAlert(ctx context.Context, fs *firestore.Client, path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the example alert: %w", err)
	}
	al, err := alerts.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse the example alert %s: %w", path, err)
	}
	if err := alerts.NewStore(fs).Put(ctx, al); err != nil {
		return "", fmt.Errorf("store the example alert in the Firestore emulator: %w", err)
	}
	return al.ID, nil
}

// moduleRoot is the nearest directory upwards holding this module's go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(mod, []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run the bench inside the investigator repository (no go.mod of " + modulePath + " above the current directory)")
		}
		dir = parent
	}
}

func build(ctx context.Context, root, dir string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "./worker", "./cmd/stack", "./starter")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the worker, the stack and the starter: %v: %s", err, firstLine(string(out)))
	}
	return nil
}

func startWorker(path string, env []string) (*workerProc, error) {
	w := &workerProc{cmd: exec.Command(path), log: &startLog{max: 8 << 10}, done: make(chan struct{})}
	w.cmd.Env = env
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	w.cmd.SysProcAttr = workerAttr()
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the worker: %w", err)
	}
	go func() {
		_ = w.cmd.Wait()
		close(w.done)
	}()
	return w, nil
}

func (w *workerProc) pid() int { return w.cmd.Process.Pid }

// stop ends the worker with SIGTERM (it drains), then SIGKILL after 20 s.
func (w *workerProc) stop() {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

// waitWorkers waits until every worker polls both the workflow and the
// activity task queue.
func (s *stack) waitWorkers(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ready := true
		for _, typ := range []enums.TaskQueueType{enums.TASK_QUEUE_TYPE_WORKFLOW, enums.TASK_QUEUE_TYPE_ACTIVITY} {
			resp, err := s.tc.DescribeTaskQueue(ctx, taskQueue, typ)
			if err != nil {
				return fmt.Errorf("describe the task queue: %w", err)
			}
			for _, w := range s.workers {
				found := false
				for _, p := range resp.GetPollers() {
					found = found || strings.HasPrefix(p.GetIdentity(), fmt.Sprintf("%d@", w.pid()))
				}
				ready = ready && found
			}
		}
		if ready {
			return nil
		}
		for _, w := range s.workers {
			select {
			case <-w.done:
				return fmt.Errorf("the worker exited before it polled: %s", lastLine(string(w.log.buf)))
			default:
			}
		}
		if time.Now().After(deadline) {
			return errors.New("the worker did not poll its task queue within a minute")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// close stops everything that was started, workers first; safe on a
// partly started stack.
func (s *stack) close() {
	var wg sync.WaitGroup
	for _, w := range s.workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.stop() }()
	}
	wg.Wait()
	if s.tc != nil {
		s.tc.Close()
	}
	if s.fs != nil {
		_ = s.fs.Close()
	}
	if s.model != nil {
		s.model.Close()
	}
	if s.intel != nil {
		s.intel.Close()
	}
	if s.proxy != nil {
		s.proxy.Close()
	}
	if s.stopFS != nil {
		s.stopFS()
	}
	if s.temporal != nil {
		_ = s.temporal.Stop()
	}
	if s.cluster != nil {
		s.cluster.stop()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// startLog keeps the first max bytes of the worker's output, where its
// start-up error is. exec.Cmd serialises writes when Stdout and Stderr are
// the same writer, and the bench reads it only after the worker exited.
type startLog struct {
	buf []byte
	max int
}

func (l *startLog) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p[:min(len(p), max(l.max-len(l.buf), 0))]...)
	return len(p), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
