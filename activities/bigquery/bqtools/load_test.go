package bqtools

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLoadIsBounded: a tables file or runbook over 1 MiB, a named pipe and
// a device are refused at once (the whole file was read: /dev/zero ran out
// of memory, a pipe without a writer never returned).
func TestLoadIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.sql")
	require.NoError(t, os.WriteFile(big, nil, 0o600))
	require.NoError(t, os.Truncate(big, 1<<20+1))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	bounded := func(t *testing.T, call func() error) error {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("still reads after 5 s")
			return nil
		}
	}
	for _, c := range []struct{ path, want string }{
		{big, "it is larger than the 1 MiB limit"},
		{fifo, "it is a named pipe, not a regular file"},
		{"/dev/zero", "it is a device, not a regular file"}, // last: it ran out of memory
	} {
		err := bounded(t, func() error { _, err := LoadConfig(c.path); return err })
		require.EqualError(t, err, "cannot read the BigQuery config "+c.path+": "+c.want)
	}
	err := bounded(t, func() error { _, err := LoadRunbooks(dir); return err })
	require.EqualError(t, err, "cannot read runbook "+big+": it is larger than the 1 MiB limit")
}
