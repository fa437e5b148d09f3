package main

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// TestConcurrentColdStarts: two starts at once on one data directory, of a
// service that takes a moment to open its port, start it once; the other
// reuses it, the pid file names the one that answers, and a stop leaves no
// process behind. Without the lock both spawned, the loser died on the
// port while its probe passed on the winner's answer, and whichever wrote
// the pid file last hid the other from every stop.
func TestConcurrentColdStarts(t *testing.T) {
	tbl := []Service{fake("api", "slowhttp")}
	s, out := fakeStack(t, tbl)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		c := *s // another invocation: its own settings, the same directory
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = newSupervisor(&c, tbl, Dev).up(context.Background())
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0], out.String())
	require.NoError(t, errs[1], out.String())
	require.Equal(t, 1, strings.Count(out.String(), "started api"), out.String())
	require.Contains(t, out.String(), "fake api: reusing the one already answering")
	pid := pidOf(t, s, "api")
	require.True(t, procgroup.Alive(pid), "the recorded api runs")

	newSupervisor(s, tbl, Dev).stopRecorded()
	require.False(t, procgroup.Alive(pid))
	require.Error(t, dialOK(context.Background(), s.addr("API")), "nothing unrecorded still answers")
}

// TestLockWait: a start waits for an invocation that holds the lock, says
// so once, and goes on when it is released; past STACK_LOCK_TIMEOUT it
// fails in one sentence naming the holder.
func TestLockWait(t *testing.T) {
	tbl := []Service{fake("api", "http")}
	s, out := fakeStack(t, tbl)
	release, err := lockData(context.Background(), s)
	require.NoError(t, err)

	s.LockTimeout = 300 * time.Millisecond
	err = newSupervisor(s, tbl, Dev).up(context.Background())
	require.ErrorContains(t, err, "another bin/stack (pid ")
	require.ErrorContains(t, err, "has been starting or stopping services of "+s.show(s.DataDir)+" for 300ms: try again once it ends")
	require.Contains(t, out.String(), "waiting for another bin/stack (pid ")
	require.NotContains(t, out.String(), "started api")

	s.LockTimeout = time.Minute
	out.Reset()
	done := make(chan error, 1)
	go func() { done <- newSupervisor(s, tbl, Dev).up(context.Background()) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "waiting for another") }, 5*time.Second, 10*time.Millisecond)
	require.NotContains(t, out.String(), "started api")
	release()
	require.NoError(t, <-done, out.String())
	require.Equal(t, 1, strings.Count(out.String(), "waiting for another"), "said once")

	// A signal ends the wait.
	release, err = lockData(context.Background(), s)
	require.NoError(t, err)
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, newSupervisor(s, tbl, Dev).up(ctx), context.DeadlineExceeded)
}

// TestLockAfterClean: clean removes the pids directory, lock file and all,
// while it holds the lock; the invocation that waited takes a lock on the
// new file, which a third one then waits for.
func TestLockAfterClean(t *testing.T) {
	s, _ := testStack(t)
	first, err := lockData(context.Background(), s)
	require.NoError(t, err)
	type result struct {
		release func()
		err     error
	}
	got := make(chan result, 1)
	go func() {
		r, err := lockData(context.Background(), s)
		got <- result{r, err}
	}()
	time.Sleep(150 * time.Millisecond)
	require.NoError(t, os.RemoveAll(s.PidDir()))
	first()
	r := <-got
	require.NoError(t, r.err)
	second := r.release
	s.LockTimeout = 200 * time.Millisecond
	_, err = lockData(context.Background(), s)
	require.ErrorContains(t, err, "another bin/stack", "the second holds the lock on the file now at the path")
	second()
}
