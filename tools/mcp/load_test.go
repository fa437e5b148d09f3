package mcp

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLoadIsBounded: an MCP configuration file over 1 MiB, a named pipe and a device are
// refused at once (the whole file was read: /dev/zero ran out of memory,
// a pipe without a writer never returned).
func TestLoadIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, nil, 0o600))
	require.NoError(t, os.Truncate(big, 1<<20+1))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, c := range []struct{ path, want string }{
		{big, "it is larger than the 1 MiB limit"},
		{fifo, "it is a named pipe, not a regular file"},
		{"/dev/zero", "it is a device, not a regular file"}, // last: it ran out of memory
	} {
		done := make(chan error, 1)
		go func() { _, err := Load(c.path); done <- err }()
		select {
		case err := <-done:
			require.EqualError(t, err, "cannot read the MCP configuration "+c.path+": "+c.want)
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s) still reads after 5 s", c.path)
		}
	}
}
