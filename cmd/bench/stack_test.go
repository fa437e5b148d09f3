package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/internal/testenv"
)

// fakeWorkerEnv makes the test binary, started as a worker, poll the
// bench's task queue and nothing else, until SIGTERM.
const fakeWorkerEnv = "BENCH_TEST_FAKE_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(fakeWorkerEnv) != "" {
		os.Exit(fakeWorker())
	}
	os.Exit(m.Run())
}

func fakeWorker() int {
	c, err := client.Dial(client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS")})
	if err != nil {
		return 1
	}
	defer c.Close()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: "BenchTestIdle"})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, sdkactivity.RegisterOptions{Name: "BenchTestIdle"})
	if err := w.Run(worker.InterruptCh()); err != nil {
		return 1
	}
	return 0
}

// restartedStack runs two fake workers on a dev server and restarts them
// as the bench does; it returns the workers from before the restart.
func restartedStack(t *testing.T) (*stack, []*workerProc) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := testenv.StartTemporal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{temporal: srv, frontend: srv.FrontendHostPort(), dir: t.TempDir(),
		env: append(os.Environ(), fakeWorkerEnv+"=1", "TEMPORAL_ADDRESS="+srv.FrontendHostPort())}
	t.Cleanup(s.close)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(s.dir, "worker")); err != nil {
		t.Fatal(err)
	}
	if s.tc, err = client.Dial(client.Options{HostPort: s.frontend}); err != nil {
		t.Fatal(err)
	}
	if err := s.addWorkers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	old := append([]*workerProc(nil), s.workers...)
	if err := s.restartWorkers(ctx); err != nil {
		t.Fatal(err)
	}
	return s, old
}

// A restart as the bench measures it leaves none of the warm workers
// polling: with two workers, replacing one would let the other, warm,
// take part of the "first run after a worker restart".
func TestRestartWorkersReplacesEveryWorker(t *testing.T) {
	s, old := restartedStack(t)
	if len(s.workers) != len(old) {
		t.Fatalf("%d workers after the restart, want %d", len(s.workers), len(old))
	}
	for i, w := range old {
		select {
		case <-w.done:
		default:
			t.Errorf("worker %d (pid %d) still runs after the restart", i+1, w.pid())
		}
		for _, n := range s.workers {
			if n == w {
				t.Errorf("worker %d (pid %d) was kept, not restarted", i+1, w.pid())
			}
		}
	}
}

// The scale-out split counts the runs from before the restart too: a
// replaced worker's activities go to the worker that replaced it, not to
// "unknown".
func TestSplitAfterRestartNamesTheReplacedWorkers(t *testing.T) {
	s, old := restartedStack(t)
	by := func(ws ...*workerProc) *run {
		r := &run{wall: time.Second}
		for _, w := range ws {
			r.hist.activities = append(r.hist.activities, &activity{typ: actTurn, identity: fmt.Sprintf("%d@host@%s", w.pid(), taskQueue)})
		}
		return r
	}
	m := &measurements{historyRuns: []*run{by(old[0], old[0], old[1]), by(s.workers[0], s.workers[1])}}
	got := (&bench{s: s}).splitRow(m)
	if want := "worker 1: 3 (60%), worker 2: 2 (40%)"; got.Detail != want {
		t.Errorf("split over runs before and after the restart: %q, want %q", got.Detail, want)
	}
}
