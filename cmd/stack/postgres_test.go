package main

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// TestClusterPostgresAsksForAPassword: the cluster's PostgreSQL listens on
// 127.0.0.1, where every local user reaches it; its superuser must be asked
// for the stack's password (SASL, scram-sha-256), not let in (trust), and
// the password is a 0600 file of the stack's, on no command line.
func TestClusterPostgresAsksForAPassword(t *testing.T) {
	s, out := testStack(t)
	s.PostgresBin = orDefault(os.Getenv("STACK_POSTGRES_BIN"), "/usr/lib/postgresql/15/bin")
	if !isExecutable(filepath.Join(s.PostgresBin, "initdb")) {
		t.Skip("no PostgreSQL server in", s.PostgresBin)
	}
	// The postgres user (as root) must pass through to the data directory:
	// a test's own temporary directory is 0700.
	root, err := os.MkdirTemp("", "stack-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	require.NoError(t, os.Chmod(root, 0o711))
	s.DataDir = filepath.Join(root, ".data")
	s.ports["POSTGRES"] = freePort(t)

	l, err := postgresLaunch(s, 1)
	require.NoError(t, err, out.String())
	for _, a := range l.Argv {
		require.NotContains(t, a, "pass")
	}
	pw, err := os.ReadFile(s.postgresPasswordFile())
	require.NoError(t, err)
	require.Len(t, pw, 49)
	st, err := os.Stat(s.postgresPasswordFile())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	p, err := spawn(l.Argv, os.Environ(), "/", s.logFile("postgres"), l.Credential)
	require.NoError(t, err)
	t.Cleanup(func() { procgroup.Stop(p.pid, 5*time.Second) })
	require.Eventually(t, func() bool { return postgresProbe{}.Check(context.Background(), s, "postgres") == nil }, 60*time.Second, 100*time.Millisecond)

	c, err := net.Dial("tcp", s.addr("POSTGRES"))
	require.NoError(t, err)
	defer c.Close()
	params := "user\x00temporal\x00database\x00postgres\x00\x00"
	msg := binary.BigEndian.AppendUint32(nil, uint32(8+len(params)))
	msg = binary.BigEndian.AppendUint32(msg, 3<<16)
	_, err = c.Write(append(msg, params...))
	require.NoError(t, err)
	head := make([]byte, 9)
	_, err = io.ReadFull(c, head)
	require.NoError(t, err)
	require.Equal(t, byte('R'), head[0])
	require.Equal(t, uint32(10), binary.BigEndian.Uint32(head[5:]), "an authentication request (10: SASL), not 0: let in without a password")
}
