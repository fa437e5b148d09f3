// Package testenv starts the real local services that tests run against: the
// official Firestore emulator and the Temporal dev server.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
)

// Project is the Google Cloud project ID used against the emulators. The
// "demo-" prefix marks it as a project that never reaches real Google Cloud.
const Project = "demo-investigator"

// alertIDAttribute is the name of the Keyword search attribute that
// StartTemporal registers.
const alertIDAttribute = "AlertId"

// verdictAttribute holds the verdict of the latest conclusion.
const verdictAttribute = "Verdict"

const (
	firestoreReadyTimeout = 60 * time.Second
	stopGrace             = 10 * time.Second
	killWait              = 5 * time.Second
	outputTail            = 16 << 10
)

// errExitedEarly: an emulator process ended before it answered.
var errExitedEarly = errors.New("the emulator exited before it was ready")

// FreePort returns a TCP port on 127.0.0.1 that was free when it was
// checked. It is drawn below the kernel's ephemeral range, so no port the
// kernel hands out (a client socket, a listener on port 0 such as the
// Firestore emulator's WebSocket server) can take it before its service
// binds it; it is also below 32768, which Temporal's membership ports need.
func FreePort() (int, error) {
	high := ephemeralLow()
	for range 200 {
		p := portFloor + rand.IntN(high-portFloor)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("find a free TCP port: %w", err)
		}
		return p, nil
	}
	return 0, fmt.Errorf("find a free TCP port: none free between %d and %d", portFloor, high)
}

// portFloor is the lowest port FreePort draws: above the well-known
// defaults of the services tests run (7233, 8081, 9050 and the like).
const portFloor = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default 32768 where it cannot be read).
func ephemeralLow() int {
	const fallback = 32768
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return fallback
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= portFloor+1000 {
		return fallback
	}
	return min(n, fallback)
}

// StartFirestore starts the official Firestore emulator
// (`gcloud emulators firestore start`) on a free port of 127.0.0.1 and waits
// until it answers. It returns the emulator's host:port, for
// FIRESTORE_EMULATOR_HOST, and a stop function that ends the emulator's whole
// process group (gcloud, its shell wrapper and the JVM). stop is safe to call
// more than once.
func StartFirestore() (host string, stop func(), err error) {
	return onFreePort(StartFirestoreOn)
}

// portTaken says an emulator failed to bind its port (Go and Java word it
// in different cases).
func portTaken(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "address already in use")
}

// onFreePort starts an emulator with start on a free port, and again on
// another one when the port was taken between the check and the
// emulator's bind (test packages start emulators side by side).
func onFreePort(start func(host string) (func(), error)) (host string, stop func(), err error) {
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return "", nil, err
		}
		host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		stop, err = start(host)
		if err == nil || attempt == 3 || !portTaken(err) {
			return host, stop, err
		}
		slog.Warn("testenv: an emulator's port was taken; trying another", "attempt", attempt, "host", host)
	}
}

// StartFirestoreOn is StartFirestore on a given host:port, such as the
// port of an emulator a test stopped (an outage) and starts again.
func StartFirestoreOn(host string) (stop func(), err error) {
	gcloud, err := findEmulator()
	if err != nil {
		return nil, err
	}
	return startEmulator("Firestore", host, firestoreReadyTimeout, gcloud, "emulators", "firestore", "start", "--host-port="+host)
}

// Firestore starts a Firestore emulator for the test, stops it when the test
// ends, and sets FIRESTORE_EMULATOR_HOST for the test's duration so that
// firestore.NewClient reaches it. It returns the emulator's host:port.
//
// Because it uses tb.Setenv, Firestore cannot be called from a test that has
// called t.Parallel (or from its subtests); such tests should call
// StartFirestore and point their clients at the returned host themselves.
func Firestore(tb testing.TB) string {
	tb.Helper()
	// Setenv first: it panics in parallel tests, and nothing is running yet.
	tb.Setenv("FIRESTORE_EMULATOR_HOST", "")
	host, stop, err := StartFirestore()
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(stop)
	tb.Setenv("FIRESTORE_EMULATOR_HOST", host)
	return host
}

// ResetFirestore deletes every document of project in the emulator at host.
func ResetFirestore(host, project string) error {
	u := "http://" + host + "/emulator/v1/projects/" + url.PathEscape(project) + "/databases/(default)/documents"
	req, err := http.NewRequest(http.MethodDelete, u, nil)
	if err != nil {
		return fmt.Errorf("reset the Firestore emulator: %w", err)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("reset the Firestore emulator at %s: %w", host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("reset the Firestore emulator at %s: %s: %s", host, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// TemporalCLI returns the path of the Temporal CLI binary: $TEMPORAL_CLI if
// set, else ${XDG_CACHE_HOME:-$HOME/.cache}/investigator/bin/temporal.
func TemporalCLI() (string, error) { return cachedTool("the Temporal CLI", "TEMPORAL_CLI", "temporal") }

// cachedTool finds a tool that `go tool task setup` builds into the tool
// cache, or the path the environment variable env names.
func cachedTool(what, env, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("%s is set to %q, but %w", env, p, err)
		}
		return p, nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find %s: %w", what, err)
		}
		cache = filepath.Join(home, ".cache")
	}
	p := filepath.Join(cache, "investigator", "bin", name)
	if err := checkExecutable(p); err != nil {
		return "", fmt.Errorf("%s is not installed at %s (%w); run `go tool task setup` to build it", what, p, err)
	}
	return p, nil
}

// TemporalOption changes how StartTemporal starts the dev server.
type TemporalOption func(*[]string)

// WithoutSearchAttributes starts the dev server with no custom search
// attributes, as a server nobody has prepared for the investigator.
func WithoutSearchAttributes() TemporalOption { return func(args *[]string) { *args = nil } }

// WithDatabase keeps the dev server's state in the SQLite file path, with
// the settings the local stack runs it with (cmd/stack/table.go): what a
// user's investigation waits for includes the server's writes.
func WithDatabase(path string) TemporalOption {
	return func(args *[]string) {
		*args = append(*args, "--db-filename", path, "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal")
	}
}

// StartTemporal starts a Temporal dev server (in memory unless WithDatabase, no UI) from the CLI
// that TemporalCLI finds, on a free port of 127.0.0.1, with the "default"
// namespace and the Keyword search attributes "AlertId" and "Verdict"
// registered (unless WithoutSearchAttributes). The caller must Stop it;
// FrontendHostPort gives its address and Client a connected client. ctx
// bounds the start-up only.
func StartTemporal(ctx context.Context, opts ...TemporalOption) (*testsuite.DevServer, error) {
	// Eager activities as the local stack runs them (cmd/stack/table.go).
	args := []string{"--search-attribute", alertIDAttribute + "=Keyword", "--search-attribute", verdictAttribute + "=Keyword", "--dynamic-config-value", "system.enableActivityEagerExecution=true"}
	for _, o := range opts {
		o(&args)
	}
	cli, err := TemporalCLI()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath: cli,
		ClientOptions: &client.Options{
			HostPort:  net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Namespace: "default",
			Logger:    logger,
		},
		LogLevel:  "error",
		Stdout:    io.Discard,
		Stderr:    os.Stderr,
		ExtraArgs: args,
	})
	if err != nil {
		return nil, fmt.Errorf("start the Temporal dev server (%s): %w", cli, err)
	}
	return srv, nil
}

// findEmulator returns the gcloud path after checking that the Firestore
// emulator and Java are installed.
func findEmulator() (string, error) {
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return "", errors.New("the Firestore emulator needs the gcloud CLI, which is not on PATH; install the Google Cloud CLI with its cloud-firestore-emulator component and Java 11 or newer")
	}
	// gcloud normally lives in SDK_ROOT/bin (often behind a symlink).
	if real, err := filepath.EvalSymlinks(gcloud); err == nil {
		root := filepath.Dir(filepath.Dir(real))
		if isFile(filepath.Join(root, "lib", "gcloud.py")) && !isDir(filepath.Join(root, "platform", "cloud-firestore-emulator")) {
			return "", fmt.Errorf("the gcloud component cloud-firestore-emulator is not installed in %s; install it with `gcloud components install cloud-firestore-emulator` or the google-cloud-cli-firestore-emulator package", root)
		}
	}
	if os.Getenv("JAVA_HOME") == "" {
		if _, err := exec.LookPath("java"); err != nil {
			return "", errors.New("the Firestore emulator needs Java 11 or newer, but java is not on PATH and JAVA_HOME is not set")
		}
	}
	return gcloud, nil
}

// waitFirestoreReady polls GET http://host/ until it returns 200, the
// emulator exits, or timeout passes.
func waitFirestoreReady(host string, exited <-chan struct{}, timeout time.Duration) error {
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	lastErr := errors.New("no answer yet")
	for {
		resp, err := c.Get("http://" + host + "/")
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			lastErr = fmt.Errorf("GET / returned %s", resp.Status)
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no ready answer within %s (last: %v)", timeout, lastErr)
		}
		select {
		case <-exited:
			return errExitedEarly
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errors.New("the file does not exist")
		}
		return err
	}
	if fi.IsDir() {
		return errors.New("it is a directory")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("the file is not executable")
	}
	return nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// tailBuffer is a concurrency-safe writer that keeps the last max bytes.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
