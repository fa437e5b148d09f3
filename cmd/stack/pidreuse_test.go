package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// after a reboot, .data/pids/worker.pid names a pid the system has
// since given to the user's own shell job (a job-control shell makes every
// job a group leader), e.g. `tail -f .data/logs/worker.log`. `stop` must
// not kill it: its command line merely contains "worker".
func TestStopSparesAJobThatReusedAPid(t *testing.T) {
	s, _ := testStack(t)
	require.NoError(t, os.MkdirAll(s.PidDir(), 0o755))
	victim := exec.Command("sh", "-c", "sleep 300; true", "tail -f .data/logs/worker.log")
	victim.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as an interactive shell's job
	victim.Dir = s.Root                                      // run where the stack runs its services
	require.NoError(t, victim.Start())
	defer func() { syscall.Kill(-victim.Process.Pid, syscall.SIGKILL); victim.Wait() }()
	// the stale record a crashed/rebooted stack left, before the job started
	require.NoError(t, s.writeRecord("worker", "pid", strconv.Itoa(victim.Process.Pid)))
	before := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(s.pidFile("worker"), before, before))
	time.Sleep(100 * time.Millisecond)

	newSupervisor(s, table, Dev).stopRecorded()
	require.True(t, procgroup.Alive(victim.Process.Pid), "stop killed an unrelated process group that reused a recorded pid")
}

// the dev session's pid is matched on "dev.sh" anywhere in the
// command line and signalled without any group check.
func TestStopSparesAStrangerLikeADevSession(t *testing.T) {
	s, _ := testStack(t)
	require.NoError(t, os.MkdirAll(s.PidDir(), 0o755))
	victim := exec.Command("sh", "-c", "sleep 300; true", "vim scripts/dev.sh")
	require.NoError(t, victim.Start())
	defer func() { victim.Process.Kill(); victim.Wait() }()
	require.NoError(t, s.writeRecord(devSession, "pid", strconv.Itoa(victim.Process.Pid)))
	time.Sleep(100 * time.Millisecond)
	newSupervisor(s, table, Dev).stopRecorded()
	require.True(t, procgroup.PidAlive(victim.Process.Pid), "stop sent SIGTERM to an unrelated process")
}

// what the stack writes about investigations (service logs, the
// starter's output with the verdict and findings) must not be readable by
// other local users; settings.key and intake-token already are 0600.
func TestDataNotWorldReadable(t *testing.T) {
	syscall.Umask(0o022) // the common default
	tbl := []Service{fake("db", "http")}
	s, out := fakeStack(t, tbl)
	require.NoError(t, newSupervisor(s, tbl, Dev).up(context.Background()), out.String())
	for _, p := range []string{s.DataDir, s.LogDir(), s.logFile("db"), s.EnvFile()} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Zero(t, st.Mode().Perm()&0o007, "%s is %v: other local users can read it", p, st.Mode().Perm())
	}
}

// TestRecordedPidNeedsItsStart: a live group under the recorded pid is the
// service only with the start the stack recorded: another start (the pid
// reused) or a record of another boot is a stranger, leader gone or not.
func TestRecordedPidNeedsItsStart(t *testing.T) {
	s, _ := testStack(t)
	cmd := exec.Command("sh", "-c", "sleep 300; true", "worker")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }()
	pid := cmd.Process.Pid
	start, ok := procStart(pid)
	require.True(t, ok)
	boot, ticks, _ := strings.Cut(start, "\n")
	require.NoError(t, s.recordPid("worker", pid, start))
	_, ok = s.recordedPid("worker", "worker")
	require.True(t, ok, "its own start")

	require.NoError(t, s.recordPid("worker", pid, boot+"\n1"+ticks))
	_, ok = s.recordedPid("worker", "worker")
	require.False(t, ok, "another process had the pid when it was recorded")
	require.NoError(t, s.recordPid("worker", pid, "00000000-0000-0000-0000-000000000000\n"+ticks))
	_, ok = s.recordedPid("worker", "worker")
	require.False(t, ok, "recorded in another boot")

	// The leader gone, the group living on: only a record of this boot.
	p, err := spawn([]string{"sh", "-c", "sleep 300 & exit 0"}, os.Environ(), s.Root, s.logFile("launcher"), nil)
	require.NoError(t, err)
	defer procgroup.Stop(p.pid, time.Second)
	<-p.done
	require.NoError(t, s.recordPid("fs", p.pid, "00000000-0000-0000-0000-000000000000\n1"))
	_, ok = s.recordedPid("fs", "")
	require.False(t, ok, "a group of the same pgid in another boot")
	require.NoError(t, s.recordPid("fs", p.pid, p.start))
	_, ok = s.recordedPid("fs", "")
	require.True(t, ok)
}

// TestStopOldRecord: a pid file without a start time (an older stack's)
// is stopped only when the process it names is provably the one recorded:
// a group leader that started before the pid file was written (a pid
// reused later started after it), in the stack's root, its command line
// the service's. Otherwise stop leaves it running, says so when it looks
// like the service, and forgets the record. The process is sleep under
// the fake service's name.
func TestStopOldRecord(t *testing.T) {
	tbl := []Service{fake("worker", "http")}
	for name, c := range map[string]struct {
		argv0   string
		cwd     bool          // run in the stack's root
		written time.Duration // when the pid file was written, after the process started
		stopped bool
		warned  bool
	}{
		"the service":                {"stack.test worker", true, 0, true, false},
		"another command line":       {"sleep", true, 0, false, false},
		"started after the pid file": {"stack.test worker", true, -time.Hour, false, true},
		"another working directory":  {"stack.test worker", false, 0, false, true},
	} {
		t.Run(name, func(t *testing.T) {
			s, out := fakeStack(t, tbl)
			require.NoError(t, os.MkdirAll(s.Root, 0o755))
			sleep, err := exec.LookPath("sleep")
			require.NoError(t, err)
			victim := &exec.Cmd{Path: sleep, Args: []string{c.argv0, "300"}, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
			if c.cwd {
				victim.Dir = s.Root
			}
			require.NoError(t, victim.Start())
			defer func() { syscall.Kill(-victim.Process.Pid, syscall.SIGKILL); victim.Wait() }()
			time.Sleep(20 * time.Millisecond)
			require.NoError(t, s.writeRecord("worker", "pid", strconv.Itoa(victim.Process.Pid)))
			if c.written != 0 {
				at := time.Now().Add(c.written)
				require.NoError(t, os.Chtimes(s.pidFile("worker"), at, at))
			}
			newSupervisor(s, tbl, Dev).stopRecorded()
			if c.stopped {
				require.Eventually(t, func() bool { return !procgroup.Alive(victim.Process.Pid) }, 5*time.Second, 20*time.Millisecond, "%s", out)
				require.Contains(t, out.String(), "without its start time (an older stack wrote it), but it is the process recorded")
			} else {
				require.True(t, procgroup.Alive(victim.Process.Pid), "%s", out)
			}
			require.Equal(t, c.warned, strings.Contains(out.String(), "so it was left running"), "%s", out)
			require.NoFileExists(t, s.pidFile("worker"))
		})
	}
}

// TestServicesPrivate: a service's own files follow umask 077 whatever the
// caller's umask, an existing .data is made 0700, and only the programs
// that use them (the worker) get the product's secrets.
func TestServicesPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	withFile := func(svc Service, file string) Service {
		launch := svc.Launch
		svc.Launch = func(s *Stack, k int) (Launch, error) {
			l, err := launch(s, k)
			l.Env = append(l.Env, "STACK_TEST_FILE="+file)
			return l, err
		}
		return svc
	}
	dir := t.TempDir()
	emu := withFile(fake("emu", "http"), filepath.Join(dir, "emu"))
	worker := withFile(fake("worker", "http"), filepath.Join(dir, "worker"))
	worker.Secrets = true
	tbl := []Service{emu, worker}
	s, out := fakeStack(t, tbl)
	s.env = append(s.env, "GEMINI_API_KEY=real-key", "VIRUSTOTAL_API_KEY=vt")
	require.NoError(t, os.MkdirAll(s.DataDir, 0o755))
	require.NoError(t, os.Chmod(s.DataDir, 0o755))
	require.NoError(t, newSupervisor(s, tbl, Dev).up(context.Background()), out.String())

	st, err := os.Stat(s.DataDir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "an existing .data")
	for _, f := range []string{"emu", "worker"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "a file %s made with 0666", f)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "emu"))
	require.Empty(t, string(b), "an emulator has no use for the model's key")
	b, _ = os.ReadFile(filepath.Join(dir, "worker"))
	require.Equal(t, "real-key", string(b))
}

// TestIntakeTokenOnceForAll: the cluster's intakes ask for the token at
// once; all get the one token, never an empty or half-written file.
func TestIntakeTokenOnceForAll(t *testing.T) {
	for range 20 {
		s, _ := testStack(t)
		var wg sync.WaitGroup
		tokens := make([]string, 8)
		for i := range tokens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := s.intakeToken()
				if err == nil {
					b, _ := os.ReadFile(p)
					tokens[i] = string(b)
				}
			}()
		}
		wg.Wait()
		for _, tok := range tokens {
			require.Len(t, tok, 49)
			require.Equal(t, tokens[0], tok)
		}
		st, err := os.Stat(s.intakeTokenPath())
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	}
}
