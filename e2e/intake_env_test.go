package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/gpubsub"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/investigation"
)

// intakeEnv is one test's intake: its own Pub/Sub emulator (topics and
// subscriptions of starter intake setup), its own task queue and worker
// (no BigQuery sub-agent, verdicts to the results topic and to the test's
// Slack receiver), and the intake processes the test starts. A queue of
// its own gives the test its own admission workflow.
type intakeEnv struct {
	t       *testing.T
	queue   string
	psHost  string
	env     []string
	clients *gpubsub.Clients
	slack   *slackReceiver
	nonce   string
	worker  *exec.Cmd
	wlog    *syncBuffer
}

// intakeOption changes an intakeEnv before its worker starts.
type intakeOption func(*intakeEnv)

// withFirestore points the test's worker and intakes at another Firestore.
func withFirestore(host string) intakeOption {
	return func(e *intakeEnv) { e.env = setEnv(e.env, "FIRESTORE_EMULATOR_HOST", host) }
}

// withAckDeadline creates the intake's subscription with this ack deadline
// (60 s otherwise): how soon the messages of a killed intake come back.
func withAckDeadline(d time.Duration) intakeOption {
	return func(e *intakeEnv) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(e.t, e.clients.EnsureTopic(ctx, e.topic(intake.TopicAlerts)))
		require.NoError(e.t, e.clients.EnsureSubscription(ctx, e.sub(intake.SubscriptionIntake), e.topic(intake.TopicAlerts), d))
	}
}

func newIntakeEnv(t *testing.T, opts ...intakeOption) *intakeEnv {
	t.Helper()
	host, stop, err := testenv.StartPubSub(testenv.Project)
	require.NoError(t, err)
	t.Cleanup(stop)
	e := &intakeEnv{t: t, psHost: host, clients: &gpubsub.Clients{}, nonce: nonce(), slack: newSlackReceiver(t)}
	t.Setenv("PUBSUB_EMULATOR_HOST", host) // this process's Pub/Sub clients
	t.Cleanup(e.clients.Close)
	e.queue = "intake-e2e-" + e.nonce
	e.env = slices.DeleteFunc(slices.Clone(stack), func(kv string) bool { return strings.HasPrefix(kv, "BIGQUERY_TABLES_CONFIG=") })
	e.env = setEnv(e.env, "TEMPORAL_TASK_QUEUE", e.queue)
	e.env = setEnv(e.env, "PUBSUB_EMULATOR_HOST", host)
	e.env = setEnv(e.env, "SLACK_WEBHOOK_URL", e.slack.URL+"/services/T000/B000/e2e-secret-hook")
	// A Firestore database of its own: the alerts of a burst stay out of the
	// other tests' alert lists.
	e.env = setEnv(e.env, "FIRESTORE_DATABASE", "intake-"+e.nonce)
	for _, o := range opts {
		o(e)
	}
	setup := starterEnv(t, e.env, nil, "intake", "setup")
	require.Equal(t, 0, setup.code, setup.stderr)
	e.startWorker()
	t.Cleanup(e.cleanup)
	return e
}

func (e *intakeEnv) topic(id string) string { return intake.Topic(testenv.Project, id) }
func (e *intakeEnv) sub(id string) string   { return intake.Subscription(testenv.Project, id) }

func (e *intakeEnv) startWorker() {
	e.wlog = &syncBuffer{}
	e.worker = exec.Command(filepath.Join(bin, "worker"))
	e.worker.Env = e.env
	e.worker.Stdout, e.worker.Stderr = e.wlog, e.wlog
	require.NoError(e.t, e.worker.Start())
}

// cleanup stops the worker and terminates the queue's runs still open, so
// nothing of this test reaches the next one's model.
func (e *intakeEnv) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf(`TaskQueue = %q AND ExecutionStatus = "Running"`, e.queue), PageSize: 1000})
	if err == nil {
		for _, ex := range resp.GetExecutions() {
			_ = tc.TerminateWorkflow(ctx, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId(), "e2e: "+e.t.Name()+" ended")
		}
	}
	_ = tc.TerminateWorkflow(ctx, intake.AdmissionID(e.queue), "", "e2e: "+e.t.Name()+" ended")
	_ = e.worker.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = e.worker.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = e.worker.Process.Kill()
	}
	if e.t.Failed() {
		e.t.Logf("--- intake worker log ---\n%s", e.wlog.String())
	}
}

// intakeProc is one running starter intake.
type intakeProc struct {
	cmd *exec.Cmd
	log *syncBuffer
}

// startIntake starts starter intake with args and waits until it says it
// takes alerts.
func (e *intakeEnv) startIntake(args ...string) *intakeProc {
	e.t.Helper()
	p := &intakeProc{log: &syncBuffer{}}
	p.cmd = exec.Command(filepath.Join(bin, "starter"), append([]string{"intake", "--log-level", "info"}, args...)...)
	p.cmd.Env = e.env
	p.cmd.Dir = ".."
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	require.NoError(e.t, p.cmd.Start())
	e.t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
		}
		if e.t.Failed() {
			e.t.Logf("--- intake %v log ---\n%s", args, p.log.String())
		}
	})
	require.Eventually(e.t, func() bool {
		return strings.Contains(p.log.String(), "intake: taking alerts") || strings.Contains(p.log.String(), "intake: webhook on")
	}, 30*time.Second, 50*time.Millisecond, "the intake did not start:\n%s", atFailure(p.log.String))
	return p
}

// publish publishes each message to the alerts topic, all at once.
func (e *intakeEnv) publish(msgs ...[]byte) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := e.clients.Publisher(ctx, e.topic(intake.TopicAlerts))
	require.NoError(e.t, err)
	var results []*pubsub.PublishResult
	for _, m := range msgs {
		results = append(results, p.Publish(ctx, &pubsub.Message{Data: m}))
	}
	for _, r := range results {
		_, err := r.Get(ctx)
		require.NoError(e.t, err)
	}
}

// pull reads every message a watch subscription holds (none new for wait).
func (e *intakeEnv) pull(sub string, wait time.Duration) []*pubsub.Message {
	e.t.Helper()
	got, err := e.clients.Drain(context.Background(), e.sub(sub), wait)
	require.NoError(e.t, err)
	return got
}

// status queries the queue's admission workflow.
func (e *intakeEnv) status() (intake.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st intake.Status
	v, err := tc.QueryWorkflow(ctx, intake.AdmissionID(e.queue), "", intake.StatusQuery)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// atFailure is a failure message written when the failure is reported,
// not when the assertion starts waiting (testify formats its arguments
// then, so a Stringer is read at the failure).
type atFailure func() string

func (f atFailure) String() string { return f() }

// statusNow is the admission workflow's status as a failure message reads
// it: queried when the failure is reported.
func (e *intakeEnv) statusNow() atFailure {
	return func() string {
		st, err := e.status()
		if err != nil {
			return fmt.Sprintf("admission status unreadable: %v", err)
		}
		return fmt.Sprintf("admission: %+v", st)
	}
}

// waitSettled waits until the admission workflow has taken n alerts and
// nothing runs or waits any more.
func (e *intakeEnv) waitSettled(n int64, timeout time.Duration) intake.Status {
	e.t.Helper()
	var st intake.Status
	require.Eventually(e.t, func() bool {
		var err error
		st, err = e.status()
		return err == nil && st.Alerts >= n && st.Running == 0 && st.Waiting == 0
	}, timeout, 250*time.Millisecond, "the intake did not settle: %s", e.statusNow())
	return st
}

// investigations lists the queue's Investigation workflows: workflow ID →
// its runs.
func (e *intakeEnv) investigations() map[string]int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runs := map[string]int{}
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`TaskQueue = %q AND WorkflowType = %q`, e.queue, investigation.WorkflowName), PageSize: 1000, NextPageToken: token})
		require.NoError(e.t, err)
		for _, ex := range resp.GetExecutions() {
			if ex.GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
				runs[ex.GetExecution().GetWorkflowId()]++
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return runs
		}
	}
}

// slackReceiver stands in for Slack's incoming webhooks: it keeps every
// message posted and answers with the statuses queued in fail, then 200 ok.
type slackReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	messages []map[string]any
	raw      []string
	fail     []int
}

func newSlackReceiver(t *testing.T) *slackReceiver {
	s := &slackReceiver{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.fail) > 0 {
			status := s.fail[0]
			s.fail = s.fail[1:]
			w.WriteHeader(status)
			_, _ = w.Write([]byte("no_service"))
			return
		}
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			s.messages = append(s.messages, m)
			s.raw = append(s.raw, string(body))
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *slackReceiver) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.raw)
}

func setEnv(env []string, name, value string) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	return append(env, name+"="+value)
}

func nonce() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// guardDuty is a GuardDuty finding: the identity is account and id; the
// attacker's address is its remote IP.
type guardDuty struct {
	Account, ID, RemoteIP, Instance, Title string
	Count                                  int
	Severity                               float64
}

func (g guardDuty) json() []byte {
	b, _ := json.Marshal(map[string]any{
		"schemaVersion": "2.0", "accountId": g.Account, "region": "us-east-1", "id": g.ID,
		"type": "UnauthorizedAccess:EC2/SSHBruteForce", "severity": g.Severity, "title": g.Title,
		"createdAt": "2026-11-20T08:00:00Z", "updatedAt": "2026-11-20T08:15:00Z",
		"resource": map[string]any{"resourceType": "Instance", "instanceDetails": map[string]any{"instanceId": g.Instance}},
		"service": map[string]any{"serviceName": "guardduty", "count": g.Count, "action": map[string]any{
			"actionType": "NETWORK_CONNECTION", "networkConnectionAction": map[string]any{
				"connectionDirection": "INBOUND", "remoteIpDetails": map[string]any{"ipAddressV4": g.RemoteIP}}}},
	})
	return b
}

func (g guardDuty) identity() string { return "guardduty:" + g.Account + ":" + g.ID }

// eventBridge wraps a finding as EventBridge delivers it.
func eventBridge(finding []byte, id string) []byte {
	b, _ := json.Marshal(map[string]any{"version": "0", "id": id, "detail-type": "GuardDuty Finding", "source": "aws.guardduty",
		"time": "2026-11-20T08:15:00Z", "detail": json.RawMessage(finding)})
	return b
}
