package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/testenv"
)

const saWarning = "warning: search attribute(s) [AlertId Verdict] not registered on namespace default"

// saScript is the model's side of a short investigation: a one-step plan,
// get_alert, a reflection and the conclusion.
func saScript(alertID string) geminitest.Handler {
	return geminitest.Script(
		func(*geminitest.Request) geminitest.Reply {
			return geminitest.JSON(map[string]any{
				"objective": "Decide whether the SSH brute force succeeded.",
				"steps":     []map[string]any{{"id": "s1", "description": "Read the full alert.", "tools": []string{"get_alert"}, "expected": "attacker IP"}},
			})
		},
		func(*geminitest.Request) geminitest.Reply {
			return geminitest.Calls(&genai.FunctionCall{Name: "get_alert", Args: map[string]any{"id": alertID}})
		},
		func(*geminitest.Request) geminitest.Reply {
			return geminitest.Text("198.51.100.23 tried SSH passwords.")
		},
		func(*geminitest.Request) geminitest.Reply {
			return geminitest.JSON(map[string]any{"achieved": true, "insights": []string{"No session was opened."}, "plan_updates": []any{}})
		},
		func(*geminitest.Request) geminitest.Reply {
			return geminitest.ConclusionCiting("## Summary\nThe brute force was real (search attribute e2e).", "true_positive", "high", "step_1", "get_alert")
		},
	)
}

// bareServer is a Temporal dev server started without any search attribute,
// as a server nobody prepared for the investigator, and the stack's
// environment pointed at it.
type bareServer struct {
	c   client.Client
	env []string
}

func startBareServer(t *testing.T) *bareServer {
	t.Helper()
	srv, err := testenv.StartTemporal(t.Context(), testenv.WithoutSearchAttributes())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Logger: log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s := &bareServer{c: c, env: append(append([]string(nil), stack...), "TEMPORAL_ADDRESS="+srv.FrontendHostPort(), "LOG_LEVEL=info")}
	require.Empty(t, s.attributes(t), "the server starts with no custom search attribute")
	return s
}

func (s *bareServer) attributes(t *testing.T) map[string]enums.IndexedValueType {
	t.Helper()
	resp, err := s.c.OperatorService().ListSearchAttributes(t.Context(), &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	require.NoError(t, err)
	return resp.GetCustomAttributes()
}

// bareWorker is a worker process on a bare server.
type bareWorker struct {
	log    *syncBuffer
	exited chan struct{}
}

// startWorker starts a worker on the server; it is stopped when the test
// ends.
func (s *bareServer) startWorker(t *testing.T, args ...string) *bareWorker {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "worker"), args...)
	cmd.Env = s.env
	w := &bareWorker{log: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.log, w.log
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); close(w.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-w.exited
		if t.Failed() {
			t.Logf("worker %v log:\n%s", args, w.log.String())
		}
	})
	return w
}

// started waits until the worker says it is starting, which it does after
// registering search attributes, and returns its log so far.
func (w *bareWorker) started(t *testing.T) string {
	t.Helper()
	for !strings.Contains(w.log.String(), "worker starting") {
		select {
		case <-w.exited:
			t.Fatalf("the worker exited at start-up:\n%s", w.log.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return w.log.String()
}

// investigate runs one investigation to its conclusion and returns the
// starter's stderr and the workflow's search attributes (name -> JSON),
// once the attribute named wait is set ("": at once).
func (s *bareServer) investigate(t *testing.T, wait string) (stderr string, attrs map[string]string) {
	t.Helper()
	id := exampleID(t)
	model.use(t, saScript(id))
	res := starterEnv(t, s.env, nil, "investigate", "--alert", exampleAlert)
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Contains(t, res.stdout, "The brute force was real (search attribute e2e).")
	require.Contains(t, res.stdout, "VERDICT  true_positive (high confidence)")
	// The conclusion reaches the progress store from inside the workflow
	// task whose completion records the attribute: the starter may print
	// it a few milliseconds before Temporal has it.
	wid := workflowIDFrom(t, res.stdout)
	require.Eventually(t, func() bool {
		desc, err := s.c.DescribeWorkflowExecution(t.Context(), wid, "")
		if err != nil {
			return false
		}
		attrs = map[string]string{}
		for name, p := range desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields() {
			attrs[name] = string(p.GetData())
		}
		_, set := attrs[wait]
		return set || wait == ""
	}, 10*time.Second, 20*time.Millisecond, "no %s search attribute", wait)
	return res.stderr, attrs
}

// TestSearchAttributesRegistered: two workers start at once on a server
// without the search attributes; they register them (neither warns), and an
// investigation then sets both, so that the Web UI finds it by them.
func TestSearchAttributesRegistered(t *testing.T) {
	s := startBareServer(t)
	workers := []*bareWorker{s.startWorker(t), s.startWorker(t)}
	registered := 0
	for _, w := range workers {
		log := w.started(t)
		require.NotContains(t, log, "search attributes not registered")
		if line := logLine(log, "registered search attributes"); line != "" {
			t.Logf("REPORT worker: %s", line)
			registered++
		}
	}
	require.NotZero(t, registered, "a worker registered them")
	attrs := s.attributes(t)
	require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, attrs["AlertId"])
	require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, attrs["Verdict"])

	stderr, set := s.investigate(t, "Verdict")
	require.NotContains(t, stderr, "warning: search attribute")
	id := exampleID(t)
	require.Equal(t, fmt.Sprintf("%q", id), set["AlertId"])
	require.Equal(t, `"true_positive"`, set["Verdict"])

	// The Web UI's filter finds it (visibility is updated asynchronously).
	query := fmt.Sprintf(`AlertId = %q AND Verdict = "true_positive"`, id)
	require.Eventually(t, func() bool {
		resp, err := s.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		return err == nil && len(resp.GetExecutions()) == 1
	}, time.Minute, 200*time.Millisecond, "no workflow matches %s", query)
}

// TestSearchAttributesNotRegistered: a worker told not to register them
// (as where the server refuses) leaves the server without them; the
// starter warns once and the investigation still reaches its conclusion,
// without the attributes.
func TestSearchAttributesNotRegistered(t *testing.T) {
	s := startBareServer(t)
	log := s.startWorker(t, "--register-search-attributes=false").started(t)
	require.NotContains(t, log, "search attributes not registered", "nothing to warn about: registration is off")
	require.Empty(t, s.attributes(t))

	stderr, set := s.investigate(t, "")
	require.Equal(t, 1, strings.Count(stderr, "warning: search attribute"), stderr)
	require.Contains(t, stderr, saWarning)
	require.NotContains(t, set, "AlertId")
	require.NotContains(t, set, "Verdict")
}

// TestSearchAttributeClash: where registration is impossible (AlertId is
// already registered as Text), the worker registers what it can, warns in
// one log line and serves; the starter warns once and the investigation
// reaches its conclusion with Verdict only.
func TestSearchAttributeClash(t *testing.T) {
	s := startBareServer(t)
	_, err := s.c.OperatorService().AddSearchAttributes(t.Context(), &operatorservice.AddSearchAttributesRequest{
		Namespace: "default", SearchAttributes: map[string]enums.IndexedValueType{"AlertId": enums.INDEXED_VALUE_TYPE_TEXT},
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.attributes(t)["AlertId"] == enums.INDEXED_VALUE_TYPE_TEXT }, time.Minute, 100*time.Millisecond)

	log := s.startWorker(t).started(t)
	require.Equal(t, 1, strings.Count(log, "search attributes not registered"), log)
	warning := logLine(log, "search attributes not registered")
	t.Logf("REPORT worker: %s", warning)
	require.Contains(t, warning, "level=WARN")
	require.Contains(t, warning, "missing=[AlertId]")
	require.Contains(t, warning, `reason="AlertId is registered as Text, not Keyword"`)
	require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, s.attributes(t)["Verdict"])

	stderr, set := s.investigate(t, "Verdict")
	require.Equal(t, 1, strings.Count(stderr, "warning: search attribute"), stderr)
	require.Contains(t, stderr, "warning: search attribute(s) [AlertId] not registered on namespace default")
	require.NotContains(t, set, "AlertId")
	require.Equal(t, `"true_positive"`, set["Verdict"])
}

// logLine is the first line of log that contains s, or "".
func logLine(log, s string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
