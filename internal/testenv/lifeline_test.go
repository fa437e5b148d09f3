package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// The roles the test binary plays in TestServersDieWithTheTestBinary.
const guardRoleEnv = "TESTENV_GUARD_ROLE"

// TestServersDieWithTheTestBinary starts a server through testenv in a
// child test binary, kills that binary with SIGKILL (as a go test -timeout
// panic or Ctrl-C ends it, without cleanups), and checks that the server
// and its grandchildren go with it. The "fake" emulator is this binary
// again, serving HTTP with a sleeping grandchild, as gcloud runs a JVM.
func TestServersDieWithTheTestBinary(t *testing.T) {
	if os.Getenv(guardRoleEnv) != "" {
		t.Skip("helper process")
	}
	for _, server := range []string{"fake-emulator", "firestore", "bigquery", "temporal"} {
		t.Run(server, func(t *testing.T) {
			switch server {
			case "firestore":
				if _, err := findEmulator(); err != nil {
					t.Skip(err)
				}
			case "bigquery":
				if _, err := BigQueryEmulator(); err != nil {
					t.Skip(err)
				}
			case "temporal":
				if _, err := TemporalCLI(); err != nil {
					t.Skip(err)
				}
			}
			out := filepath.Join(t.TempDir(), "started")
			child := exec.Command(os.Args[0], "-test.run=^TestGuardHelper$", "-test.v")
			child.Env = append(os.Environ(), guardRoleEnv+"=starter", "TESTENV_GUARD_SERVER="+server, "TESTENV_GUARD_OUT="+out)
			logs := &tailBuffer{max: outputTail}
			child.Stdout, child.Stderr = logs, logs
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = child.Wait(); close(exited) }()
			t.Cleanup(func() { _ = child.Process.Kill(); <-exited })

			var host string
			pgid := 0
			deadline := time.Now().Add(90 * time.Second)
			for {
				if b, err := os.ReadFile(out); err == nil && strings.HasSuffix(string(b), "\n") {
					f := strings.Fields(string(b))
					host = f[0]
					if len(f) > 1 {
						pgid, _ = strconv.Atoi(f[1])
					}
					break
				}
				select {
				case <-exited:
					t.Fatalf("the helper exited before its server started:\n%s", logs.String())
				case <-time.After(50 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("the helper's server did not start:\n%s", logs.String())
				}
			}
			if pgid > 0 {
				t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			}

			if err := child.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-exited
			if pgid > 0 && !procgroup.WaitGone(pgid, 10*time.Second) {
				t.Errorf("the server's process group %d outlived the test binary that started it", pgid)
			}
			gone := false
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				c, err := net.DialTimeout("tcp", host, 200*time.Millisecond)
				if err != nil {
					gone = true
					break
				}
				c.Close()
			}
			if !gone {
				t.Errorf("the server on %s still answers after the test binary that started it was killed", host)
			}
		})
	}
}

// TestGuardHelper is the child processes of TestServersDieWithTheTestBinary.
func TestGuardHelper(t *testing.T) {
	switch os.Getenv(guardRoleEnv) {
	case "starter":
		guardStarter(t)
	case "emulator":
		guardFakeEmulator(t)
	default:
		t.Skip("helper process")
	}
}

// guardStarter starts the server, writes "host [pgid]" and waits to be killed.
func guardStarter(t *testing.T) {
	out := os.Getenv("TESTENV_GUARD_OUT")
	var line string
	switch os.Getenv("TESTENV_GUARD_SERVER") {
	case "fake-emulator":
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		t.Setenv(guardRoleEnv, "emulator")
		t.Setenv("TESTENV_GUARD_HOST", host)
		if _, err := startEmulator("fake", host, 30*time.Second, os.Args[0], "-test.run=^TestGuardHelper$"); err != nil {
			t.Fatal(err)
		}
		pgid, err := syscall.Getpgid(portOwner(t, host))
		if err != nil {
			t.Fatal(err)
		}
		line = fmt.Sprintf("%s %d", host, pgid)
	case "firestore", "bigquery":
		var host string
		var err error
		if os.Getenv("TESTENV_GUARD_SERVER") == "firestore" {
			host, _, err = StartFirestore() // gcloud, its wrapper script and the JVM
		} else {
			host, _, err = StartBigQuery(Project, "")
		}
		if err != nil {
			t.Fatal(err)
		}
		pgid, err := syscall.Getpgid(portOwner(t, host))
		if err != nil {
			t.Fatal(err)
		}
		line = fmt.Sprintf("%s %d", host, pgid)
	case "temporal":
		srv, err := StartTemporal(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		line = srv.FrontendHostPort()
	}
	if err := os.WriteFile(out, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Minute)
}

// portOwner returns the pid of the process listening on host, from the
// fake emulator's answer or, for the BigQuery emulator, /proc.
func portOwner(t *testing.T, host string) int {
	t.Helper()
	if resp, err := http.Get("http://" + host + "/pid"); err == nil {
		defer resp.Body.Close()
		var pid int
		if _, err := fmt.Fscan(resp.Body, &pid); err == nil && pid > 0 {
			return pid
		}
	}
	pid, err := listenerPid(host)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// listenerPid finds the process holding a listening socket on host's port.
func listenerPid(host string) (int, error) {
	_, portStr, _ := net.SplitHostPort(host)
	port, _ := strconv.Atoi(portStr)
	var raw []byte
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} { // a JVM listens on tcp6
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		raw = append(raw, b...)
	}
	inode := ""
	for _, l := range strings.Split(string(raw), "\n") {
		f := strings.Fields(l)
		if len(f) > 9 && strings.HasSuffix(f[1], fmt.Sprintf(":%04X", port)) && f[3] == "0A" {
			inode = f[9]
		}
	}
	if inode == "" {
		return 0, fmt.Errorf("nothing listens on %s", host)
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); l == "socket:["+inode+"]" {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process holds the listener on %s", host)
}

// guardFakeEmulator answers HTTP on $TESTENV_GUARD_HOST and keeps a
// sleeping child, until killed.
func guardFakeEmulator(t *testing.T) {
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", os.Getenv("TESTENV_GUARD_HOST"))
	if err != nil {
		t.Fatal(err)
	}
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d\n", os.Getpid())
	}))
}
