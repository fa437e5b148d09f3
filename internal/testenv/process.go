package testenv

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopGroup ends the process group pgid: SIGTERM, then SIGKILL if it has not
// gone within stopGrace. It returns once no live process is left in the group
// (the JVM can outlive gcloud by a few seconds) and host's port is free.
func stopGroup(pgid int, done <-chan struct{}, host string) {
	signalGroup(pgid, syscall.SIGTERM)
	if !waitGroupGone(pgid, stopGrace) {
		signalGroup(pgid, syscall.SIGKILL)
		if !waitGroupGone(pgid, killWait) {
			slog.Warn("testenv: the Firestore emulator did not exit after SIGKILL", "pgid", pgid)
		}
	}
	select {
	case <-done:
	case <-time.After(killWait):
		slog.Warn("testenv: the Firestore emulator's output is still open after stop", "pgid", pgid)
	}
	deadline := time.Now().Add(killWait)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", host, 200*time.Millisecond)
		if err != nil {
			return
		}
		conn.Close()
		time.Sleep(100 * time.Millisecond)
	}
	slog.Warn("testenv: the Firestore emulator port is still in use after stop", "host", host)
}

func signalGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		slog.Warn("testenv: cannot signal the Firestore emulator", "pgid", pgid, "signal", sig, "error", err)
	}
}

// waitGroupGone polls until no live process is left in the group or timeout
// passes, and reports whether the group is gone.
func waitGroupGone(pgid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if !groupAlive(pgid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// groupAlive reports whether a process that is not a zombie is in the
// process group. It reads /proc where there is one, since exited children
// that init has not reaped yet still count for kill(-pgid, 0).
func groupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // the process has just gone
		}
		state, group, ok := parseStat(stat)
		if ok && group == pgid && state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}

// parseStat reads the state and process group from a /proc/PID/stat line:
// "pid (comm) state ppid pgrp ...", where comm may contain spaces and ")".
func parseStat(stat []byte) (state byte, pgid int, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 3 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	pgid, err := strconv.Atoi(fields[2])
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], pgid, true
}
