package main

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// Every service runs in its own process group (pgid == its pid) and is
// stopped as a group (procgroup): the Firestore emulator is a JVM
// grandchild of gcloud that outlives it and would keep its port.

// proc is a process the supervisor started in this invocation.
type proc struct {
	pid   int
	start string        // procStart, read before it can be reaped
	done  chan struct{} // closed when the group leader has exited and been reaped
}

// spawn starts argv in its own process group with stdin from /dev/null and
// stdout and stderr appended to logPath (after a header line).
func spawn(argv, env []string, dir, logPath string, as *syscall.Credential) (*proc, error) {
	f, err := createPrivate(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own descriptor
	fmt.Fprintf(f, "# %s: %s\n", time.Now().Format("2006-01-02T15:04:05-0700"), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f // an *os.File: no copying goroutine, the child writes itself
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: as}
	if err := startPrivate(cmd); err != nil {
		return nil, err
	}
	// Unreaped, the child keeps its /proc entry even if it exits at once.
	start, ok := procStart(cmd.Process.Pid)
	if !ok {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, fmt.Errorf("cannot read the start time of %s in /proc, which stop needs to tell it from a process that later reuses its pid", argv[0])
	}
	p := &proc{pid: cmd.Process.Pid, start: start, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// cmdline is a process's command line, arguments joined by spaces; ok is
// false when it cannot be read (the process is gone). A process in the middle
// of an exec shows an empty command line for a moment, so an empty read is
// tried again briefly before it counts as unreadable.
func cmdline(pid int) (string, bool) {
	for try := 0; ; try++ {
		args, ok := readCmdline(pid)
		if ok || try == 10 || !procgroup.PidAlive(pid) {
			return args, ok
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readCmdline(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		out, err := exec.Command("ps", "-o", "args=", "-p", strconv.Itoa(pid)).Output()
		if err != nil {
			return "", false
		}
		return strings.TrimSpace(string(out)), len(bytes.TrimSpace(out)) > 0
	}
	if len(b) == 0 {
		b = threadCmdline(pid)
	}
	return strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))), len(b) > 0
}

// threadCmdline is the command line as another thread of pid reads it: a
// process whose first thread exited (a Go server, a JVM) shows an empty
// /proc/PID/cmdline while its other threads serve on, and is still ours.
func threadCmdline(pid int) []byte {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	for _, task := range tasks {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/cmdline", pid, task.Name())); err == nil && len(b) > 0 {
			return b
		}
	}
	return nil
}

// fileSum is a checksum of a program file: a build rewrites the file even
// when its content does not change, so its time says nothing.
func fileSum(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("crc32c %08x %d", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)), len(b))
}
