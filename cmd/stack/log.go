package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// logger writes the supervisor's lines: "stack: ..." on stdout, warnings
// and errors on stderr. Services start side by side, so lines are written
// whole under a lock.
type logger struct {
	mu       sync.Mutex
	out, err io.Writer
}

func newLogger(out, err io.Writer) *logger { return &logger{out: out, err: err} }

func (l *logger) info(format string, a ...any) {
	l.write(l.out, "stack: "+fmt.Sprintf(format, a...)+"\n")
}

func (l *logger) warn(format string, a ...any) {
	l.write(l.err, "stack: WARNING: "+fmt.Sprintf(format, a...)+"\n")
}

func (l *logger) error(format string, a ...any) {
	l.write(l.err, "stack: ERROR: "+fmt.Sprintf(format, a...)+"\n")
}

func (l *logger) write(w io.Writer, s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(w, s)
}

// tail prints the last lines of a service's log to stderr.
func (l *logger) tail(path string, n int) {
	b, err := os.ReadFile(path)
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		l.write(l.err, fmt.Sprintf("stack: (log %s is empty)\n", path))
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	l.write(l.err, fmt.Sprintf("----- last %d lines of %s -----\n%s\n-----\n", n, path, strings.Join(lines, "\n")))
}
