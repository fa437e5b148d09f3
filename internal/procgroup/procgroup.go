// Package procgroup watches and stops process groups. A service started in
// a group of its own (Setpgid) is stopped as a group: the Firestore
// emulator is a JVM grandchild of gcloud that outlives it and would keep
// its port.
package procgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Alive reports whether a process that is not a zombie is in the process
// group. Exited processes that init has not reaped yet still count for
// kill(-pgid, 0), so /proc is read where there is one.
func Alive(pgid int) bool {
	if pgid <= 0 || syscall.Kill(-pgid, 0) != nil {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if state, group, ok := ParseStat(stat); ok && group == pgid && state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}

// PidAlive reports whether pid is a live process (not a zombie).
func PidAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	state, _, ok := ParseStat(stat)
	return !ok || (state != 'Z' && state != 'X')
}

// ParseStat reads the state and process group of a /proc/PID/stat line:
// "pid (comm) state ppid pgrp ...", where comm may hold spaces and ")".
func ParseStat(stat []byte) (state byte, pgid int, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgid, err := strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pgid, true
}

// WaitGone polls until the group has no live process or timeout passes,
// and reports whether it is gone.
func WaitGone(pgid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		if !Alive(pgid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

// Stop sends SIGTERM to the group, then SIGKILL once grace has passed, and
// returns when no live process is left in it (or 2 s after the SIGKILL).
// It reports whether it had to kill.
func Stop(pgid int, grace time.Duration) (killed bool) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if WaitGone(pgid, grace) {
		return false
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	WaitGone(pgid, 2*time.Second)
	return true
}
