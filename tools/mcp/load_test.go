package mcp

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/smallfile"
	"github.com/secops-agent/investigator/internal/smallfile/smallfiletest"
)

// TestLoadIsBounded: an MCP configuration file over 1 MiB, a named pipe and a device are
// refused at once (the whole file was read: /dev/zero ran out of memory,
// a pipe without a writer never returned).
func TestLoadIsBounded(t *testing.T) {
	for _, c := range smallfiletest.Files(t, t.TempDir(), "big.yaml", smallfile.DefaultMax) {
		err := smallfiletest.Within(t, func() error { _, err := Load(c.Path); return err })
		require.EqualError(t, err, "cannot read the MCP configuration "+c.Path+": "+c.Want)
	}
}
