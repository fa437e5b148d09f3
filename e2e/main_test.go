// Package e2e runs the real worker and starter binaries against the real
// Temporal dev server, the official Firestore emulator and a local server
// that speaks the Gemini REST protocol, so the genai client code runs too.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/tools/mcp/mcptest"
)

var (
	bin      string // directory holding the built worker and starter
	tc       client.Client
	stack    []string // environment of the worker and starter
	model    = &switchable{}
	modelSrv *geminitest.Server
	intelSrv *providers
	bqGate   *gate
	fsHost   string
)

// gate forwards the worker's BigQuery requests to the emulator; a test may
// hold the next query (holdNextQuery) to catch the sub-agent mid-query.
type gate struct {
	*httptest.Server
	mu   sync.Mutex
	hold func() // runs, once, before the next query is forwarded
}

func newGate(host string) *gate {
	g := &gate{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host})
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var hold func()
		if r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/jobs") || strings.HasSuffix(r.URL.Path, "/queries")) {
			g.mu.Lock()
			hold, g.hold = g.hold, nil
			g.mu.Unlock()
		}
		if hold != nil {
			hold()
		}
		proxy.ServeHTTP(w, r)
	}))
	return g
}

// holdNextQuery makes the next query (a jobs.insert or jobs.query, a dry
// run's included) wait for f before it reaches the emulator; nil disarms.
func (g *gate) holdNextQuery(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold = f
}

// switchable lets each test install its own scripted model behind the one
// server the worker was started with, and logs when each request arrived
// and when its answer was ready.
type switchable struct {
	mu  sync.Mutex
	h   geminitest.Handler
	log []*served
}

// served is one request the stand-in answered: arrived is taken before the
// script runs, answered after it returned (zero while it runs), so a test
// can tell a request that arrived after some moment from one that was in
// flight at it.
type served struct {
	req               *geminitest.Request
	arrived, answered time.Time
}

// calls returns a snapshot of the requests served since the current test's
// use, in arrival order.
func (s *switchable) calls() []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]served, len(s.log))
	for i, c := range s.log {
		out[i] = *c
	}
	return out
}

// use installs h for test t (and starts a new log). When t ends, the runs it left busy (an
// activity or a child still pending) are terminated: a retry of theirs
// would otherwise reach the next test's scripted model and take its
// answers. Runs idle for a follow-up call no model and are left alone.
func (s *switchable) use(t *testing.T, h geminitest.Handler) {
	t.Cleanup(func() { endBusyRuns(t) })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h = h
	s.log = nil
}

// endBusyRuns terminates every running workflow with pending work.
func endBusyRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: `ExecutionStatus = "Running"`, PageSize: 1000})
	if err != nil {
		t.Logf("e2e: cannot list the runs left running: %v", err)
		return
	}
	for _, ex := range resp.GetExecutions() {
		id := ex.GetExecution().GetWorkflowId()
		d, err := tc.DescribeWorkflowExecution(ctx, id, ex.GetExecution().GetRunId())
		if err != nil || len(d.GetPendingActivities())+len(d.GetPendingChildren()) == 0 {
			continue
		}
		if err := tc.TerminateWorkflow(ctx, id, ex.GetExecution().GetRunId(), "e2e: left busy by "+t.Name()); err == nil {
			t.Logf("e2e: terminated %s, left busy by this test", id)
		}
	}
}

func (s *switchable) handle(r *geminitest.Request) geminitest.Reply {
	c := &served{req: r, arrived: time.Now()}
	s.mu.Lock()
	h := s.h
	s.log = append(s.log, c)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		c.answered = time.Now()
		s.mu.Unlock()
	}()
	if h == nil {
		return geminitest.Error(500, "e2e: no model script installed", "")
	}
	return h(r)
}

func TestMain(m *testing.M) {
	mcptest.ServeIfAsked() // the test binary is also a stranger's MCP server (mcp_test.go)
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "investigator-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	bin = dir
	build := exec.Command("go", "build", "-o", dir+"/", "./worker", "./starter", "./cmd/response-server")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build binaries: %v\n%s", err, out)
	}

	srv, err := testenv.StartTemporal(ctx)
	if err != nil {
		return 0, err
	}
	defer srv.Stop()
	var stopFS func()
	fsHost, stopFS, err = testenv.StartFirestore()
	if err != nil {
		return 0, err
	}
	defer stopFS()
	root, err := filepath.Abs("..")
	if err != nil {
		return 0, err
	}
	bqHost, stopBQ, err := testenv.StartBigQuery(testenv.Project, filepath.Join(root, "examples", "bigquery", "data.yaml"))
	if err != nil {
		return 0, err
	}
	defer stopBQ()
	bqGate = newGate(bqHost)
	defer bqGate.Close()
	modelSrv = geminitest.NewServer(model.handle)
	defer modelSrv.Close()
	intelSrv = newProviders()
	defer intelSrv.Close()

	stack = append(os.Environ(),
		"TEMPORAL_ADDRESS="+srv.FrontendHostPort(),
		"TEMPORAL_NAMESPACE=default",
		"FIRESTORE_EMULATOR_HOST="+fsHost,
		"GOOGLE_CLOUD_PROJECT="+testenv.Project,
		"GOOGLE_GEMINI_BASE_URL="+modelSrv.URL,
		"GEMINI_API_KEY=e2e-test-key",
		"GOOGLE_API_KEY=",
		"GOOGLE_GENAI_USE_VERTEXAI=",
		"LOG_LEVEL=warn",
		"URLSCAN_API_KEY=e2e-urlscan", "URLSCAN_BASE_URL="+intelSrv.URL,
		"VIRUSTOTAL_API_KEY=e2e-vt", "VIRUSTOTAL_BASE_URL="+intelSrv.URL,
		"OTX_API_KEY=", "ABUSEIPDB_API_KEY=",
		"BIGQUERY_EMULATOR_HOST="+bqGate.Listener.Addr().String(),
		"BIGQUERY_TABLES_CONFIG="+filepath.Join(root, "examples", "bigquery", "tables.yaml"),
		"BIGQUERY_RUNBOOKS_DIR="+filepath.Join(root, "examples", "bigquery", "runbooks"),
	)
	tc, err = client.Dial(client.Options{HostPort: srv.FrontendHostPort()})
	if err != nil {
		return 0, err
	}
	defer tc.Close()

	if err := startWorker(); err != nil {
		return 0, err
	}
	code := m.Run()
	// The worker stops cleanly on SIGTERM.
	if err := stopWorker(syscall.SIGTERM); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- worker log ---\n%s", workerLog.String())
	}
	return code, nil
}

// The worker process the tests run against; a test may kill and replace it.
var (
	workerCmd *exec.Cmd
	workerLog syncBuffer
)

// syncBuffer is a bytes.Buffer safe for the worker's stdout and stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startWorker() error { return startWorkerEnv(stack) }

// startWorkerEnv starts the worker with the environment env.
func startWorkerEnv(env []string) error {
	workerCmd = exec.Command(filepath.Join(bin, "worker"))
	workerCmd.Env = env
	workerCmd.Stdout, workerCmd.Stderr = &workerLog, &workerLog
	if err := workerCmd.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	return nil
}

// stopWorker signals the worker and waits for it; with SIGTERM it must exit
// cleanly within 20 s.
func stopWorker(sig syscall.Signal) error {
	_ = workerCmd.Process.Signal(sig)
	waited := make(chan error, 1)
	go func() { waited <- workerCmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil && sig == syscall.SIGTERM {
			return fmt.Errorf("worker exited with %v", err)
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = workerCmd.Process.Kill()
		return fmt.Errorf("worker did not stop within 20s of %v", sig)
	}
}

// result is one finished run of the starter.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// starter runs the starter binary with args, optionally feeding stdin.
func starter(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	return starterEnv(t, stack, stdin, args...)
}

// starterEnv runs the starter with the environment env.
func starterEnv(t *testing.T, env []string, stdin []byte, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "starter"), args...)
	cmd.Env = env
	cmd.Dir = ".."
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run starter %v: %v", args, err)
	}
	return r
}

// workflowIDFrom reads the workflow ID the starter printed.
func workflowIDFrom(t *testing.T, stdout string) string {
	t.Helper()
	for _, line := range strings.Split(stdout, "\n") {
		if id, ok := strings.CutPrefix(line, "Workflow ID: "); ok {
			return strings.TrimSpace(id)
		}
	}
	t.Fatalf("no workflow ID in output:\n%s", stdout)
	return ""
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// clientHistory reads one run's history ("" for the latest run) through c.
func clientHistory(t *testing.T, c client.Client, wfID, runID string) *historypb.History {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), wfID, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("read the history of %s: %v", wfID, err)
		}
		h.Events = append(h.Events, e)
	}
	return h
}
