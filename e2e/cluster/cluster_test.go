// Package cluster runs the production-shaped local cluster (bin/stack
// cluster: PostgreSQL, Temporal's four services as separate processes, two
// workers, two intakes and the emulators; design/deploy.md) and kills its
// parts. Opt-in: `go tool task cluster-test` sets CLUSTER_TEST=1 and builds
// the cluster's tools first; without it every test skips, so `go test
// ./...` stays as fast as before. Each test runs a cluster of its own on
// free ports with a private data directory, and answers the model itself
// (the offline stand-in's script behind a server that counts requests).
package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/gemini/standin"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/investigation"
)

var (
	root string // the repository
	bin  string // worker, starter, stack, slack-receiver built for these tests
)

func TestMain(m *testing.M) {
	if os.Getenv("CLUSTER_TEST") == "" {
		fmt.Println("cluster tests skipped: run them with 'go tool task cluster-test' (CLUSTER_TEST=1)")
		os.Exit(0)
	}
	var err error
	if root, err = filepath.Abs("../.."); err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "cluster-bin-")
	if err != nil {
		panic(err)
	}
	build := exec.Command("go", "build", "-o", dir+"/", "./worker", "./starter", "./cmd/stack", "./cmd/slack-receiver", "./cmd/gemini-standin")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	bin = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// portVars are the cluster's STACK_<VAR>_PORT settings (cmd/stack/table.go
// and cluster.go). INTAKE is followed by the second intake's port.
var portVars = []string{"POSTGRES", "TEMPORAL", "TEMPORAL_HTTP", "TEMPORAL_FRONTEND_MEMBERSHIP", "TEMPORAL_FRONTEND_METRICS",
	"TEMPORAL_HISTORY", "TEMPORAL_HISTORY_MEMBERSHIP", "TEMPORAL_HISTORY_METRICS",
	"TEMPORAL_MATCHING", "TEMPORAL_MATCHING_MEMBERSHIP", "TEMPORAL_MATCHING_METRICS",
	"TEMPORAL_WORKER", "TEMPORAL_WORKER_MEMBERSHIP", "TEMPORAL_WORKER_METRICS",
	"TEMPORAL_UI", "FIRESTORE", "BIGQUERY", "BIGQUERY_GRPC", "STANDIN", "PUBSUB", "SLACK", "CODEC", "INTAKE"}

// cluster is one test's cluster.
type cluster struct {
	t     *testing.T
	data  string
	ports map[string]int
	env   []string // of bin/stack, and of what the test runs against it
	tc    client.Client
	model *model
}

// option changes a cluster's environment before it starts.
type option func(*cluster)

// withEnv sets a variable of the stack's environment.
func withEnv(k, v string) option { return func(c *cluster) { c.env = setEnv(c.env, k, v) } }

// startCluster starts a cluster whose workers reach m, and registers its
// stop (and, on failure, the end of each log).
func startCluster(t *testing.T, m *model, opts ...option) *cluster {
	t.Helper()
	data, err := os.MkdirTemp("", "cluster-data-")
	require.NoError(t, err)
	// PostgreSQL runs as the postgres user when the tests run as root: it
	// must reach its data directory below this one.
	require.NoError(t, os.Chmod(data, 0o755))
	c := &cluster{t: t, data: data, ports: map[string]int{}, model: m}
	c.env = os.Environ()
	for _, k := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "SLACK_WEBHOOK_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "PAYLOAD_KEY_FILE", "STACK_PROFILE"} {
		c.env = setEnv(c.env, k, "")
	}
	used := map[int]bool{}
	for _, v := range portVars {
		for c.ports[v] == 0 || used[c.ports[v]] || used[c.ports[v]+1] {
			c.ports[v] = freePort(t, v == "INTAKE")
		}
		used[c.ports[v]] = true
		c.env = setEnv(c.env, "STACK_"+v+"_PORT", strconv.Itoa(c.ports[v]))
	}
	c.env = append(c.env, "STACK_ROOT="+root, "STACK_DATA_DIR="+data, "STACK_BIN_DIR="+bin,
		"GOOGLE_GEMINI_BASE_URL="+m.url, "GEMINI_API_KEY=cluster-test",
		"STACK_INTAKE_FLAGS=--no-group --max-running 25", "STACK_STOP_TIMEOUT=10")
	for _, o := range opts {
		o(c)
	}
	t.Cleanup(c.stop)
	began := time.Now()
	c.stack("cluster")
	t.Logf("cluster up in %s", time.Since(began).Round(100*time.Millisecond))
	c.tc, err = client.Dial(client.Options{HostPort: c.addr("TEMPORAL"), Namespace: "default"})
	require.NoError(t, err)
	return c
}

func (c *cluster) addr(v string) string { return fmt.Sprintf("127.0.0.1:%d", c.ports[v]) }

// stack runs bin/stack with the cluster's environment and fails the test
// when it fails.
func (c *cluster) stack(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(bin, "stack"), args...)
	cmd.Env, cmd.Dir = c.env, root
	out, err := cmd.CombinedOutput()
	require.NoError(c.t, err, "bin/stack %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

func (c *cluster) stop() {
	if c.tc != nil {
		c.tc.Close()
	}
	if c.t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(c.data, "logs", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			lines = lines[max(0, len(lines)-15):]
			for i, line := range lines {
				if len(line) > 400 {
					lines[i] = line[:400] + "…"
				}
			}
			c.t.Logf("--- %s (last lines) ---\n%s", filepath.Base(l), strings.Join(lines, "\n"))
		}
	}
	cmd := exec.Command(filepath.Join(bin, "stack"), "cluster-stop")
	cmd.Env, cmd.Dir = c.env, root
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Logf("cluster-stop: %v\n%s", err, out)
	}
	if os.Getenv("CLUSTER_KEEP_DATA") == "" {
		_ = os.RemoveAll(c.data)
	}
}

// kill sends SIGKILL to a service's whole process group, as a crash
// would, and waits until it is gone.
func (c *cluster) kill(name string) {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.data, "pids", name+".pid"))
	require.NoError(c.t, err, name)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(c.t, err)
	require.NoError(c.t, syscall.Kill(-pid, syscall.SIGKILL), name)
	require.Eventually(c.t, func() bool { return syscall.Kill(-pid, 0) != nil }, 10*time.Second, 20*time.Millisecond, "%s still runs", name)
}

// restart is `go tool task cluster` again: what runs is reused, what was
// killed starts anew.
func (c *cluster) restart() time.Duration {
	began := time.Now()
	c.stack("cluster")
	return time.Since(began)
}

// history is every event of one run.
func (c *cluster) history(id, run string) []*historypb.HistoryEvent {
	c.t.Helper()
	var out []*historypb.HistoryEvent
	it := c.tc.GetWorkflowHistory(context.Background(), id, run, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(c.t, err)
		out = append(out, e)
	}
	return out
}

// runs lists the executions a visibility query finds.
func (c *cluster) runs(query string) []*workflowservice.ListWorkflowExecutionsResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var pages []*workflowservice.ListWorkflowExecutionsResponse
	var token []byte
	for {
		resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000, NextPageToken: token})
		require.NoError(c.t, err)
		pages = append(pages, resp)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return pages
		}
	}
}

// status queries the admission workflow of the default task queue.
func (c *cluster) status() (intake.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st intake.Status
	v, err := c.tc.QueryWorkflow(ctx, intake.AdmissionID(investigation.DefaultQueue), "", intake.StatusQuery)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// model answers as the offline stand-in after an optional latency, and
// counts the requests it answered by identity (a hash of path and body):
// a completed call made again shows as a second answer to one identity.
type model struct {
	url     string
	latency atomic.Int64 // nanoseconds
	mu      sync.Mutex
	answers map[string]int
}

func newModel(t *testing.T, latency time.Duration) *model {
	m := &model{answers: map[string]int{}}
	m.setLatency(latency)
	demo := standin.Handler()
	srv := httptest.NewServer(geminitest.NewHTTPHandler(func(r *geminitest.Request) geminitest.Reply {
		time.Sleep(time.Duration(m.latency.Load()))
		reply := demo(r)
		if reply.Status == 0 || reply.Status == http.StatusOK {
			sum := sha256.Sum256(append([]byte(r.Path+"\n"), r.Body...))
			m.mu.Lock()
			m.answers[hex.EncodeToString(sum[:])]++
			m.mu.Unlock()
		}
		return reply
	}))
	t.Cleanup(srv.Close)
	m.url = srv.URL
	return m
}

func (m *model) setLatency(d time.Duration) { m.latency.Store(int64(d)) }

// counts: requests answered, and how many of them repeated an identity
// answered before.
func (m *model) counts() (answered, repeated int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.answers {
		answered += n
		repeated += n - 1
	}
	return answered, repeated
}

func setEnv(env []string, k, v string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	if v == "" {
		return out
	}
	return append(out, k+"="+v)
}

// freePort is a port nothing listens on (testenv.FreePort: below 32768,
// as Temporal keeps a membership port in a smallint column); with next, the
// port after it is free too (the second intake's).
func freePort(t *testing.T, next bool) int {
	t.Helper()
	for range 50 {
		p, err := testenv.FreePort()
		require.NoError(t, err)
		if !next {
			return p
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1)); err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no two free ports in a row")
	return 0
}
