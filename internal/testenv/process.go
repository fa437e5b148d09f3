package testenv

import (
	"errors"
	"log/slog"
	"net"
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
