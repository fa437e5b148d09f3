package testenv

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// stopGroup ends the process group pgid: SIGTERM, then SIGKILL if it has not
// gone within stopGrace. It returns once no live process is left in the group
// (the JVM can outlive gcloud by a few seconds) and host's port is free.
func stopGroup(pgid int, done <-chan struct{}, host string) {
	signalGroup(pgid, syscall.SIGTERM)
	if !procgroup.WaitGone(pgid, stopGrace) {
		signalGroup(pgid, syscall.SIGKILL)
		if !procgroup.WaitGone(pgid, killWait) {
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

// lifeline is a pipe nobody writes to. This process holds its only write
// end, so its read end sees end-of-file exactly when this process dies,
// however it dies (Ctrl-C, a go test -timeout panic, SIGKILL).
var lifeline struct {
	once sync.Once
	r, w *os.File
	err  error
}

// watchdogScript waits on the lifeline (fd 3) and then kills its own
// process group: the server and every process it started.
const watchdogScript = `read -r _ <&3; kill -KILL 0`

// startGuarded starts cmd as the leader of a new process group and adds a
// watchdog to that group, so that the whole group dies when this process
// does; stopping it normally still goes through its group (pgid, cmd's
// pid). The server leads, not the watchdog: gcloud makes itself a group
// leader, which would leave the JVM out of a group the watchdog led. A
// watchdog beats Pdeathsig here: that reaches only the direct child
// (gcloud, not its JVM grandchild) and follows the thread that forked it.
func startGuarded(cmd *exec.Cmd) (pgid int, err error) {
	lifeline.once.Do(func() { lifeline.r, lifeline.w, lifeline.err = os.Pipe() })
	if lifeline.err != nil {
		return 0, fmt.Errorf("create the watchdog's pipe: %w", lifeline.err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pgid = cmd.Process.Pid
	dog := exec.Command("/bin/sh", "-c", watchdogScript)
	dog.ExtraFiles = []*os.File{lifeline.r}
	dog.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := dog.Start(); err != nil {
		signalGroup(pgid, syscall.SIGKILL)
		_ = cmd.Wait()
		return 0, fmt.Errorf("start the watchdog: %w", err)
	}
	go func() { _ = dog.Wait() }()
	return pgid, nil
}
