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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Alive reports whether a live process is in the process group. Exited
// processes that init has not reaped yet still count for kill(-pgid, 0),
// so /proc is read where there is one; see scanUntilSettled for why once
// is not enough, and live for zombies that still hold ports.
func Alive(pgid int) bool {
	if pgid <= 0 || syscall.Kill(-pgid, 0) != nil {
		return false
	}
	return scanUntilSettled(func() ([]int, bool, bool) { return scan(pgid) })
}

// scanUntilSettled reads the group (scan: its members, whether one is
// live, ok false without /proc) until a scan finds a live member, or two
// scans in a row find the same members, none live. One scan was not
// enough: /proc is listed before its entries are read, so a child forked
// after the listing by a member that then exits (a launcher leaving its
// server behind) was missed, and the group taken for dead while its
// server started; the next listing holds that child. After maxScans a
// group that keeps changing counts as alive.
func scanUntilSettled(scan func() (members []int, live, ok bool)) bool {
	const maxScans = 10
	var before []int
	for i := range maxScans {
		members, live, ok := scan()
		if !ok || live {
			return true
		}
		if i > 0 && slices.Equal(members, before) {
			return false
		}
		before = members
	}
	return true
}

// scan lists the group's members in /proc and reports whether one is live.
func scan(pgid int) (members []int, live, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, true, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if state, group, ok := ParseStat(stat); ok && group == pgid {
			members = append(members, pid)
			if liveState(state) || threadsLive(pid) {
				return members, true, true
			}
		}
	}
	return members, false, true
}

func liveState(state byte) bool { return state != 'Z' && state != 'X' }

// threadsLive reports whether a thread of pid other than its first is
// still live. A multi-threaded process (a Go server, a JVM) whose first
// thread exited shows that thread's state, 'Z', in /proc/PID/stat while
// its other threads run on, holding its files: the stack took such a
// server for gone while its port still answered.
func threadsLive(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue
		}
		if state, _, ok := ParseStat(stat); ok && liveState(state) {
			return true
		}
	}
	return false
}

// PidAlive reports whether pid is a live process (not a zombie, nor one
// whose first thread alone has exited).
func PidAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	state, _, ok := ParseStat(stat)
	return !ok || liveState(state) || threadsLive(pid)
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
