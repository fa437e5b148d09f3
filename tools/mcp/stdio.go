package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/redact"
)

// commandTransport runs a stdio server as the SDK's CommandTransport does
// (close its stdin, then SIGTERM, then SIGKILL), but reads its answers
// through an IOTransport bounded at maxResponseBytes per line, as an HTTP
// server's are: the SDK's CommandTransport allows 16 MiB and takes no
// bound.
type commandTransport struct{ cmd *exec.Cmd }

// terminateAfter is how long a closed server has to exit before each signal.
const terminateAfter = 5 * time.Second

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	tr := &mcp.IOTransport{
		Reader:        nopCloser{stdout}, // the session ends by closing stdin
		Writer:        &process{stdin: stdin, cmd: t.cmd},
		MaxLineLength: maxResponseBytes,
	}
	return tr.Connect(ctx)
}

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

// process is a stdio server's stdin; closing it ends the process.
type process struct {
	stdin io.WriteCloser
	cmd   *exec.Cmd
	once  sync.Once
	err   error
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *process) Close() error {
	p.once.Do(func() {
		_ = p.stdin.Close()
		exited := make(chan error, 1)
		go func() { exited <- p.cmd.Wait() }()
		for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
			if sig != 0 {
				_ = p.cmd.Process.Signal(sig)
			}
			select {
			case p.err = <-exited:
				return
			case <-time.After(terminateAfter):
			}
		}
		p.err = fmt.Errorf("the server process did not exit")
	})
	return p.err
}

// stderrLines passes a stdio server's error output to the worker's, one
// line at a time: prefixed with the server's name, control characters
// escaped (a server could otherwise forge the worker's own log lines or
// drive the terminal), each line at most maxStderrLine bytes, the server's
// configured secrets redacted, and at most stderrRate lines a second (a
// burst of stderrBurst): the rest are dropped, and counted when lines pass
// again.
type stderrLines struct {
	name    string
	out     io.Writer
	secrets *redact.Redactor
	limit   *rate.Limiter

	mu      sync.Mutex
	buf     []byte
	dropped int
}

const (
	maxStderrLine = 1 << 10
	stderrRate    = 20
	stderrBurst   = 200
)

func newStderrLines(name string, out io.Writer, secrets *redact.Redactor) *stderrLines {
	return &stderrLines{name: name, out: out, secrets: secrets, limit: rate.NewLimiter(stderrRate, stderrBurst)}
}

func (w *stderrLines) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			// Keep a partial line, but never more than a line's bound
			// (plus room for a secret that straddles the cut).
			room := 2*maxStderrLine - len(w.buf)
			w.buf = append(w.buf, b[:min(len(b), max(room, 0))]...)
			break
		}
		w.buf = append(w.buf, b[:min(i, max(2*maxStderrLine-len(w.buf), 0))]...)
		w.line()
		b = b[i+1:]
	}
	return n, nil
}

// line writes the buffered line, bounded and escaped, and empties it.
func (w *stderrLines) line() {
	raw := w.buf
	w.buf = w.buf[:0]
	if !w.limit.Allow() {
		w.dropped++
		return
	}
	text := strconv.Quote(clip.String(w.secrets.String(string(raw)), maxStderrLine))
	text = text[1 : len(text)-1] // the escapes, not the quotes
	if w.dropped > 0 {
		fmt.Fprintf(w.out, "mcp server %s: (%d lines dropped: over %d a second)\n", w.name, w.dropped, stderrRate)
		w.dropped = 0
	}
	fmt.Fprintf(w.out, "mcp server %s: %s\n", w.name, text)
}
