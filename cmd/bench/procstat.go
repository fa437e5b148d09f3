package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; it
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds returns the user plus system CPU time of process pid.
func cpuSeconds(pid int) (float64, error) {
	st, err := readStat(pid)
	return st.cpu, err
}

// procStat is what the bench reads from /proc/PID/stat.
type procStat struct {
	comm string
	ppid int
	pgrp int     // its process group
	cpu  float64 // utime + stime, seconds
}

func readStat(pid int) (procStat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// "pid (comm) state ppid ..." where comm may hold spaces and ")".
	open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(string(raw[end+1:]))
	// Fields 4, 14 and 15 of the line (ppid, utime, stime) are 1, 11 and 12
	// after comm.
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	u, err2 := strconv.ParseUint(f[11], 10, 64)
	s, err3 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, fmt.Errorf("unreadable fields in /proc/%d/stat", pid)
	}
	return procStat{comm: string(raw[open+1 : end]), ppid: ppid, pgrp: pgrp, cpu: float64(u+s) / clockTicks}, nil
}

// descendantCPU sums the CPU time of every live process below this one,
// except the ones in skip, by command name (the dev server is "temporal",
// the Firestore emulator "java").
func descendantCPU(skip []int) map[string]float64 {
	entries, _ := os.ReadDir("/proc")
	stats := map[int]procStat{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			stats[pid] = st
			children[st.ppid] = append(children[st.ppid], pid)
		}
	}
	out := map[string]float64{}
	queue := []int{os.Getpid()}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			queue = append(queue, c)
			if !slices.Contains(skip, c) {
				out[stats[c].comm] += stats[c].cpu
			}
		}
	}
	return out
}

// statusKiB returns a "Name: N kB" field of /proc/PID/status.
func statusKiB(pid int, name string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", name, pid)
}

// resetPeakRSS sets VmHWM back to the current RSS (Linux 4.0 and later), so
// that the next reading is the peak of what follows.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
