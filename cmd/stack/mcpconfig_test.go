package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/tools/mcp"
)

// The stack writes examples/mcp/mcp.yaml with its own paths: the same
// server, flags, limits and read-only tools, so a tool the example vouches
// for (or stops vouching for) reads the same in the stack.
func TestStackMCPConfigIsTheExample(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "mcp", "mcp.yaml"))
	require.NoError(t, err)
	example, err := mcp.Parse(raw)
	require.NoError(t, err)
	s, _ := testStack(t)
	for _, state := range []string{filepath.Join(s.DataDir, "response"), filepath.Join(s.DataDir, "response-eval")} {
		stack, err := mcp.Parse([]byte(responseServerYAML(s, state, "test")))
		require.NoError(t, err)
		require.Len(t, stack.Servers, len(example.Servers))
		want, got := example.Servers["response"], stack.Servers["response"]
		require.Equal(t, want.ReadOnly, got.ReadOnly)
		require.Equal(t, want.Timeout, got.Timeout)
		require.Equal(t, want.Rate, got.Rate)
		require.Equal(t, filepath.Base(want.Command), filepath.Base(got.Command))
		require.Len(t, got.Args, len(want.Args))
		for i := 0; i < len(want.Args); i += 2 {
			require.Equal(t, want.Args[i], got.Args[i])
			if want.Args[i] != "--state-dir" {
				require.Equal(t, filepath.Base(want.Args[i+1]), filepath.Base(got.Args[i+1]))
			}
		}
		require.Equal(t, state, got.Args[3])
	}
}
