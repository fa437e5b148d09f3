package bqtools

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/smallfile"
	"github.com/secops-agent/investigator/internal/smallfile/smallfiletest"
)

// TestLoadIsBounded: a tables file or runbook over 1 MiB, a named pipe and
// a device are refused at once (the whole file was read: /dev/zero ran out
// of memory, a pipe without a writer never returned).
func TestLoadIsBounded(t *testing.T) {
	dir := t.TempDir()
	files := smallfiletest.Files(t, dir, "big.sql", smallfile.DefaultMax)
	for _, c := range files {
		err := smallfiletest.Within(t, func() error { _, err := LoadConfig(c.Path); return err })
		require.EqualError(t, err, "cannot read the BigQuery config "+c.Path+": "+c.Want)
	}
	err := smallfiletest.Within(t, func() error { _, err := LoadRunbooks(dir); return err })
	require.EqualError(t, err, "cannot read runbook "+files[0].Path+": it is larger than the 1 MiB limit")
}
