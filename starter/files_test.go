package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/smallfile/smallfiletest"
)

// TestFilesAreBounded: the token file, an eval case and a --raw alert
// over their cap, a named pipe and a device are refused at once (they
// were read whole: /dev/zero ran out of memory, a pipe without a writer
// never returned).
func TestFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	sized := func(name string, n int64) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, nil, 0o600))
		require.NoError(t, os.Truncate(p, n))
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	token := func(p string) func() error { return func() error { _, err := readToken(p); return err } }
	evalCase := func(p string) func() error { return func() error { _, err := loadCase(p); return err } }
	raw := func(p string) func() error {
		return func() error { _, err := testApp().publishable(context.Background(), p, true); return err }
	}
	bigToken, bigCase, bigRaw := sized("token", 64<<10+1), sized("case.yaml", 1<<20+1), sized("raw.json", 10<<20+1)
	for _, c := range []struct {
		call func() error
		want string
	}{
		{token(bigToken), "--token-file: cannot read " + bigToken + ": it is larger than the 64 KiB limit"},
		{token(fifo), "--token-file: cannot read " + fifo + ": it is a named pipe, not a regular file"},
		{evalCase(bigCase), "case " + bigCase + ": it is larger than the 1 MiB limit"},
		{evalCase(fifo), "case " + fifo + ": it is a named pipe, not a regular file"},
		{raw(bigRaw), "cannot read " + bigRaw + ": it is larger than the 10 MiB limit"},
		{raw(fifo), "cannot read " + fifo + ": it is a named pipe, not a regular file"},
		// Last: before, they ran out of memory.
		{token("/dev/zero"), "--token-file: cannot read /dev/zero: it is a device, not a regular file"},
		{evalCase("/dev/zero"), "case /dev/zero: it is a device, not a regular file"},
		{raw("/dev/zero"), "cannot read /dev/zero: it is a device, not a regular file"},
	} {
		require.EqualError(t, smallfiletest.Within(t, c.call), c.want)
	}
}

// TestTokenFileNeedsALongToken: the webhook is open to whoever reaches its
// address, so a token a guess finds (under 16 bytes) is refused at start.
func TestTokenFileNeedsALongToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	short := write("short", "hunter2\n")
	_, err := readToken(short)
	require.EqualError(t, err, "--token-file: the token in "+short+" is 7 bytes, under the 16 the webhook needs (make one with: openssl rand -hex 24)")
	got, err := readToken(write("ok", "s3cret-e2e-token\n"))
	require.NoError(t, err)
	require.Equal(t, "s3cret-e2e-token", got)
}
