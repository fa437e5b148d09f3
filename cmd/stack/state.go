package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// What a stack records under .data/pids, so that stop, status and a later
// start in another invocation find what runs:
//   <name>.pid       the pid (== pgid) of a service, or of a `dev` session
//   <name>.start     that process's boot and start time (procStart)
//   <name>.settings  what a ReuseRecorded service was started with
//   <name>.binary    the checksum of its program file
//   <name>.<key>     a service's own record (firestore.target)
//   ports            the ports of the stack

// devSession is the pid file name of a `dev` session.
const devSession = "dev"

// devMatch is what a dev session's command line looks like (this program
// or, before it, scripts/dev.sh).
const devMatch = `(^|/)stack dev\b|dev\.sh`

func (s *Stack) pidFile(name string) string { return filepath.Join(s.PidDir(), name+".pid") }

func (s *Stack) recordFile(name, key string) string {
	return filepath.Join(s.PidDir(), name+"."+key)
}

func (s *Stack) logFile(name string) string { return filepath.Join(s.LogDir(), name+".log") }

func (s *Stack) readRecord(name, key string) string {
	b, err := os.ReadFile(s.recordFile(name, key))
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(b), "\n")
}

func (s *Stack) writeRecord(name, key, value string) error {
	if err := s.mkdirPrivate(s.PidDir()); err != nil {
		return err
	}
	return writeFileAtomicMode(s.recordFile(name, key), []byte(value+"\n"), 0o600)
}

// forget removes a service's pid file and records.
func (s *Stack) forget(name string) {
	files, _ := filepath.Glob(filepath.Join(s.PidDir(), name+".*"))
	for _, f := range files {
		_ = os.Remove(f)
	}
}

// recordPid records pid as name's, with the identity of the process
// (procStart) first: a pid file without it is never trusted (recordedPid).
func (s *Stack) recordPid(name string, pid int, start string) error {
	if start == "" {
		return fmt.Errorf("cannot read the start time of %s (pid %d), so a later stop could not tell it from a process that reused its pid", name, pid)
	}
	if err := s.writeRecord(name, "start", start); err != nil {
		return err
	}
	return s.writeRecord(name, "pid", strconv.Itoa(pid))
}

// recordedPid is the recorded pid of name if it is still the process the
// stack recorded and its process group (for a dev session: the process
// itself) still has a live process: the leader must have the recorded start
// (procStart: boot and start time) and a command line matching match. A pid
// the system gave to another process since, after a reboot too, is
// ignored: stop would signal its whole group. The leader may be gone while
// the group lives on (gcloud's JVM): then the record must be of this boot;
// the pgid stays taken while the group lives, so it is still ours unless
// the pids wrapped around meanwhile. A record without a start time (an
// older stack's) is never taken for a running service here: stop stops it
// only when olderRecordPid proves it, else leaves it alone, and says so
// when the pid's command line still matches.
func (s *Stack) recordedPid(name, match string) (int, bool) {
	b, err := os.ReadFile(s.pidFile(name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if name == devSession {
		if !procgroup.PidAlive(pid) {
			return 0, false
		}
	} else if !procgroup.Alive(pid) {
		return 0, false
	}
	recorded := s.readRecord(name, "start")
	leaderAlive := procgroup.PidAlive(pid)
	if recorded == "" {
		return 0, false
	}
	if leaderAlive {
		if start, ok := procStart(pid); !ok || start != recorded {
			return 0, false
		}
	} else if boot, _, _ := strings.Cut(recorded, "\n"); boot == "" || boot != bootID() {
		return 0, false
	}
	// A live pid whose command line cannot be read is not taken for ours: the
	// supervisor would rather start a service again than stop a stranger. A
	// leader that is gone has no command line, and its group is still ours.
	if match != "" {
		args, ok := cmdline(pid)
		if ok && !regexp.MustCompile(match).MatchString(args) || !ok && procgroup.PidAlive(pid) {
			return 0, false
		}
	}
	return pid, true
}

// olderRecordPid is the pid of name's record without a start time (an
// older stack wrote it) when the process it names is provably the one the
// stack started: a live group leader (every service leads its group), that
// started before the pid file was written (the stack wrote it right after
// the start, and a process given the pid later, after a reboot too, started
// after it; the pid was the service's when it was written), whose working
// directory is the stack's root (spawn's) and whose command line matches
// match. The command line alone proves nothing (`tail -f
// .data/logs/worker.log` matches "worker"); the start time does, unless the
// file was written again since (a copy of .data), which the other checks
// then guard.
func (s *Stack) olderRecordPid(name, match string) (int, bool) {
	info, err := os.Stat(s.pidFile(name))
	if err != nil || match == "" || s.readRecord(name, "start") != "" {
		return 0, false
	}
	b, err := os.ReadFile(s.pidFile(name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !procgroup.PidAlive(pid) {
		return 0, false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	if _, pgid, ok := procgroup.ParseStat(stat); !ok || pgid != pid {
		return 0, false
	}
	started, ok := procStartTime(pid)
	if !ok || started.After(info.ModTime().Add(startSlack)) {
		return 0, false
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	root, rerr := filepath.EvalSymlinks(s.Root)
	if err != nil || rerr != nil || cwd != root {
		return 0, false
	}
	args, ok := cmdline(pid)
	if !ok || !regexp.MustCompile(match).MatchString(args) {
		return 0, false
	}
	return pid, true
}

// startSlack is how far procStartTime may be off: the boot time is kept
// in whole seconds.
const startSlack = time.Second

// userHZ is the unit of a /proc/PID/stat start time: Linux exposes clock
// ticks to user space at 100 a second on every architecture Go supports
// here (USER_HZ), whatever the kernel's own HZ.
const userHZ = 100

// procStartTime is when the process pid started, by the wall clock: the
// boot time (/proc/stat btime) plus its start since boot (procStart).
func procStartTime(pid int) (time.Time, bool) {
	start, ok := procStart(pid)
	if !ok {
		return time.Time{}, false
	}
	_, ticks, _ := strings.Cut(start, "\n")
	n, err := strconv.ParseInt(ticks, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, found := strings.CutPrefix(line, "btime "); found {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(boot, 0).Add(time.Duration(n) * time.Second / userHZ), true
		}
	}
	return time.Time{}, false
}

// warnUnproven says, before a stop forgets name's record, that a live
// process it names was left alone for want of a recorded start time (a
// record an older stack wrote) and of proof it is the one recorded
// (olderRecordPid): it may still be the service.
func (s *Stack) warnUnproven(name, match string) {
	b, err := os.ReadFile(s.pidFile(name))
	if err != nil || s.readRecord(name, "start") != "" {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !procgroup.PidAlive(pid) {
		return
	}
	if args, ok := cmdline(pid); ok && match != "" && regexp.MustCompile(match).MatchString(args) {
		s.log.warn("%s: %s names pid %d without its start time (an older stack wrote it), so it was left running: if it is still the %s, stop it yourself", name, s.show(s.pidFile(name)), pid, name)
	}
}

// procStart identifies a process over time: the boot it runs in and its
// start time since that boot (/proc/PID/stat field 22), as two lines; a
// pid reused later, or after a reboot, has another. ok is false when it
// cannot be read.
func procStart(pid int) (string, bool) {
	boot := bootID()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil || boot == "" {
		return "", false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(stat[i+1:])) // from field 3, the state
	if len(f) < 20 {
		return "", false
	}
	if _, err := strconv.ParseUint(f[19], 10, 64); err != nil {
		return "", false
	}
	return boot + "\n" + f[19], true
}

// bootID names the running boot ("" when unknown).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// runningDev is the pid of a dev session other than this process.
func (s *Stack) runningDev() (int, bool) {
	pid, ok := s.recordedPid(devSession, devMatch)
	if !ok || pid == os.Getpid() {
		return 0, false
	}
	return pid, true
}
