package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// pipeBuffered returns how many bytes wait unread in a pipe (FIONREAD).
func pipeBuffered(f *os.File) (int, error) {
	var n int32
	const fionread = 0x541B
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fionread, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// TestSIGTERMEndsAStdinRead builds the real starter, gives it an alert on a
// pipe that never closes, and sends SIGTERM once it has read what was
// written (so its signal handling is in place): it exits 143 (128 +
// SIGTERM, not 1: a script tells a killed command from a failed one) with
// one sentence.
func TestSIGTERMEndsAStdinRead(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "starter")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run(), "build the starter")

	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); w.Close() })
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "investigate", "--alert", "-")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, &stdout, &stderr
	cmd.Env = append(os.Environ(), "FIRESTORE_EMULATOR_HOST=127.0.0.1:1", "TEMPORAL_ADDRESS=127.0.0.1:1")
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	_, err = w.Write([]byte(`{"type":"x",`))
	require.NoError(t, err)
	for { // the starter has taken the bytes: it is reading standard input
		n, err := pipeBuffered(r)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the starter exited before reading: %v\n%s", err, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))

	select {
	case err := <-exited:
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v", err)
		require.Equal(t, 143, exit.ExitCode(), "stderr: %s", stderr.String())
		require.Equal(t, "error: interrupted while reading the alert from standard input\n", stderr.String())
		require.Empty(t, stdout.String())
	case <-time.After(time.Minute): // a guard against a hang, not a measured limit
		cmd.Process.Kill()
		t.Fatal("the starter kept reading standard input after SIGTERM")
	}
}
