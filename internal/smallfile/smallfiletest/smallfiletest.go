// Package smallfiletest gives the tests of smallfile.Read's callers the
// files such a caller must refuse at once, and a bound on the call that
// reads one.
package smallfiletest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/secops-agent/investigator/internal/smallfile"
)

// Hostile is a path a bounded reader refuses, and the clause that says why.
type Hostile struct{ Path, Want string }

// Files makes, in dir, name one byte over max and name+".fifo", a named
// pipe without a writer, and adds /dev/zero: read whole, the pipe never
// returned and the device ran out of memory (it comes last for that).
func Files(t testing.TB, dir, name string, max int) []Hostile {
	t.Helper()
	big := filepath.Join(dir, name)
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, int64(max)+1); err != nil {
		t.Fatal(err)
	}
	fifo := big + ".fifo"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return []Hostile{
		{big, "it is larger than the " + smallfile.Limit(max) + " limit"},
		{fifo, "it is a named pipe, not a regular file"},
		{"/dev/zero", "it is a device, not a regular file"},
	}
}

// Within returns call's error, and fails t if call still runs after 5 s.
func Within(t testing.TB, call func() error) error {
	t.Helper()
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
