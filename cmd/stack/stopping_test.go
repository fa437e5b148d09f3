package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// TestRestartStopsEveryInstanceFirst: a service of two instances restarted
// for new settings starts no new instance while an old one still drains.
// A new worker that saw an old one of other settings polling refused to
// start (worker/fingerprint.go), and the failed start took the other new
// one down with it.
func TestRestartStopsEveryInstanceFirst(t *testing.T) {
	tag := fmt.Sprintf("fakew%d", time.Now().UnixNano())
	settings := "v1"
	w := Service{Name: "worker", Title: "worker", Profiles: []Profile{Dev}, Count: map[Profile]int{Dev: 2},
		Reuse: ReuseRecorded, Settings: func(*Stack) string { return settings }, Match: tag,
		Ready: LogLine{Text: "Started Worker"}, Timeout: 10 * time.Second,
		Launch: func(s *Stack, k int) (Launch, error) {
			// Each lists the old ones running as it starts; on SIGTERM the
			// second drains twice as long as the first. (The log's first
			// line is the command: the ready line is quoted apart.)
			script := fmt.Sprintf(`pgrep -f '%s[-]v1[-]' > %s/seen-%s-%d; trap 'sleep %.1f; exit 0' TERM; echo Started' 'Worker; while :; do sleep 0.1; done`,
				tag, s.DataDir, settings, k, 0.6*float64(k))
			return Launch{Argv: []string{"sh", "-c", script, fmt.Sprintf("%s-%s-%d", tag, settings, k)}}, nil
		}}
	tbl := []Service{w}
	s, out := fakeStack(t, tbl)
	require.NoError(t, newSupervisor(s, tbl, Dev).up(context.Background()), out.String())
	old := []int{pidOf(t, s, "worker-1"), pidOf(t, s, "worker-2")}
	settings = "v2"
	require.NoError(t, newSupervisor(s, tbl, Dev).up(context.Background()), out.String())
	for k := 1; k <= 2; k++ {
		seen, err := os.ReadFile(filepath.Join(s.DataDir, fmt.Sprintf("seen-v2-%d", k)))
		require.NoError(t, err, out.String())
		require.Empty(t, strings.TrimSpace(string(seen)), "the new worker-%d started while an old one ran:\n%s", k, out.String())
		require.False(t, procgroup.Alive(old[k-1]))
	}
	require.Equal(t, 2, strings.Count(out.String(), "restarting the one running"))
}

// TestWorkerStopTimeout: the stack gives its workers a stop timeout below
// its wait for them and records that wait; a stop waits that long before
// SIGKILL, so a worker draining past STACK_STOP_TIMEOUT ends by itself.
// The worker's own default, 3 minutes, was cut off after 20 s.
func TestWorkerStopTimeout(t *testing.T) {
	s, _ := testStack(t)
	s.StopTimeout = 20 * time.Second
	s.buildEnv([]string{"PATH=/bin"})
	require.NoError(t, os.MkdirAll(s.BinDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(s.BinDir, "worker"), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.MkdirAll(s.DataDir, 0o755))
	for _, svc := range table {
		if svc.Name != "worker" && svc.Name != "eval-worker" {
			continue
		}
		l, err := svc.Launch(s, 1)
		require.NoError(t, err)
		var stop time.Duration
		for _, kv := range l.Env {
			if v, ok := strings.CutPrefix(kv, "WORKER_STOP_TIMEOUT="); ok {
				stop, err = time.ParseDuration(v)
				require.NoError(t, err)
			}
		}
		require.NotZero(t, stop, "%s: no WORKER_STOP_TIMEOUT: the worker's 3 minutes", svc.Name)
		wait, err := time.ParseDuration(l.Record["stopwait"])
		require.NoError(t, err, "%s records how long a stop waits for it", svc.Name)
		require.GreaterOrEqual(t, wait, stop+10*time.Second, "%s: the stack waits past its stop timeout, and its flushes", svc.Name)
	}

	// A caller's own stop timeout is kept, and waited for.
	s.buildEnv([]string{"PATH=/bin", "WORKER_STOP_TIMEOUT=3m"})
	for _, svc := range table {
		if svc.Name == "worker" {
			l, err := svc.Launch(s, 1)
			require.NoError(t, err)
			require.NotContains(t, strings.Join(l.Env, " "), "WORKER_STOP_TIMEOUT")
			wait, _ := time.ParseDuration(l.Record["stopwait"])
			require.Greater(t, wait, 3*time.Minute)
		}
	}
	// One too long to add the exit margin to is waited for whole, not
	// wrapped around into the stack's own stop timeout.
	s.buildEnv([]string{"PATH=/bin", "WORKER_STOP_TIMEOUT=2562047h47m16s"})
	require.Greater(t, workerStopWait(s), 2562046*time.Hour)

	// The recorded wait is what a stop gives it.
	drainer := Service{Name: "drainer", Title: "drainer", Profiles: []Profile{Dev}, Match: "drainer",
		Ready: LogLine{Text: "ready"}, Timeout: 10 * time.Second,
		Launch: func(s *Stack, _ int) (Launch, error) {
			script := fmt.Sprintf(`trap 'sleep 1.5; echo drained > %s/drained; exit 0' TERM; echo re''ady; while :; do sleep 0.1; done`, s.DataDir)
			return Launch{Argv: []string{"sh", "-c", script, "drainer"}, Record: map[string]string{"stopwait": "10s"}}, nil
		}}
	tbl := []Service{drainer}
	s, out := fakeStack(t, tbl)
	s.StopTimeout = 500 * time.Millisecond
	require.NoError(t, newSupervisor(s, tbl, Dev).up(context.Background()), out.String())
	newSupervisor(s, tbl, Dev).stopRecorded()
	require.NotContains(t, out.String(), "killed it")
	require.FileExists(t, filepath.Join(s.DataDir, "drained"), "it drained instead of being killed")
}

// TestJobTimeout: a job past its timeout (temporal-schema's 120 s) is
// stopped with its whole process group, and the start fails saying so.
func TestJobTimeout(t *testing.T) {
	tbl := []Service{{Name: "schema", Title: "schema", Profiles: []Profile{Dev}, Job: true, Match: "sh",
		Timeout: 500 * time.Millisecond, TimeoutVar: "SCHEMA",
		Launch: func(s *Stack, _ int) (Launch, error) {
			return Launch{Argv: []string{"sh", "-c", "echo $$ > " + s.DataDir + "/schema.pid; sleep 30 & sleep 30"}}, nil
		}}, fake("api", "http", "schema")}
	s, out := fakeStack(t, tbl)
	require.NoError(t, os.MkdirAll(s.DataDir, 0o755))
	began := time.Now()
	err := newSupervisor(s, tbl, Dev).up(context.Background())
	require.ErrorIs(t, err, errFailed)
	require.Less(t, time.Since(began), 10*time.Second, "the timeout bounds the job")
	require.Contains(t, out.String(), "schema failed: it did not finish within 500ms (STACK_SCHEMA_TIMEOUT), so it was stopped")
	require.NotContains(t, out.String(), "started api")
	b, err := os.ReadFile(s.DataDir + "/schema.pid")
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !procgroup.Alive(pid) }, 5*time.Second, 20*time.Millisecond, "its background sleep too")

	getenv = func(k string) string { return map[string]string{"STACK_SCHEMA_TIMEOUT": "0.3"}[k] }
	t.Cleanup(func() { getenv = defaultGetenv })
	out.Reset()
	require.ErrorIs(t, newSupervisor(s, tbl, Dev).up(context.Background()), errFailed)
	require.Contains(t, out.String(), "within 300ms")
}

// saver is a service whose BeforeStop (a save) fails while *broken.
func saver(broken *bool) Service {
	svc := fake("store", "http")
	svc.BeforeStop = func(s *Stack) error {
		if *broken {
			s.log.error("could not save the store")
			return errors.New("could not save the store")
		}
		return nil
	}
	return svc
}

// TestFailedSaveKeepsService: when the save before a stop fails, the
// service is left running and recorded, with what to do next, by `stop`
// and by the cleanup of a run that started it; once the save works it
// stops. A stop discarded the save's error and stopped the Firestore
// emulator, losing what it held.
func TestFailedSaveKeepsService(t *testing.T) {
	broken := true
	tbl := []Service{saver(&broken)}
	s, out := fakeStack(t, tbl)
	sv := newSupervisor(s, tbl, Dev)
	require.NoError(t, sv.up(context.Background()), out.String())
	pid := pidOf(t, s, "store")

	sv.cleanup()
	require.True(t, procgroup.Alive(pid), "the cleanup of the run that started it keeps it")
	newSupervisor(s, tbl, Dev).stopRecorded()
	require.True(t, procgroup.Alive(pid), "stop keeps it")
	require.FileExists(t, s.pidFile("store"), "still recorded, for the next stop")
	require.Contains(t, out.String(), "fake store: left running (pid "+strconv.Itoa(pid)+") because its data could not be saved: retry with 'go tool task save'")

	broken = false
	newSupervisor(s, tbl, Dev).stopRecorded()
	require.False(t, procgroup.Alive(pid))
	require.NoFileExists(t, s.pidFile("store"))
}

// TestStopForce: stop --force stops a service whose save fails, saying
// what is lost; the stop's result says whether everything stopped.
func TestStopForce(t *testing.T) {
	broken := true
	tbl := []Service{saver(&broken)}
	s, out := fakeStack(t, tbl)
	require.NoError(t, newSupervisor(s, tbl, Dev).up(context.Background()), out.String())
	pid := pidOf(t, s, "store")
	require.False(t, newSupervisor(s, tbl, Dev).stopRecorded(), "kept: the stop fails")
	sv := newSupervisor(s, tbl, Dev)
	sv.force = true
	require.True(t, sv.stopRecorded())
	require.False(t, procgroup.Alive(pid))
	require.Contains(t, out.String(), "fake store: stopping it without a save (--force): what changed since the last save is lost")
}

// TestStopDevWaitsPastAHugeStopWait: a worker's recorded stop wait at the
// limit (WORKER_STOP_TIMEOUT=2562047h47m16s) wrapped the dev session's
// deadline around into the past, and stop went on without waiting for the
// session to stop its services.
func TestStopDevWaitsPastAHugeStopWait(t *testing.T) {
	tbl := []Service{fake("worker", "http")}
	s, _ := fakeStack(t, tbl)
	dev := exec.Command("sh", "-c", "trap 'sleep 1; exit 0' TERM; while :; do sleep 0.05; done", "dev.sh")
	require.NoError(t, dev.Start())
	done := make(chan struct{})
	go func() { _ = dev.Wait(); close(done) }()
	t.Cleanup(func() { _ = dev.Process.Kill(); <-done })
	time.Sleep(100 * time.Millisecond) // its trap is set
	require.NoError(t, recordTestPid(s, devSession, dev.Process.Pid))
	require.NoError(t, s.writeRecord("worker", "pid", "999999999"))
	require.NoError(t, s.writeRecord("worker", "stopwait", "2562047h47m16s"))

	require.True(t, newSupervisor(s, tbl, Dev).stopDev())
	select {
	case <-done:
	case <-time.After(100 * time.Millisecond):
		t.Fatal("stopDev returned while the dev session still ran")
	}
}
