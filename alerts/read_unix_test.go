//go:build unix

package alerts

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readResult runs Read in a goroutine, so that a Read that blocks fails the
// test instead of hanging it.
func readResult(t *testing.T, ctx context.Context, path string, stdin io.Reader) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Read(ctx, path, stdin)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second): // a guard against a hang, not a measured limit
		t.Fatalf("Read(%q) blocked", path)
		return nil
	}
}

// A named pipe with no writer would block open forever: Read refuses it
// from its mode, before opening it.
func TestReadRefusesANamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "alert.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	err := readResult(t, t.Context(), fifo, nil)
	require.EqualError(t, err, fmt.Sprintf("cannot read alert file %q: it is a named pipe, not a regular file (give - to read standard input)", fifo))
}

func TestReadRefusesDevicesAndSockets(t *testing.T) {
	err := readResult(t, t.Context(), "/dev/zero", nil)
	require.EqualError(t, err, `cannot read alert file "/dev/zero": it is a device, not a regular file`)

	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	err = readResult(t, t.Context(), sock, nil)
	require.EqualError(t, err, fmt.Sprintf("cannot read alert file %q: it is a socket, not a regular file", sock))
}

// Standard input that never ends (a pipe whose writer stays open) does not
// hold Read once its context is cancelled.
func TestReadStdinIsCancellable(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { w.Close(); r.Close() })
	_, err = w.Write([]byte(`{"partial":`))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := Read(ctx, "-", r)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		require.EqualError(t, err, "interrupted while reading the alert from standard input")
	case <-time.After(30 * time.Second):
		t.Fatal("Read kept reading standard input after its context was cancelled")
	}

	// The cap holds for a pipe too: a writer that never stops is cut at MaxBytes.
	r2, w2, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r2.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for i := range buf {
			buf[i] = ' '
		}
		for {
			if _, err := w2.Write(buf); err != nil {
				return
			}
		}
	}()
	err = readResult(t, t.Context(), "-", r2)
	assert.EqualError(t, err, "the alert on standard input is larger than the 1 MiB limit")
	w2.Close()
}
