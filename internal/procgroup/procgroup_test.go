package procgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	state, pgid, ok := ParseStat([]byte("1234 (java) S 1 1200 1200 0 -1 4194560 ..."))
	require.True(t, ok)
	assert.Equal(t, byte('S'), state)
	assert.Equal(t, 1200, pgid)

	state, pgid, ok = ParseStat([]byte("99 (odd) name) Z 1 77 77 0"))
	require.True(t, ok)
	assert.Equal(t, byte('Z'), state)
	assert.Equal(t, 77, pgid)

	_, _, ok = ParseStat([]byte("garbage"))
	assert.False(t, ok)
}

// start runs a shell line in a group of its own and reaps its leader.
func start(t *testing.T, line string) (pgid int, leaderDone <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd.Process.Pid, done
}

// TestStop: the whole group goes, a process that outlived its leader
// (gcloud's JVM) included, and SIGKILL ends what ignores SIGTERM.
func TestStop(t *testing.T) {
	dir := t.TempDir()
	pgid, leader := start(t, "sleep 300 & echo $! > "+dir+"/child; exit 0")
	<-leader
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, "child")); return err == nil }, 5*time.Second, 10*time.Millisecond)
	b, _ := os.ReadFile(filepath.Join(dir, "child"))
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	require.True(t, PidAlive(child))
	require.False(t, PidAlive(pgid), "the leader is gone")
	require.True(t, Alive(pgid), "its child lives on in the group")
	require.False(t, Stop(pgid, 5*time.Second), "SIGTERM was enough")
	require.False(t, PidAlive(child))

	pgid, _ = start(t, `trap "" TERM; sleep 300`)
	time.Sleep(100 * time.Millisecond) // let the trap be set
	began := time.Now()
	require.True(t, Stop(pgid, 300*time.Millisecond), "it had to be killed")
	require.False(t, Alive(pgid))
	require.Less(t, time.Since(began), 5*time.Second)
}
