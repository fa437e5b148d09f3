package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// One invocation at a time starts or stops services of a data directory:
// two cold starts at once each saw nothing running and both spawned; the
// loser's pid file could name a dead process while its twin ran on,
// recorded nowhere, past every stop. The lock is an flock on
// .data/pids/lock, held while services are started (up), stopped
// (cleanup, stop, clean) or saved, not while a session idles or the
// starter runs, so a second terminal waits seconds, not an investigation.
// The kernel drops it when its holder dies; a child never inherits it
// (Go opens files close-on-exec).

// defaultLockTimeout bounds the wait for another invocation
// (STACK_LOCK_TIMEOUT): longer than a cold cluster start or a worker's drain.
const defaultLockTimeout = 5 * time.Minute

func (s *Stack) lockFile() string { return filepath.Join(s.PidDir(), "lock") }

// lockData takes the data directory's lock, waiting for another holder up
// to s.LockTimeout (saying so once) or until ctx ends.
func lockData(ctx context.Context, s *Stack) (release func(), err error) {
	wait := s.LockTimeout
	if wait <= 0 {
		wait = defaultLockTimeout
	}
	deadline := time.Now().Add(wait)
	said := false
	for {
		// Made again each time: a clean may have removed it meanwhile.
		if err := s.mkdirPrivate(s.PidDir()); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(s.lockFile(), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// clean removes the pids directory, lock file included: a lock
			// on a file no longer at the path locks nothing another
			// invocation opens, so take the new one.
			if sameFile(f, s.lockFile()) {
				_ = f.Truncate(0)
				_, _ = f.WriteAt([]byte(fmt.Sprintf("%d %s\n", os.Getpid(), strings.Join(os.Args, " "))), 0)
				return func() { _ = f.Close() }, nil
			}
			f.Close()
			continue
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("cannot lock %s: %v", s.show(s.lockFile()), err)
		}
		holder := lockHolder(s)
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("another bin/stack (%s) has been starting or stopping services of %s for %s: try again once it ends (STACK_LOCK_TIMEOUT sets the wait)",
				holder, s.show(s.DataDir), wait)
		}
		if !said {
			s.log.info("waiting for another bin/stack (%s) to finish starting or stopping services of %s (up to %s)", holder, s.show(s.DataDir), wait)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// lockHolder is what the holder wrote: "pid N: its command line", cut
// short, from a file any local user could write (printable text only).
func lockHolder(s *Stack) string {
	b, _ := os.ReadFile(s.lockFile())
	pid, args, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	if pid == "" || strings.Trim(pid, "0123456789") != "" {
		return "pid unknown"
	}
	args = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, args)
	if len(args) > 80 {
		args = args[:80] + "..."
	}
	return "pid " + pid + ": " + args
}

// lock takes the data directory's lock for this supervisor; it nests (a
// clean holds it around the stop it runs). The returned func releases one
// level.
func (sv *supervisor) lock(ctx context.Context) (func(), error) {
	sv.lockMu.Lock()
	if sv.lockDepth > 0 {
		sv.lockDepth++
		sv.lockMu.Unlock()
		return sv.unlock, nil
	}
	sv.lockMu.Unlock()
	release, err := lockData(ctx, sv.s)
	if err != nil {
		return nil, err
	}
	sv.lockMu.Lock()
	sv.lockDepth, sv.release = 1, release
	sv.lockMu.Unlock()
	return sv.unlock, nil
}

func (sv *supervisor) unlock() {
	sv.lockMu.Lock()
	defer sv.lockMu.Unlock()
	if sv.lockDepth--; sv.lockDepth == 0 {
		sv.release()
		sv.release = nil
	}
}
