package smallfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRead: a regular file up to the cap is read; a bigger one, a device
// that never ends, a named pipe with no writer and a directory are
// refused at once, in one clause.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.yaml")
	require.NoError(t, os.WriteFile(ok, []byte("12345678"), 0o600))
	data, err := Read(ok, 8)
	require.NoError(t, err)
	require.Equal(t, "12345678", string(data))

	_, err = Read(ok, 7)
	require.EqualError(t, err, "it is larger than the 7 bytes limit")
	require.True(t, errors.Is(err, ErrTooLarge))

	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for path, want := range map[string]string{
		"/dev/zero":                      "it is a device, not a regular file",
		fifo:                             "it is a named pipe, not a regular file",
		dir:                              "it is a directory",
		filepath.Join(dir, "missing"):    "no such file or directory",
		filepath.Join(ok, "not-a-child"): "not a directory",
	} {
		done := make(chan error, 1)
		go func() { _, err := Read(path, DefaultMax); done <- err }()
		select {
		case err := <-done:
			require.EqualError(t, err, want, path)
		case <-time.After(5 * time.Second):
			t.Fatalf("Read(%s) still runs", path)
		}
	}

	require.Equal(t, "1 MiB", Limit(DefaultMax))
	require.Equal(t, "64 KiB", Limit(64<<10))
	require.False(t, strings.Contains(Limit(1500), "KiB"))
}

// TestReadRefusesAPathReplacedAfterItsCheck: a regular file swapped for a
// named pipe between the check and the open is refused at once; opening the
// pipe waited for a writer that never came.
func TestReadRefusesAPathReplacedAfterItsCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("a: 1\n"), 0o600))
	beforeOpen = func() {
		require.NoError(t, os.Remove(path))
		require.NoError(t, syscall.Mkfifo(path, 0o600))
	}
	t.Cleanup(func() { beforeOpen = func() {} })
	done := make(chan error, 1)
	go func() { _, err := Read(path, DefaultMax); done <- err }()
	select {
	case err := <-done:
		require.EqualError(t, err, "it is a named pipe, not a regular file")
	case <-time.After(5 * time.Second):
		t.Fatal("Read still waits on the named pipe")
	}
}
