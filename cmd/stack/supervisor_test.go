package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// The test binary doubles as the services of the tests' tables: with
// STACK_TEST_ROLE set it plays one instead of running the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("STACK_TEST_ROLE") {
	case "":
		os.Exit(m.Run())
	case "http": // answers "Ok" on STACK_TEST_ADDR
		if f := os.Getenv("STACK_TEST_FILE"); f != "" { // a file of its own, with the key it was given
			if err := os.WriteFile(f, []byte(os.Getenv("GEMINI_API_KEY")), 0o666); err != nil {
				os.Exit(5)
			}
		}
		fmt.Println("Started Worker")
		http.ListenAndServe(os.Getenv("STACK_TEST_ADDR"), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte("Ok"))
		}))
		os.Exit(1)
	case "slowhttp": // "http" after a moment, like a JVM: two cold starts both see nothing
		time.Sleep(400 * time.Millisecond)
		fmt.Println("Started Worker")
		if err := http.ListenAndServe(os.Getenv("STACK_TEST_ADDR"), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte("Ok"))
		})); err != nil {
			fmt.Println(err)
		}
		os.Exit(1)
	case "launcher": // like gcloud: starts the server in its group, then leaves
		cmd := exec.Command(os.Args[0], os.Args[1:]...)
		cmd.Env = append(os.Environ(), "STACK_TEST_ROLE=http")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			os.Exit(2)
		}
		os.Exit(0)
	case "crash":
		fmt.Println("fatal: cannot open the database")
		os.Exit(3)
	case "leader-exits": // its first thread ends, its others serve on
		go func() {
			http.ListenAndServe(os.Getenv("STACK_TEST_ADDR"), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("Ok")) }))
		}()
		time.Sleep(200 * time.Millisecond)
		syscall.Syscall(syscall.SYS_EXIT, 0, 0, 0) // this thread only (init locked main to it)
		select {}
	case "grpchealth": // a Temporal frontend to the health check, on STACK_TEST_ADDR
		l, err := net.Listen("tcp", os.Getenv("STACK_TEST_ADDR"))
		if err != nil {
			os.Exit(6)
		}
		srv, hs := grpc.NewServer(), health.NewServer()
		hs.SetServingStatus("temporal.api.workflowservice.v1.WorkflowService", healthpb.HealthCheckResponse_SERVING)
		healthpb.RegisterHealthServer(srv, hs)
		_ = srv.Serve(l)
		os.Exit(1)
	case "silent": // alive, never ready
		time.Sleep(time.Hour)
	}
	os.Exit(4)
}

// A "leader-exits" service ends its first thread: main must stay on it.
func init() {
	if os.Getenv("STACK_TEST_ROLE") == "leader-exits" {
		runtime.LockOSThread()
	}
}

// fake is a service of a test table played by the test binary.
func fake(name, role string, needs ...string) Service {
	v := strings.ToUpper(name)
	return Service{
		Name: name, Title: "fake " + name, Profiles: []Profile{Dev}, Needs: needs,
		Ports: []Port{{Var: v}},
		Launch: func(s *Stack, _ int) (Launch, error) {
			return Launch{
				Argv: []string{os.Args[0], "-test.run=^$"},
				Env:  []string{"STACK_TEST_ROLE=" + role, "STACK_TEST_ADDR=" + s.addr(v)},
			}, nil
		},
		Ready:   HTTP{Port: v, Path: "/", BodyPrefix: "Ok"},
		Timeout: 20 * time.Second,
		Match:   "stack.test",
	}
}

// fakeWorker is reused only with the same settings.
func fakeWorker(settings *string, needs ...string) Service {
	w := fake("worker", "http", needs...)
	w.Ports = nil
	w.Ready = LogLine{Text: "Started Worker"}
	w.Reuse = ReuseRecorded
	w.Settings = func(*Stack) string { return *settings }
	w.Launch = func(s *Stack, _ int) (Launch, error) {
		return Launch{
			Argv: []string{os.Args[0], "-test.run=^$"},
			Env:  []string{"STACK_TEST_ROLE=http", "STACK_TEST_ADDR=127.0.0.1:0"},
		}, nil
	}
	return w
}

// syncBuffer is what a test reads while a session writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *syncBuffer) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Reset()
}

func fakeStack(t *testing.T, tbl []Service) (*Stack, *syncBuffer) {
	t.Helper()
	s, _ := testStack(t)
	out := &syncBuffer{}
	s.log = newLogger(out, out)
	s.env = os.Environ()
	for _, svc := range tbl {
		for _, p := range svc.Ports {
			s.ports[p.Var] = freePort(t)
		}
	}
	t.Cleanup(func() {
		s.SaveOnStop = false
		newSupervisor(s, tbl, Dev).stopRecorded()
	})
	return s, out
}

func pidOf(t *testing.T, s *Stack, name string) int {
	t.Helper()
	b, err := os.ReadFile(s.pidFile(name))
	require.NoError(t, err, "pid file of %s", name)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return pid
}

// TestUpReuseStop: a stack starts in order and records its services; a
// second invocation reuses all of them; a worker with other settings is
// restarted; stop from a third invocation ends every process group, the
// grandchild a launcher left included, and frees the ports.
func TestUpReuseStop(t *testing.T) {
	settings := "model A"
	tbl := []Service{fake("db", "launcher"), fake("api", "http", "db"), fakeWorker(&settings, "api")}
	s, out := fakeStack(t, tbl)
	ctx := context.Background()

	first := newSupervisor(s, tbl, Dev)
	require.NoError(t, first.up(ctx), out.String())
	log := out.String()
	require.Regexp(t, `(?s)started db .*fake db: ready in [0-9.]+s on .*started api .*fake api: ready .*started worker .*worker: ready`, log)
	pids := map[string]int{}
	for _, n := range []string{"db", "api", "worker"} {
		pids[n] = pidOf(t, s, n)
		require.True(t, procgroup.Alive(pids[n]), n)
	}
	require.Equal(t, "model A", s.readRecord("worker", "settings"))
	for _, f := range []string{s.recordFile("worker", "settings"), s.settingsKeyFile()} {
		if f == s.settingsKeyFile() {
			s.settingsKey()
		}
		fi, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "%s: hashes of secrets, and their key, are the user's alone", f)
	}
	require.FileExists(t, s.EnvFile())
	require.FileExists(t, s.portsFile())

	out.Reset()
	second := newSupervisor(s, tbl, Dev)
	require.NoError(t, second.up(ctx), out.String())
	require.NotContains(t, out.String(), "started ")
	require.Contains(t, out.String(), "fake db: reusing the one already answering")
	require.Contains(t, out.String(), fmt.Sprintf("worker: reusing the one already running (pid %d)", pids["worker"]))
	require.Empty(t, second.started)

	out.Reset()
	settings = "model B"
	third := newSupervisor(s, tbl, Dev)
	require.NoError(t, third.up(ctx), out.String())
	require.Contains(t, out.String(), "worker: restarting the one running")
	require.Contains(t, out.String(), "other settings (model A; this run: model B)")
	require.NotEqual(t, pids["worker"], pidOf(t, s, "worker"))
	require.False(t, procgroup.Alive(pids["worker"]), "the old worker is gone")
	pids["worker"] = pidOf(t, s, "worker")
	require.Equal(t, []string{"worker"}, names(third.started))

	out.Reset()
	newSupervisor(s, tbl, Dev).stopRecorded()
	require.Regexp(t, `(?s)stopping worker .*stopping api .*stopping db `, out.String(), "each after what needs it")
	for n, pid := range pids {
		require.False(t, procgroup.Alive(pid), "%s's process group still has a live process", n)
		require.NoFileExists(t, s.pidFile(n))
	}
	for v := range s.ports {
		require.Error(t, dialOK(ctx, s.addr(v)), "port %s still open", v)
	}
	out.Reset()
	newSupervisor(s, tbl, Dev).stopRecorded()
	require.Contains(t, out.String(), "nothing recorded under")
}

// TestCleanupStopsOnlyWhatItStarted: services that were running before are
// reused and left alone.
func TestCleanupStopsOnlyWhatItStarted(t *testing.T) {
	settings := "x"
	tbl := []Service{fake("db", "http"), fake("api", "http", "db"), fakeWorker(&settings, "api")}
	s, out := fakeStack(t, tbl)
	ctx := context.Background()
	onlyDB := newSupervisor(s, tbl[:1], Dev)
	require.NoError(t, onlyDB.up(ctx), out.String())
	db := pidOf(t, s, "db")

	sv := newSupervisor(s, tbl, Dev)
	require.NoError(t, sv.up(ctx), out.String())
	api, worker := pidOf(t, s, "api"), pidOf(t, s, "worker")
	sv.cleanup()
	require.False(t, procgroup.Alive(api))
	require.False(t, procgroup.Alive(worker))
	require.True(t, procgroup.Alive(db), "the database was running before: it stays")
	require.FileExists(t, s.pidFile("db"))
	require.NoFileExists(t, s.pidFile("api"))
}

// TestUpFailures: a service that dies, one that never answers, and a port
// held by something else each stop the start with a reason; what was
// started is stopped by cleanup.
func TestUpFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("exits during startup", func(t *testing.T) {
		tbl := []Service{fake("db", "http"), fake("api", "crash", "db"), fake("web", "http", "api")}
		s, out := fakeStack(t, tbl)
		sv := newSupervisor(s, tbl, Dev)
		require.ErrorIs(t, sv.up(ctx), errFailed)
		require.Contains(t, out.String(), "api exited during startup")
		require.Contains(t, out.String(), "fatal: cannot open the database", "the end of its log")
		require.NotContains(t, out.String(), "started web")
		db := pidOf(t, s, "db")
		sv.cleanup()
		require.False(t, procgroup.Alive(db))
	})
	t.Run("never ready", func(t *testing.T) {
		tbl := []Service{fake("db", "silent")}
		tbl[0].Timeout = 300 * time.Millisecond
		s, out := fakeStack(t, tbl)
		sv := newSupervisor(s, tbl, Dev)
		require.ErrorIs(t, sv.up(ctx), errFailed)
		require.Contains(t, out.String(), "db was not ready within 300ms")
		require.NoFileExists(t, s.pidFile("db"), "stopped and forgotten")

		tbl[0].ReadyOnTimeout = true
		out.Reset()
		require.NoError(t, newSupervisor(s, tbl, Dev).up(ctx))
		require.Contains(t, out.String(), "db: running (not ready by its probe after 300ms; continuing)")
	})
	t.Run("port taken", func(t *testing.T) {
		tbl := []Service{fake("db", "http")}
		s, out := fakeStack(t, tbl)
		l, err := net.Listen("tcp", s.addr("DB"))
		require.NoError(t, err)
		defer l.Close()
		require.ErrorIs(t, newSupervisor(s, tbl, Dev).up(ctx), errFailed)
		require.Contains(t, out.String(), fmt.Sprintf("port %d is in use, but not by the fake db (move it with STACK_DB_PORT)", s.port("DB")))
	})
	t.Run("other ports while running", func(t *testing.T) {
		tbl := []Service{fake("db", "http")}
		s, out := fakeStack(t, tbl)
		require.NoError(t, newSupervisor(s, tbl, Dev).up(ctx))
		moved := *s
		moved.ports = map[string]int{"DB": freePort(t)}
		require.ErrorIs(t, newSupervisor(&moved, tbl, Dev).up(ctx), errFailed)
		require.Contains(t, out.String(), "a stack on other ports is running")

		// The same ports, recorded in another order (as scripts/stack.sh did).
		require.NoError(t, os.WriteFile(s.portsFile(), []byte(fmt.Sprintf("STACK_OLD_PORT=1\nSTACK_DB_PORT=%d\n", s.port("DB"))), 0o644))
		require.NoError(t, newSupervisor(s, tbl, Dev).up(ctx))
	})
}

// TestRecordedPid: a pid file whose process is gone, or whose pid now
// belongs to another program, is not a running service; a group whose
// leader left (gcloud) still is.
func TestRecordedPid(t *testing.T) {
	s, _ := testStack(t)
	require.NoError(t, os.MkdirAll(s.PidDir(), 0o755))
	_, ok := s.recordedPid("db", "sleep")
	require.False(t, ok, "no pid file")

	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	require.NoError(t, recordTestPid(s, "db", cmd.Process.Pid))
	pid, ok := s.recordedPid("db", "sleep")
	require.True(t, ok)
	require.Equal(t, cmd.Process.Pid, pid)
	_, ok = s.recordedPid("db", "firestore")
	require.False(t, ok, "the pid belongs to another program now")

	p, err := spawn([]string{"sh", "-c", "sleep 300 & exit 0"}, os.Environ(), s.Root, s.logFile("launcher"), nil)
	require.NoError(t, err)
	defer procgroup.Stop(p.pid, time.Second)
	<-p.done
	require.NoError(t, s.recordPid("fs", p.pid, p.start))
	_, ok = s.recordedPid("fs", "firestore")
	require.True(t, ok, "the leader is gone, its group runs on")

	cmd.Process.Kill()
	cmd.Wait()
	_, ok = s.recordedPid("db", "sleep")
	require.False(t, ok, "gone")
}

// TestStopLeaderThreadExited: a service whose first thread exited while its
// others serve has an empty /proc/PID/cmdline; it is still the recorded
// service, and stop ends it and frees its port rather than forgetting it.
func TestStopLeaderThreadExited(t *testing.T) {
	tbl := []Service{fake("db", "leader-exits")}
	s, out := fakeStack(t, tbl)
	ctx := context.Background()
	require.NoError(t, newSupervisor(s, tbl, Dev).up(ctx), out.String())
	pid := pidOf(t, s, "db")
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		st, _, ok := procgroup.ParseStat(b)
		return ok && st == 'Z'
	}, 10*time.Second, 10*time.Millisecond, "the first thread exits")
	require.NoError(t, dialOK(ctx, s.addr("DB")), "it serves on")
	_, ok := s.recordedPid("db", "stack.test")
	require.True(t, ok, "still the recorded service")

	out.Reset()
	newSupervisor(s, tbl, Dev).stopRecorded()
	require.Contains(t, out.String(), "stopping db")
	require.False(t, procgroup.Alive(pid), "stopped")
	require.Error(t, dialOK(ctx, s.addr("DB")), "its port is free")
}

// TestJob: a Job runs to completion before what needs it starts, and is
// never recorded; a failing one stops the start with the end of its log.
func TestJob(t *testing.T) {
	job := func(line string) Service {
		return Service{Name: "schema", Title: "schema", Profiles: []Profile{Dev}, Job: true, Match: "sh",
			Launch: func(s *Stack, _ int) (Launch, error) {
				return Launch{Argv: []string{"sh", "-c", line + " > " + s.DataDir + "/schema.done"}}, nil
			}}
	}
	tbl := []Service{job("echo migrated"), fake("api", "http", "schema")}
	s, out := fakeStack(t, tbl)
	require.NoError(t, newSupervisor(s, tbl, Dev).up(context.Background()), out.String())
	require.FileExists(t, s.DataDir+"/schema.done")
	require.Regexp(t, `(?s)schema: done.*started api`, out.String())
	require.NoFileExists(t, s.pidFile("schema"))

	tbl = []Service{job("echo 'relation exists' >&2; exit 1"), fake("api", "http", "schema")}
	s, out = fakeStack(t, tbl)
	require.ErrorIs(t, newSupervisor(s, tbl, Dev).up(context.Background()), errFailed)
	require.Contains(t, out.String(), "schema failed: exit status 1")
	require.Contains(t, out.String(), "relation exists")
	require.NotContains(t, out.String(), "started api")
}

// startDev runs a dev session on tbl in the background; its status comes
// on the channel.
func startDev(t *testing.T, s *Stack, tbl []Service, out *syncBuffer) <-chan int {
	t.Helper()
	done := make(chan int, 1)
	go func() { done <- dev(func(bool) (*Stack, error) { return s, nil }, tbl, s.log, out) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "Local stack is running") },
		30*time.Second, 20*time.Millisecond, "the session did not come up:\n%s", out)
	return done
}

func exitOf(t *testing.T, done <-chan int) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("the dev session did not end")
		return -1
	}
}

// TestDev: Ctrl-C ends a session with status 0 after it stopped what it
// started, and leaves alone what it reused; a service of the session that
// dies ends it with status 1 and the end of that service's log; a second
// session is refused while one runs.
func TestDev(t *testing.T) {
	tbl := []Service{fake("db", "http"), fake("api", "http", "db")}
	s, out := fakeStack(t, tbl)
	require.NoError(t, newSupervisor(s, tbl[:1], Dev).up(context.Background()))
	db := pidOf(t, s, "db")

	done := startDev(t, s, tbl, out)
	require.Equal(t, strconv.Itoa(os.Getpid()), strings.TrimSpace(s.readRecord(devSession, "pid")), "the session records itself")
	api := pidOf(t, s, "api")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	require.Equal(t, 0, exitOf(t, done))
	require.Contains(t, out.String(), "shutting down...")
	require.False(t, procgroup.Alive(api))
	require.True(t, procgroup.Alive(db), "running before the session: left running")
	require.NoFileExists(t, s.pidFile(devSession))

	out.Reset()
	done = startDev(t, s, tbl, out)
	api = pidOf(t, s, "api")
	require.NoError(t, syscall.Kill(-api, syscall.SIGKILL))
	require.Equal(t, 1, exitOf(t, done))
	require.Contains(t, out.String(), "api stopped unexpectedly")

	// Another session holds dev.pid (its command line is what a session's is).
	other := exec.Command("bash", "-c", `exec -a "stack dev" sleep 300`)
	require.NoError(t, other.Start())
	defer func() { other.Process.Kill(); other.Wait() }()
	require.Eventually(t, func() bool { a, _ := cmdline(other.Process.Pid); return strings.HasPrefix(a, "stack dev") }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, recordTestPid(s, devSession, other.Process.Pid))
	out.Reset()
	require.Equal(t, 1, dev(func(bool) (*Stack, error) { return s, nil }, tbl, s.log, out))
	require.Contains(t, out.String(), fmt.Sprintf("a 'go tool task dev' session is already running (pid %d)", other.Process.Pid))
}

// recordTestPid records a live process as name's, as a start does.
func recordTestPid(s *Stack, name string, pid int) error {
	start, _ := procStart(pid)
	return s.recordPid(name, pid, start)
}
