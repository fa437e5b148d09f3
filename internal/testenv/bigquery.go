package testenv

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/secops-agent/investigator/internal/procgroup"
)

// bigQueryReadyTimeout bounds the emulator's start: 0.14 s on an idle machine, over
// 40 s on a busy 2-core one (parallel test binaries, other emulators).
const bigQueryReadyTimeout = 2 * time.Minute

// BigQueryEmulator returns the path of the goccy/bigquery-emulator binary:
// $BIGQUERY_EMULATOR if set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/investigator/bin/bigquery-emulator.
func BigQueryEmulator() (string, error) {
	return cachedTool("the BigQuery emulator", "BIGQUERY_EMULATOR", "bigquery-emulator")
}

// bigQueryGoDebug turns off the Go runtime's invalid-pointer check for the
// emulator. Its ZetaSQL binding (go-zetasql helper.IntPtr) stores small
// integers, such as statement-kind enums, in unsafe.Pointer variables; when
// the runtime copies a goroutine stack holding one it aborts with "invalid
// pointer found on stack", which happens at random, often at start-up.
const bigQueryGoDebug = "invalidptr=0"

// bigQueryEmulatorEnv returns env with bigQueryGoDebug added to GODEBUG, for
// starting the BigQuery emulator.
func bigQueryEmulatorEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	debug := bigQueryGoDebug
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if v != "" {
				debug = v + "," + bigQueryGoDebug
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GODEBUG="+debug)
}

// StartBigQuery starts the BigQuery emulator on free ports of 127.0.0.1 with
// project and, when yamlFile is not empty, the datasets, tables and rows of
// that YAML file (--data-from-yaml). It waits until the emulator answers
// HTTP and returns its host:port (for bq.NewClient's emulatorHost, or
// option.WithEndpoint("http://"+host)) and a stop function that ends the
// emulator's process group and waits for it. stop is safe to call more than
// once.
func StartBigQuery(project, yamlFile string) (host string, stop func(), err error) {
	bin, err := BigQueryEmulator()
	if err != nil {
		return "", nil, err
	}
	if project == "" {
		return "", nil, errors.New("start the BigQuery emulator: a project ID is required")
	}
	if yamlFile != "" {
		if yamlFile, err = filepath.Abs(yamlFile); err != nil {
			return "", nil, fmt.Errorf("start the BigQuery emulator: %w", err)
		}
		if !isFile(yamlFile) {
			return "", nil, fmt.Errorf("start the BigQuery emulator: the data file %s does not exist", yamlFile)
		}
	}
	// A port found free can be taken before the emulator binds it, and the
	// emulator is a large cgo program that has been seen to abort at random
	// while starting: try again, on new ports, when either happens. A
	// deterministic failure (bad data file) fails every attempt.
	for attempt := 1; ; attempt++ {
		host, stop, err = startBigQueryOnce(bin, project, yamlFile)
		if err == nil || attempt == 3 || !retryableStart(err) {
			return host, stop, err
		}
		slog.Warn("testenv: the BigQuery emulator did not start; trying again", "attempt", attempt, "error", firstLine(err.Error()))
	}
}

func retryableStart(err error) bool {
	return portTaken(err) || errors.Is(err, errExitedEarly)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func startBigQueryOnce(bin, project, yamlFile string) (string, func(), error) {
	httpPort, err := FreePort()
	if err != nil {
		return "", nil, err
	}
	grpcPort, err := FreePort()
	for err == nil && grpcPort == httpPort {
		grpcPort, err = FreePort()
	}
	if err != nil {
		return "", nil, err
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort))
	args := []string{
		"--project=" + project,
		"--host=127.0.0.1",
		"--port=" + strconv.Itoa(httpPort),
		"--grpc-port=" + strconv.Itoa(grpcPort),
		"--log-level=error",
	}
	if yamlFile != "" {
		args = append(args, "--data-from-yaml="+yamlFile)
	}
	out := &tailBuffer{max: outputTail}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Env = bigQueryEmulatorEnv(os.Environ())
	// In a group that dies with this process (startGuarded).
	pgid, err := startGuarded(cmd)
	if err != nil {
		return "", nil, fmt.Errorf("start the BigQuery emulator %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	var once sync.Once
	stop := func() { once.Do(func() { stopBigQuery(pgid, done) }) }

	if err := waitBigQueryReady(host, project, done, bigQueryReadyTimeout); err != nil {
		stop()
		return "", nil, fmt.Errorf("the BigQuery emulator on %s did not start: %w\nemulator output:\n%s", host, err, out.String())
	}
	return host, stop, nil
}

// BigQuery starts a BigQuery emulator for the test with project and the
// data of yamlFile, stops it when the test ends, and returns its host:port.
func BigQuery(tb testing.TB, project, yamlFile string) string {
	tb.Helper()
	host, stop, err := StartBigQuery(project, yamlFile)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(stop)
	return host
}

// waitBigQueryReady polls the project's dataset list until it returns 200,
// the emulator exits, or timeout passes. (GET / answers 500 even when the
// emulator is up.)
func waitBigQueryReady(host, project string, exited <-chan struct{}, timeout time.Duration) error {
	c := &http.Client{Timeout: 2 * time.Second}
	u := "http://" + host + "/bigquery/v2/projects/" + url.PathEscape(project) + "/datasets"
	deadline := time.Now().Add(timeout)
	lastErr := errors.New("no answer yet")
	for {
		resp, err := c.Get(u)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			lastErr = fmt.Errorf("GET %s returned %s", u, resp.Status)
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no ready answer within %s (last: %v)", timeout, lastErr)
		}
		select {
		case <-exited:
			return errExitedEarly
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopBigQuery ends the process group pgid (SIGTERM, then SIGKILL after
// stopGrace) and waits until the emulator has exited.
func stopBigQuery(pgid int, done <-chan struct{}) {
	kill := func(sig syscall.Signal) {
		if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			slog.Warn("testenv: cannot signal the BigQuery emulator", "pgid", pgid, "signal", sig, "error", err)
		}
	}
	kill(syscall.SIGTERM)
	if !procgroup.WaitGone(pgid, stopGrace) {
		kill(syscall.SIGKILL)
		if !procgroup.WaitGone(pgid, killWait) {
			slog.Warn("testenv: the BigQuery emulator did not exit after SIGKILL", "pgid", pgid)
		}
	}
	select {
	case <-done:
	case <-time.After(killWait):
		slog.Warn("testenv: the BigQuery emulator's output is still open after stop", "pgid", pgid)
	}
}
