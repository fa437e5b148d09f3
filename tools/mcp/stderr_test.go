package mcp

import (
	"bytes"
	"strings"
	"testing"

	"github.com/secops-agent/investigator/internal/redact"
)

// A stdio server's error output reaches the worker's prefixed with its
// name, its control characters escaped (no forged log line, no terminal
// sequence), its configured secrets redacted, each line bounded and the
// lines rate-limited.
func TestStderrIsPrefixedEscapedRedactedAndBounded(t *testing.T) {
	var out bytes.Buffer
	w := newStderrLines("siem", &out, redact.New("tok-0123456789"))
	_, _ = w.Write([]byte("auth tok-0123456789 failed\x1b[2J\rlevel=INFO msg=forged\n" + strings.Repeat("x", 10<<10) + "\n"))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), out.String())
	}
	if !strings.HasPrefix(lines[0], "mcp server siem: ") || strings.ContainsAny(lines[0], "\x1b\r") || strings.Contains(lines[0], "tok-0123456789") {
		t.Errorf("first line: %q", lines[0])
	}
	if len(lines[1]) > maxStderrLine+64 {
		t.Errorf("a 10 KiB line passed as %d bytes", len(lines[1]))
	}
	out.Reset()
	for range 2 * stderrBurst {
		_, _ = w.Write([]byte("spam\n"))
	}
	if n := strings.Count(out.String(), "\n"); n > stderrBurst {
		t.Errorf("%d lines passed in a burst; at most %d", n, stderrBurst)
	}
}
