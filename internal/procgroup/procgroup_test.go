package procgroup

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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

func init() {
	// The helper below ends the process's first thread: the main goroutine
	// must be on it. It is there during init.
	if os.Getenv("PROCGROUP_TEST_ROLE") != "" {
		runtime.LockOSThread()
	}
}

// TestMain doubles as a helper: with PROCGROUP_TEST_ROLE=leader-exits it
// listens on a port, writes it to PROCGROUP_TEST_PORT_FILE, and ends its
// first thread alone, as a Go server or a JVM can leave the thread it
// started on while its others serve on.
func TestMain(m *testing.M) {
	if os.Getenv("PROCGROUP_TEST_ROLE") != "leader-exits" {
		os.Exit(m.Run())
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(2)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := os.WriteFile(os.Getenv("PROCGROUP_TEST_PORT_FILE"), []byte(l.Addr().String()), 0o600); err != nil {
		os.Exit(3)
	}
	syscall.Syscall(syscall.SYS_EXIT, 0, 0, 0) // this thread only, not exit_group
	select {}
}

// TestZombieLeaderWithLiveThreads: a process whose first thread has exited
// ('Z' in /proc/PID/stat) while its other threads still serve a port is
// alive, and its group with it; Stop ends it and the port closes. Before,
// both were taken for gone while the port still answered (the stack's
// stop returned, and a new start found the port taken).
func TestZombieLeaderWithLiveThreads(t *testing.T) {
	portFile := filepath.Join(t.TempDir(), "port")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROCGROUP_TEST_ROLE=leader-exits", "PROCGROUP_TEST_PORT_FILE="+portFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL); cmd.Wait() })
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(stat)
		state, _, ok := ParseStat(b)
		return err == nil && ok && state == 'Z'
	}, 10*time.Second, 10*time.Millisecond, "the first thread exits")
	addr, err := os.ReadFile(portFile)
	require.NoError(t, err)
	c, err := net.Dial("tcp", string(addr))
	require.NoError(t, err, "its other threads still serve")
	c.Close()
	require.True(t, PidAlive(pid))
	require.True(t, Alive(pid))

	require.False(t, Stop(pid, 5*time.Second), "SIGTERM was enough")
	require.False(t, Alive(pid))
	_, err = net.Dial("tcp", string(addr))
	require.Error(t, err, "the port closed with the group")
}

// TestScanUntilSettled: a group read while its one member had just forked
// a child the listing missed and exited is read again and found alive;
// one whose members settle as zombies (or none) is dead; one that keeps
// changing counts as alive.
func TestScanUntilSettled(t *testing.T) {
	scans := func(results ...[]int) func() ([]int, bool, bool) {
		i := 0
		return func() ([]int, bool, bool) {
			r := results[min(i, len(results)-1)]
			i++
			// a negative pid stands for a live member
			live := slices.ContainsFunc(r, func(p int) bool { return p < 0 })
			return r, live, true
		}
	}
	require.True(t, scanUntilSettled(scans([]int{10}, []int{10, -11})), "the launcher's child, missed by the first listing")
	require.True(t, scanUntilSettled(scans(nil, []int{-11})), "the same, the launcher reaped before its entry was read")
	require.False(t, scanUntilSettled(scans([]int{10}, []int{10})), "a zombie alone")
	require.False(t, scanUntilSettled(scans([]int{10, 11}, []int{10})), "zombies being reaped")
	require.False(t, scanUntilSettled(scans(nil)), "nothing left")
	n := 0
	require.True(t, scanUntilSettled(func() ([]int, bool, bool) { n++; return []int{n}, false, true }), "a group that never settles")
}
