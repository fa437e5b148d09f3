package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestErrorIsOneCleanLine: an error carrying outside text (an MCP
// server's, a model's) prints no escape sequence and no second line that
// could pass for the worker's own.
func TestErrorIsOneCleanLine(t *testing.T) {
	var out strings.Builder
	printError(&out, errors.New("start the MCP server ext: \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ \x1b[2J\nworker: started\r\x9b31m"+strings.Repeat("x", 2000)))
	got := out.String()
	require.NotContains(t, got, "\x1b")
	require.NotContains(t, got, "\x9b")
	require.NotContains(t, got, "\r")
	require.Equal(t, 1, strings.Count(got, "\n"), got)
	require.True(t, strings.HasPrefix(got, "worker: start the MCP server ext: click worker: started"), got)
	require.Less(t, len(got), 1100)
}
