package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// What a stack records under .data/pids, so that stop, status and a later
// start in another invocation find what runs:
//   <name>.pid       the pid (== pgid) of a service, or of a `dev` session
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
	if err := os.MkdirAll(s.PidDir(), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if key == "settings" { // hashes of secrets: no use to anyone else
		mode = 0o600
	}
	return writeFileAtomicMode(s.recordFile(name, key), []byte(value+"\n"), mode)
}

// forget removes a service's pid file and records.
func (s *Stack) forget(name string) {
	files, _ := filepath.Glob(filepath.Join(s.PidDir(), name+".*"))
	for _, f := range files {
		_ = os.Remove(f)
	}
}

// recordedPid is the recorded pid of name if its process group still has a
// live process (for a dev session: the process itself) and, when the
// leader is there, its command line still matches match: a pid the system
// gave to an unrelated process since is ignored. The leader may be gone
// while the group lives on (gcloud's JVM).
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

// runningDev is the pid of a dev session other than this process.
func (s *Stack) runningDev() (int, bool) {
	pid, ok := s.recordedPid(devSession, devMatch)
	if !ok || pid == os.Getpid() {
		return 0, false
	}
	return pid, true
}
