package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/testenv"
)

// These tests run bin/stack, the supervisor behind `go tool task
// investigate`, `dev`, `stop`, `status` and `save`, on the real binaries,
// each on a stack of its own: private ports, data directory and bin
// directory, so they never meet a developer's stack or another test's
// services. The Gemini stand-in answers (no credentials).

// localStack is one stack's settings.
type localStack struct {
	root, data, bin string
	ports           map[string]int
	env             []string
}

var (
	standinOnce sync.Once
	standinDir  string
	standinErr  error
)

// stackBin returns a directory holding worker and starter (the ones TestMain
// built), gemini-standin, which the stack starts without credentials,
// slack-receiver (the intake's verdicts) and stack, the supervisor.
func stackBin(t *testing.T) string {
	t.Helper()
	standinOnce.Do(func() {
		dir := filepath.Join(bin, "stack")
		if standinErr = os.MkdirAll(dir, 0o755); standinErr != nil {
			return
		}
		build := exec.Command("go", "build", "-o", dir+"/", "./cmd/gemini-standin", "./cmd/stack", "./cmd/slack-receiver", "./cmd/response-server")
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			standinErr = fmt.Errorf("build gemini-standin, stack and slack-receiver: %v\n%s", err, out)
			return
		}
		for _, name := range []string{"worker", "starter"} {
			if standinErr = os.Symlink(filepath.Join(bin, name), filepath.Join(dir, name)); standinErr != nil {
				return
			}
		}
		standinDir = dir
	})
	require.NoError(t, standinErr)
	return standinDir
}

// newLocalStack prepares a stack on free ports and registers its stop (and,
// on failure, a dump of its logs) as cleanup.
func newLocalStack(t *testing.T) *localStack {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	temporal, err := testenv.TemporalCLI()
	require.NoError(t, err)
	bigquery, err := testenv.BigQueryEmulator()
	require.NoError(t, err)
	s := &localStack{root: root, data: t.TempDir(), bin: stackBin(t), ports: map[string]int{}}
	used := map[int]bool{}
	for _, name := range []string{"TEMPORAL", "TEMPORAL_UI", "FIRESTORE", "STANDIN", "BIGQUERY", "BIGQUERY_GRPC", "CODEC", "PUBSUB", "SLACK", "INTAKE"} {
		for {
			p, err := testenv.FreePort()
			require.NoError(t, err)
			if !used[p] {
				used[p] = true
				s.ports[name] = p
				break
			}
		}
	}
	// The caller's model, Temporal, Google Cloud and stack settings stay out.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if dropFromStackEnv(k) {
			continue
		}
		s.env = append(s.env, kv)
	}
	s.env = append(s.env, "STACK_DATA_DIR="+s.data, "STACK_BIN_DIR="+s.bin,
		"TEMPORAL_CLI="+temporal, "BIGQUERY_EMULATOR="+bigquery)
	for name, p := range s.ports {
		s.env = append(s.env, fmt.Sprintf("STACK_%s_PORT=%d", name, p))
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLogs(t)
		}
		if r := s.stack(t, 2*time.Minute, nil, "stop"); r.code != 0 {
			t.Errorf("cleanup: stack stop exited %d:\n%s", r.code, r.stdout)
		}
	})
	return s
}

func dropFromStackEnv(k string) bool {
	switch k {
	case "TEMPORAL_CLI", "BIGQUERY_EMULATOR":
		return true // set from testenv
	case "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI",
		"GOOGLE_CLOUD_PROJECT", "PAYLOAD_KEY_FILE", "ALERT", "INVESTIGATE_TEARDOWN", "INVESTIGATE_USER_CWD", "EVAL_USER_CWD",
		"PUBSUB_EMULATOR_HOST", "SLACK_WEBHOOK_URL":
		return true
	}
	for _, prefix := range []string{"TEMPORAL_", "FIRESTORE_", "BIGQUERY_", "STACK_"} {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// cmdRun is one finished run of a command.
type cmdRun struct {
	code   int
	stdout string // stdout and stderr together, in order
}

// stack runs bin/stack with args, the stack's environment plus extra, from
// the repository as the tasks do.
func (s *localStack) stack(t *testing.T, timeout time.Duration, extra []string, args ...string) cmdRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "stack"), args...)
	cmd.Dir = s.root
	cmd.Env = append(append([]string{}, s.env...), extra...)
	return runCmd(t, cmd)
}

// runCmd runs cmd with stdout and stderr together.
func runCmd(t *testing.T, cmd *exec.Cmd) cmdRun {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The services the stack starts write to their own logs; never wait on them.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	r := cmdRun{stdout: out.String()}
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		require.True(t, ok, "run %v: %v\n%s", cmd.Args, err, r.stdout)
		r.code = exit.ExitCode()
	}
	return r
}

// shell runs a command line the way a user types it after investigate ends:
// a fresh bash with only PATH and HOME, so the settings come from what the
// line sources.
func shell(t *testing.T, dir, line string) cmdRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	return runCmd(t, cmd)
}

func (s *localStack) dumpLogs(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join(s.data, "logs", "*"))
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("--- %s (end) ---\n%s", filepath.Base(f), b)
	}
}

// recordedPids reads the pids the stack recorded under its data directory.
func (s *localStack) recordedPids(t *testing.T) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s.data, "pids", "*.pid"))
	require.NoError(t, err)
	pids := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err, f)
		pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	return pids
}

// requireStopped checks that none of pids' process groups has a live process
// and that no stack port accepts connections.
func (s *localStack) requireStopped(t *testing.T, pids map[string]int) {
	t.Helper()
	out, err := exec.Command("ps", "-A", "-o", "pgid=", "-o", "stat=", "-o", "pid=", "-o", "args=").Output()
	require.NoError(t, err)
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(f[1], "Z") {
			continue
		}
		pgid, _ := strconv.Atoi(f[0])
		for name, pid := range pids {
			require.NotEqual(t, pid, pgid, "%s (process group %d) still has a live process: %s", name, pid, line)
		}
	}
	for name, p := range s.ports {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second)
		if err == nil {
			conn.Close()
		}
		require.Error(t, err, "port %d (%s) still accepts connections", p, name)
	}
	left, _ := filepath.Glob(filepath.Join(s.data, "pids", "*.pid"))
	require.Empty(t, left, "pid files left behind")
}

// closing holds what investigate prints at the end when the stack stays
// up: the Web UI link and two command lines (". FILE", "STARTER ask ID ...").
type closing struct{ webUI, settings, ask string }

func closingLines(t *testing.T, out string) closing {
	t.Helper()
	var c closing
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "  Web UI "); ok {
			c.webUI = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "  Settings "); ok {
			c.settings, _, _ = strings.Cut(strings.TrimSpace(v), "   (")
		}
		if v, ok := strings.CutPrefix(line, "  Ask "); ok {
			c.ask = strings.TrimSpace(v)
		}
	}
	require.NotEmpty(t, c.webUI, "no Web UI line at the end:\n%s", out)
	require.NotEmpty(t, c.settings, "no Settings line at the end:\n%s", out)
	require.NotEmpty(t, c.ask, "no Ask line at the end:\n%s", out)
	return c
}

// TestInvestigateLeavesStackUp runs the main job, then uses what it printed:
// the Web UI link, the settings file and the follow-up command. status
// lists the services, save saves the Firestore data now, and stop then
// stops every process investigate started. A restarted stack (dev) holds
// every Firestore document of the stopped one, so the alerts are listed and
// a follow-up on the earlier investigation works; stop then ends the dev
// session and its services.
func TestInvestigateLeavesStackUp(t *testing.T) {
	s := newLocalStack(t)
	run := s.stack(t, 5*time.Minute, []string{"INVESTIGATE_APPROVAL_TIMEOUT=3s"}, "investigate")
	require.Equal(t, 0, run.code, run.stdout)
	// The worker has the example response server (examples/mcp): the plan
	// asks to block the source address, which waits, and expires unanswered.
	require.Regexp(t, `ACTION AWAITS APPROVAL \S+ from step_\d+: response\.block_ip .*198\.51\.100\.23`, run.stdout)
	require.Contains(t, run.stdout, "(response.block_ip): expired: no decision within 3s")
	id := workflowIDFrom(t, run.stdout)
	end := closingLines(t, run.stdout)
	require.Contains(t, end.webUI, id)
	require.True(t, strings.HasPrefix(end.webUI, fmt.Sprintf("http://localhost:%d/", s.ports["TEMPORAL_UI"])), end.webUI)
	require.Contains(t, end.ask, id)

	pids := s.recordedPids(t)
	for _, name := range []string{"temporal", "firestore", "bigquery", "gemini-standin", "worker", "pubsub", "slack-receiver", "intake"} {
		require.Contains(t, pids, name, "investigate did not record %s", name)
	}
	status := s.stack(t, time.Minute, nil, "status")
	require.Equal(t, 0, status.code, status.stdout)
	for _, name := range []string{"temporal", "firestore", "bigquery", "gemini-standin", "worker"} {
		require.Regexp(t, fmt.Sprintf(`(?m)^%s +running \(pid %d\)$`, name, pids[name]), status.stdout)
	}
	// The server keeps its state with a write-ahead log, no fsync per
	// commit (cmd/stack/table.go): SQLite makes the -wal file only then.
	require.FileExists(t, filepath.Join(s.data, "temporal.db-wal"))
	saves, _ := filepath.Glob(filepath.Join(s.data, "firestore", "save-*"))
	require.Len(t, saves, 1, "investigate saves the Firestore data at the end")
	save := s.stack(t, time.Minute, nil, "save")
	require.Equal(t, 0, save.code, save.stdout)
	newer, _ := filepath.Glob(filepath.Join(s.data, "firestore", "save-*"))
	require.Len(t, newer, 1, "a newer save replaces the older")
	require.NotEqual(t, saves, newer)
	resp, err := http.Get(end.webUI)
	require.NoError(t, err, "the Web UI link investigate printed")
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, end.webUI)

	ask := shell(t, s.root, end.settings+"\n"+end.ask)
	require.Equal(t, 0, ask.code, "the printed follow-up command:\n%s", ask.stdout)
	require.Contains(t, ask.stdout, "==================== CONCLUSION", "the follow-up was answered")

	fsHost := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ports["FIRESTORE"]))
	before := firestoreDocuments(t, fsHost)
	requireCollection(t, before, "alerts")
	requireCollection(t, before, "entries")

	stop := s.stack(t, 2*time.Minute, nil, "stop")
	require.Equal(t, 0, stop.code, stop.stdout)
	s.requireStopped(t, pids)

	// Restart: dev, as `go tool task dev`, in the background.
	dev := s.startDev(t)
	after := firestoreDocuments(t, fsHost)
	for name, fields := range before {
		got, ok := after[name]
		require.True(t, ok, "%s is gone after the restart", name)
		require.True(t, reflect.DeepEqual(fields, got), "%s changed across the restart:\nbefore %v\nafter  %v", name, fields, got)
	}
	list := shell(t, s.root, end.settings+"\n"+filepath.Join(s.bin, "starter")+" alert list")
	require.Equal(t, 0, list.code, list.stdout)
	for _, f := range append(historyFiles(t), exampleAlert) {
		raw, err := os.ReadFile(filepath.Join(s.root, f))
		require.NoError(t, err)
		al, err := alerts.Parse(raw)
		require.NoError(t, err)
		require.Contains(t, list.stdout, al.ID, "alert list after the restart")
	}
	again := shell(t, s.root, end.settings+"\n"+end.ask)
	require.Equal(t, 0, again.code, "a follow-up on an investigation from before the restart:\n%s", again.stdout)
	require.Contains(t, again.stdout, "==================== CONCLUSION")

	pids = s.recordedPids(t)
	require.Contains(t, pids, "dev")
	stop = s.stack(t, 2*time.Minute, nil, "stop")
	require.Equal(t, 0, stop.code, stop.stdout)
	require.NoError(t, dev.wait(time.Minute), "dev after stop")
	s.requireStopped(t, pids)
}

// TestInvestigateTeardown: with INVESTIGATE_TEARDOWN=1 investigate stops
// everything it started before it exits, and says nothing of a running stack.
func TestInvestigateTeardown(t *testing.T) {
	s := newLocalStack(t)
	run := s.stack(t, 5*time.Minute, []string{"INVESTIGATE_TEARDOWN=1"}, "investigate")
	require.Equal(t, 0, run.code, run.stdout)
	workflowIDFrom(t, run.stdout)
	require.NotContains(t, run.stdout, "still running")
	// The pid files are gone with their services; the log lines name them.
	pids := map[string]int{}
	for _, line := range strings.Split(run.stdout, "\n") {
		var name string
		var pid int
		if n, _ := fmt.Sscanf(line, "stack: started %s (pid %d,", &name, &pid); n == 2 {
			pids[name] = pid
		}
	}
	for _, name := range []string{"temporal", "firestore", "bigquery", "gemini-standin", "worker"} {
		require.Contains(t, pids, name, "investigate did not start %s:\n%s", name, run.stdout)
	}
	s.requireStopped(t, pids)
	saves, _ := filepath.Glob(filepath.Join(s.data, "firestore", "save-*"))
	require.Len(t, saves, 1, "the Firestore data is saved when investigate stops the emulator")
}

// devSession is `stack dev` running in the background.
type devSession struct {
	cmd  *exec.Cmd
	done chan error
}

// startDev starts `stack dev` and waits until the stack it starts is up.
func (s *localStack) startDev(t *testing.T) *devSession {
	t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, "stack"), "dev")
	cmd.Dir = s.root
	cmd.Env = s.env
	log, err := os.Create(filepath.Join(t.TempDir(), "dev.out"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	d := &devSession{cmd: cmd, done: make(chan error, 1)}
	go func() { d.done <- cmd.Wait(); log.Close() }()
	t.Cleanup(func() {
		// Normally gone after stop; a failed test may leave it running.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = d.wait(time.Minute)
	})
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, _ := os.ReadFile(log.Name())
		if bytes.Contains(out, []byte("Local stack is running")) {
			return d
		}
		select {
		case err := <-d.done:
			d.done <- err
			t.Fatalf("stack dev exited (%v) before the stack was up:\n%s", err, out)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("stack dev did not bring the stack up within 3 minutes:\n%s", out)
		}
	}
}

func (d *devSession) wait(timeout time.Duration) error {
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(timeout):
		return fmt.Errorf("still running after %s", timeout)
	}
}

// firestoreDocuments reads every document of the stack's project from the
// emulator's REST API, walking subcollections, as name → fields.
func firestoreDocuments(t *testing.T, host string) map[string]any {
	t.Helper()
	base := "http://" + host + "/v1/"
	root := "projects/demo-investigator/databases/(default)/documents"
	docs := map[string]any{}
	var walk func(parent string)
	walk = func(parent string) {
		var ids struct {
			CollectionIDs []string `json:"collectionIds"`
		}
		firestorePost(t, base+parent+":listCollectionIds", `{"pageSize":1000}`, &ids)
		for _, col := range ids.CollectionIDs {
			token := ""
			for {
				var page struct {
					Documents []struct {
						Name   string         `json:"name"`
						Fields map[string]any `json:"fields"`
					} `json:"documents"`
					NextPageToken string `json:"nextPageToken"`
				}
				u := base + parent + "/" + url.PathEscape(col) + "?pageSize=300&showMissing=true&pageToken=" + url.QueryEscape(token)
				firestoreGet(t, u, &page)
				for _, d := range page.Documents {
					docs[d.Name] = d.Fields
					walk(d.Name)
				}
				if token = page.NextPageToken; token == "" {
					break
				}
			}
		}
	}
	walk(root)
	return docs
}

func requireCollection(t *testing.T, docs map[string]any, collection string) {
	t.Helper()
	for name := range docs {
		if strings.Contains(name, "/"+collection+"/") {
			return
		}
	}
	t.Fatalf("no document in a %q collection among %d documents", collection, len(docs))
}

func firestorePost(t *testing.T, u, body string, v any) {
	t.Helper()
	firestoreDo(t, http.MethodPost, u, strings.NewReader(body), v)
}

func firestoreGet(t *testing.T, u string, v any) {
	t.Helper()
	firestoreDo(t, http.MethodGet, u, nil, v)
}

// firestoreDo sends one request as the emulator's admin ("Bearer owner"),
// which listing collection IDs requires.
func firestoreDo(t *testing.T, method, u string, body io.Reader, v any) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer owner")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", resp.Request.URL, buf.String())
	require.NoError(t, json.Unmarshal(buf.Bytes(), v))
}
