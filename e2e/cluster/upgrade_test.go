package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	deploymentpb "go.temporal.io/api/deployment/v1"
	"go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

const deploymentName = "investigator"

// TestClusterRollingUpgrade runs the steps of design/versioning.md ("A new
// Worker Deployment Version") on the cluster. Its two workers run build A;
// ten investigations conclude and wait idle for follow-ups, ten more are
// in the middle of their work, when build B's worker starts beside them
// and is made current. Build B is today's source with one workflow change
// made as the guide says (buildB): so each run shows which code ran it.
// Then: the ten busy ones finish on A with A's behaviour (pinned), a new
// investigation starts on B with B's, each idle one moves to B at the
// continue-as-new its follow-up triggers and shows B's behaviour from
// then on, Temporal reports A drained, and A's workers are stopped. A
// fresh B worker then replays every moved run, and no workflow task of
// any run failed.
func TestClusterRollingUpgrade(t *testing.T) {
	workerB := buildB(t)
	m := newModel(t, 0)
	c := startCluster(t, m, withEnv("TEMPORAL_DEPLOYMENT_NAME", deploymentName), withEnv("TEMPORAL_WORKER_BUILD_ID", "A"))
	// Step 2 for the first version: nothing runs until a version is current.
	c.temporalCLI("worker", "deployment", "set-current-version", "--deployment-name", deploymentName, "--build-id", "A", "--yes")
	// An intake's admission workflow never ends: it is moved off A the
	// way the guide says for such a workflow (below), if one runs.
	alerts := c.alertFiles(21)

	idle := make([]string, 10)
	for i := range idle {
		idle[i] = c.investigate(alerts[i])
	}
	for _, id := range idle {
		c.waitPhase(id, investigation.PhaseIdle)
	}
	// The next ten are slow: their model calls take 2 s each.
	m.setLatency(2 * time.Second)
	busy := make([]string, 10)
	for i := range busy {
		busy[i] = c.investigate(alerts[10+i])
	}
	time.Sleep(3 * time.Second) // each has begun its plan on A

	// Step 1: build B's worker beside A's.
	b := c.startWorker(workerB, "B", "worker-B")
	defer b.stop()
	c.waitVersionPolls("B")
	// Step 2: make B current.
	c.temporalCLI("worker", "deployment", "set-current-version", "--deployment-name", deploymentName, "--build-id", "B", "--yes")
	m.setLatency(0)

	// Step 3: a new investigation starts on B and runs B's code; the
	// running ones stay on A and run A's.
	fresh := c.investigate(alerts[20])
	c.waitPhase(fresh, investigation.PhaseIdle)
	require.Equal(t, "B", c.version(fresh), "a new investigation starts on the current version")
	require.True(t, c.changed(fresh, ""), "a new investigation runs B's code")
	for _, id := range busy {
		c.waitPhase(id, investigation.PhaseIdle)
		require.Equal(t, "A", c.version(id), "%s: a running investigation finishes on the version it started on", id)
		require.False(t, c.changed(id, ""), "%s: a running investigation finishes with A's code", id)
	}
	for _, id := range idle {
		require.Equal(t, "A", c.version(id), "%s: an idle investigation stays on A until it continues as new", id)
		require.False(t, c.changed(id, ""), "%s: an idle investigation still runs A's code", id)
	}
	// Step 4: a follow-up makes an idle run continue as new (its history is
	// past --max-history-events) and the new run starts on B, with B's code.
	moved := append(append([]string{}, idle...), busy...)
	for _, id := range moved {
		c.starter("ask", id, "What should we check next?", "--detach")
	}
	for _, id := range moved {
		require.Eventually(t, func() bool { return c.runCount(id) >= 2 }, 3*time.Minute, 500*time.Millisecond, "%s did not continue as new", id)
		c.waitPhase(id, investigation.PhaseIdle)
		require.Equal(t, "B", c.version(id), "%s: moved to B at its continue-as-new", id)
		require.True(t, c.changed(id, ""), "%s: runs B's code after the move", id)
		runs := c.runIDs(id)
		require.False(t, c.changed(id, runs[0]), "%s: its first run ran A's code", id)
	}
	// A workflow that never idles (the intake's admission) is moved by hand.
	if d, err := c.tc.DescribeWorkflowExecution(context.Background(), intake.AdmissionID(investigation.DefaultQueue), ""); err == nil &&
		d.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		c.temporalCLI("workflow", "update-options", "--workflow-id", intake.AdmissionID(investigation.DefaultQueue), "--versioning-override-behavior", "auto_upgrade")
	}
	// Step 5: A drains, then its workers stop.
	require.Eventually(t, func() bool { return c.drainage("A") == enums.VERSION_DRAINAGE_STATUS_DRAINED }, 3*time.Minute, time.Second,
		"version A is not drained: %s", c.drainage("A"))
	for _, w := range []string{"worker-1", "worker-2"} {
		c.signal(w, syscall.SIGTERM)
	}
	// A fresh B worker, with nothing cached, replays each moved run to
	// answer its query, and B alone answers a follow-up on one.
	b.stop()
	b2 := c.startWorker(workerB, "B", "worker-B-restarted")
	defer b2.stop()
	for _, id := range append(moved, fresh) {
		c.waitPhase(id, investigation.PhaseIdle)
	}
	turn := c.followUps(idle[0])
	c.starter("ask", idle[0], "And the user accounts?", "--detach")
	require.Eventually(t, func() bool { return c.followUps(idle[0]) > turn }, 2*time.Minute, 500*time.Millisecond, "B did not answer alone")
	c.waitPhase(idle[0], investigation.PhaseIdle)
	require.True(t, c.changed(idle[0], ""), "B's code answered")

	// No workflow task failed in any run, and no worker logged a
	// nondeterminism error (a replay that decided differently).
	runs := 0
	for _, id := range append(moved, fresh, intake.AdmissionID(investigation.DefaultQueue)) {
		for _, run := range c.runIDs(id) {
			runs++
			for _, e := range c.history(id, run) {
				require.NotEqual(t, enums.EVENT_TYPE_WORKFLOW_TASK_FAILED, e.GetEventType(), "%s run %s: a workflow task failed: %v", id, run, e.GetWorkflowTaskFailedEventAttributes())
			}
		}
	}
	logs, _ := filepath.Glob(filepath.Join(c.data, "logs", "worker*.log"))
	require.NotEmpty(t, logs)
	for _, l := range logs {
		b, err := os.ReadFile(l)
		require.NoError(t, err)
		require.NotContains(t, strings.ToLower(string(b)), "nondetermin", "%s logs a nondeterminism error", filepath.Base(l))
	}
	t.Logf("REPORT rolling upgrade: 20 investigations on A (10 idle, 10 busy), B (a changed workflow: gate %q) deployed and made current; new one on B with B's code, 10 busy finished on A with A's, 20 moved to B at continue-as-new and ran B's code, A drained, A's workers stopped, a restarted B replayed the moved runs and answered alone; %d runs, no workflow task failed, %d worker logs without a nondeterminism error",
		changeID, runs, len(logs))
}

// Build B's change: a workflow.GetVersion gate at the start of each
// Investigation run whose new branch upserts the memo field changeMemo,
// which DescribeWorkflowExecution shows for each run.
const (
	changeID   = "upgrade-rehearsal-memo"
	changeMemo = "changed-in-build-b"
)

// buildB builds build B's worker: today's source with workflows/
// investigation.go replaced, through `go build -overlay`, by a copy that
// holds the change, made the way design/versioning.md says. The product
// holds no test-only code; the test stands in for the developer's edit.
func buildB(t *testing.T) string {
	t.Helper()
	src := filepath.Join(root, "workflows", "investigation.go")
	code, err := os.ReadFile(src)
	require.NoError(t, err)
	// The anchor is a line of Investigation's start; if it moves, the
	// test says so here rather than building an unchanged B.
	const anchor = "\tr.startProgressWriter(ctx)\n"
	require.Equal(t, 1, strings.Count(string(code), anchor), "build B's change needs the line %q once in %s", anchor, src)
	gate := fmt.Sprintf("\tif workflow.GetVersion(ctx, %q, workflow.DefaultVersion, 1) == 1 {\n"+
		"\t\tif err := workflow.UpsertMemo(ctx, map[string]any{%q: true}); err != nil {\n"+
		"\t\t\treturn investigation.Result{}, err\n\t\t}\n\t}\n", changeID, changeMemo)
	dir := t.TempDir()
	changed := filepath.Join(dir, "investigation.go")
	require.NoError(t, os.WriteFile(changed, []byte(strings.Replace(string(code), anchor, gate+anchor, 1)), 0o644))
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {src: changed}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644))
	worker := filepath.Join(dir, "worker")
	cmd := exec.Command("go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", worker, "./worker")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "build B:\n%s", out)
	return worker
}

// changed says whether a run of id (the latest when run is "") ran build
// B's code: its memo holds the field B's change upserts.
func (c *cluster) changed(id, run string) bool {
	c.t.Helper()
	d, err := c.tc.DescribeWorkflowExecution(context.Background(), id, run)
	require.NoError(c.t, err)
	_, ok := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[changeMemo]
	return ok
}

// runIDs are the run IDs of id, oldest first.
func (c *cluster) runIDs(id string) []string {
	var runs []*workflowpb.WorkflowExecutionInfo
	for _, page := range c.runs(fmt.Sprintf("WorkflowId = %q", id)) {
		runs = append(runs, page.GetExecutions()...)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].GetStartTime().AsTime().Before(runs[j].GetStartTime().AsTime()) })
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.GetExecution().GetRunId()
	}
	return ids
}

// temporalCLI runs the Temporal CLI against the cluster.
func (c *cluster) temporalCLI(args ...string) string {
	c.t.Helper()
	cli := os.Getenv("TEMPORAL_CLI")
	if cli == "" {
		home, _ := os.UserHomeDir()
		cli = filepath.Join(home, ".cache", "investigator", "bin", "temporal")
	}
	cmd := exec.Command(cli, append(args, "--address", c.addr("TEMPORAL"), "--namespace", "default")...)
	out, err := cmd.CombinedOutput()
	require.NoError(c.t, err, "temporal %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// starterEnv is the cluster's environment with .data/stack.env's settings.
func (c *cluster) starterEnv() []string {
	env := c.env
	b, err := os.ReadFile(filepath.Join(c.data, "stack.env"))
	require.NoError(c.t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if kv, ok := strings.CutPrefix(line, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env = setEnv(env, k, strings.Trim(v, "'"))
		}
	}
	return env
}

func (c *cluster) starter(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(bin, "starter"), args...)
	cmd.Env, cmd.Dir = c.starterEnv(), root
	out, err := cmd.CombinedOutput()
	require.NoError(c.t, err, "starter %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// investigate starts an investigation of the alert file (detached) with a
// low continue-as-new threshold, and returns its workflow ID.
func (c *cluster) investigate(alert string) string {
	c.t.Helper()
	out := c.starter("investigate", "--alert", alert, "--detach", "--max-history-events", "50")
	for _, line := range strings.Split(out, "\n") {
		if id, ok := strings.CutPrefix(line, "Workflow ID:"); ok {
			return strings.TrimSpace(id)
		}
	}
	c.t.Fatalf("no workflow ID in:\n%s", out)
	return ""
}

// alertFiles writes n copies of the example GuardDuty alert, each with a
// finding ID of its own.
func (c *cluster) alertFiles(n int) []string {
	c.t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "examples/alerts/guardduty-ssh-bruteforce.json"))
	require.NoError(c.t, err)
	var finding map[string]any
	require.NoError(c.t, json.Unmarshal(raw, &finding))
	dir := c.t.TempDir()
	var files []string
	for i := range n {
		finding["id"] = fmt.Sprintf("%d%031d", time.Now().UnixNano()%10, i)
		b, _ := json.Marshal(finding)
		f := filepath.Join(dir, fmt.Sprintf("alert-%d.json", i))
		require.NoError(c.t, os.WriteFile(f, b, 0o644))
		files = append(files, f)
	}
	return files
}

// waitPhase waits until the investigation's latest run reports phase.
func (c *cluster) waitPhase(id, phase string) {
	c.t.Helper()
	var st investigation.Status
	require.Eventually(c.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, err := c.tc.QueryWorkflow(ctx, id, "", investigation.StatusQuery)
		return err == nil && v.Get(&st) == nil && st.Phase == phase
	}, 4*time.Minute, 300*time.Millisecond, "%s: phase %q, want %q", id, st.Phase, phase)
}

// version is the build ID the latest run of id is pinned to.
func (c *cluster) version(id string) string {
	c.t.Helper()
	d, err := c.tc.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(c.t, err)
	vi := d.GetWorkflowExecutionInfo().GetVersioningInfo()
	require.Equal(c.t, enums.VERSIONING_BEHAVIOR_PINNED, vi.GetBehavior(), "%s is pinned", id)
	return vi.GetDeploymentVersion().GetBuildId()
}

// runCount is the number of runs of id (each continue-as-new adds one).
func (c *cluster) runCount(id string) int {
	n := 0
	for _, page := range c.runs(fmt.Sprintf("WorkflowId = %q", id)) {
		n += len(page.GetExecutions())
	}
	return n
}

// followUps is the latest run's turn: one more with each exchange.
func (c *cluster) followUps(id string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st investigation.Status
	v, err := c.tc.QueryWorkflow(ctx, id, "", investigation.StatusQuery)
	if err != nil || v.Get(&st) != nil {
		return 0
	}
	return st.Turn
}

// describeVersion is what Temporal reports of a version of the deployment
// (nil when it cannot say).
func (c *cluster) describeVersion(build string) *deploymentpb.WorkerDeploymentVersionInfo {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.tc.WorkflowService().DescribeWorkerDeploymentVersion(ctx, &workflowservice.DescribeWorkerDeploymentVersionRequest{
		Namespace: "default", DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: deploymentName, BuildId: build}})
	if err != nil {
		return nil
	}
	return resp.GetWorkerDeploymentVersionInfo()
}

func (c *cluster) drainage(build string) enums.VersionDrainageStatus {
	return c.describeVersion(build).GetDrainageInfo().GetStatus()
}

// waitVersionPolls waits until the version's workers poll every task
// queue (and type) that version A's do: Temporal refuses to make current a
// version that would leave one of them unversioned.
func (c *cluster) waitVersionPolls(build string) {
	c.t.Helper()
	queues := func(b string) int { return len(c.describeVersion(b).GetTaskQueueInfos()) }
	require.Eventually(c.t, func() bool { n := queues(build); return n > 0 && n >= queues("A") }, time.Minute, 500*time.Millisecond,
		"version %s does not poll every task queue of A", build)
}

// signal sends sig to a service's process group and waits until it ends.
func (c *cluster) signal(name string, sig syscall.Signal) {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.data, "pids", name+".pid"))
	require.NoError(c.t, err, name)
	var pid int
	_, err = fmt.Sscan(strings.TrimSpace(string(b)), &pid)
	require.NoError(c.t, err)
	require.NoError(c.t, syscall.Kill(-pid, sig))
	require.Eventually(c.t, func() bool { return syscall.Kill(-pid, 0) != nil }, time.Minute, 100*time.Millisecond, "%s still runs", name)
}

// proc is a worker the test started itself (build B).
type proc struct {
	cmd  *exec.Cmd
	once sync.Once
}

// startWorker starts the worker binary as build, logging to logs/<name>.log.
func (c *cluster) startWorker(binary, build, name string) *proc {
	c.t.Helper()
	cmd := exec.Command(binary)
	cmd.Env = setEnv(c.starterEnv(), "TEMPORAL_WORKER_BUILD_ID", build)
	f, err := os.Create(filepath.Join(c.data, "logs", name+".log"))
	require.NoError(c.t, err)
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(c.t, cmd.Start())
	return &proc{cmd: cmd}
}

func (p *proc) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
		}
	})
}
