package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/gemini/standin"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools/mcp/mcptest"
)

// mcpWorker restarts the worker with an MCP configuration naming a
// stranger's server over stdio (this test binary, mcptest.ServeIfAsked),
// whose tool names no code of the product knows; it returns the file the
// server logs its calls to.
func mcpWorker(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	logFile, cfg := filepath.Join(dir, "calls.jsonl"), filepath.Join(dir, "mcp.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("servers:\n  stranger:\n    command: "+exe+"\n    env: {"+mcptest.ServeEnv+": STRANGER_LOG}\n    read_only: [asset_owner_lookup]\n"), 0o600))
	restartWorker(t, "MCP_CONFIG="+cfg, "STRANGER_LOG="+logFile)
	return logFile
}

// startStandin starts an investigation of the example alert scripted by
// the stand-in and returns its workflow ID.
func startStandin(t *testing.T, args ...string) string {
	t.Helper()
	require.NoError(t, testenv.ResetFirestore(fsHost, testenv.Project))
	model.use(t, standin.Handler())
	res := starter(t, nil, append([]string{"investigate", "--alert", exampleAlert, "--detach"}, args...)...)
	require.Equal(t, 0, res.code, res.stderr)
	return workflowIDFrom(t, res.stdout)
}

// pendingAction waits until the investigation waits on an action and
// returns it.
func pendingAction(t *testing.T, id string) investigation.Action {
	t.Helper()
	st := statusWhen(t, id, "an action waited for approval", func(st investigation.Status) bool {
		return slices.ContainsFunc(st.Actions, func(a investigation.Action) bool { return a.Status == investigation.ActionPending })
	})
	i := slices.IndexFunc(st.Actions, func(a investigation.Action) bool { return a.Status == investigation.ActionPending })
	return st.Actions[i]
}

// concludedStatus waits for the investigation's conclusion (it then idles)
// and returns its status.
func concludedStatus(t *testing.T, id string) investigation.Status {
	t.Helper()
	return statusWhen(t, id, "the investigation concluded", func(st investigation.Status) bool { return st.Phase == investigation.PhaseIdle })
}

// decide waits for the action, sends the decision (approve-call or
// deny-call with its arguments) and returns the status once concluded.
func decide(t *testing.T, id, command string, args ...string) investigation.Status {
	t.Helper()
	act := pendingAction(t, id)
	res := starter(t, nil, append([]string{command, id, act.CallID}, args...)...)
	require.Equal(t, 0, res.code, res.stderr)
	return concludedStatus(t, id)
}

// statusWhen polls the status query until done says so, for two minutes.
func statusWhen(t *testing.T, id, what string, done func(investigation.Status) bool) investigation.Status {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		v, err := tc.QueryWorkflow(context.Background(), id, "", investigation.StatusQuery)
		if err != nil {
			continue
		}
		var st investigation.Status
		require.NoError(t, v.Get(&st))
		if done(st) {
			return st
		}
	}
	t.Fatalf("not within 2 minutes: %s\n%s", what, workerLog.String())
	return investigation.Status{}
}

// TestMCPStrangerServer: a server nobody wrote for this product,
// configured through MCP_CONFIG, is listed by starter tools with its state;
// the stand-in's plan calls its read tool and asks for its action (not
// annotated, so it acts), which waits for approval: approved, it runs and
// the server sees the call; the conclusion lists it.
func TestMCPStrangerServer(t *testing.T) {
	logFile := mcpWorker(t)
	tools := starter(t, nil, "tools")
	require.Equal(t, 0, tools.code, tools.stderr)
	for _, want := range []string{"stranger.asset_owner_lookup", "stranger.quarantine_endpoint", "enabled, acts (approval)", "stranger", "stdio", "connected", "2 tools"} {
		require.Contains(t, tools.stdout, want)
	}

	id := startStandin(t)
	act := pendingAction(t, id)
	require.Equal(t, "stranger.quarantine_endpoint", act.Tool)
	require.Contains(t, act.Args, "198.51.100.23")
	calls, err := mcptest.ReadLog(logFile)
	require.NoError(t, err)
	for _, c := range calls {
		require.NotEqual(t, "quarantine_endpoint", c.Tool, "the action ran before it was approved")
	}
	status := starter(t, nil, "status", id)
	require.Contains(t, status.stdout, "starter approve-call "+id+" "+act.CallID)

	ok := starter(t, nil, "approve-call", id, act.CallID)
	require.Equal(t, 0, ok.code, ok.stderr)
	st := concludedStatus(t, id)
	calls, err = mcptest.ReadLog(logFile)
	require.NoError(t, err)
	var tools2 []string
	for _, c := range calls {
		tools2 = append(tools2, c.Tool)
	}
	require.Contains(t, tools2, "asset_owner_lookup", "the plan's read tool was called")
	require.Contains(t, tools2, "quarantine_endpoint", "the approved action ran")
	require.Len(t, st.Actions, 1)
	require.Equal(t, investigation.ActionApproved, st.Actions[0].Status)
	closeIdle(t, id)
}

// TestMCPActionDeniedAndExpired: a denial is the call's result, the server
// never sees the call, and the conclusion lists the action as denied with
// the reason; an action left without a decision expires.
func TestMCPActionDeniedAndExpired(t *testing.T) {
	logFile := mcpWorker(t)
	id := startStandin(t)
	st := decide(t, id, "deny-call", "that host is the CEO's laptop")
	require.Equal(t, investigation.ActionDenied, st.Actions[0].Status)
	require.Equal(t, "that host is the CEO's laptop", st.Actions[0].Note)
	closeIdle(t, id)
	watch := starter(t, nil, "watch", id)
	require.Contains(t, watch.stdout, "## Actions requested")
	require.Regexp(t, `stranger\.quarantine_endpoint.*\*\*denied\*\* \(that host is the CEO's laptop\)`, watch.stdout)
	calls, err := mcptest.ReadLog(logFile)
	require.NoError(t, err)
	for _, c := range calls {
		require.NotEqual(t, "quarantine_endpoint", c.Tool, "a denied action ran")
	}

	id = startStandin(t, "--approval-timeout", "2s")
	st = concludedStatus(t, id)
	require.Equal(t, investigation.ActionExpired, st.Actions[0].Status)
	require.True(t, strings.HasPrefix(st.Actions[0].Note, "no decision within 2s"), st.Actions[0].Note)
	closeIdle(t, id)
}

// responseConfig writes an MCP configuration for the example response
// server (cmd/response-server) over stdio, with its state in a directory
// of the test's; tools is its allow list ("" for every tool).
func responseConfig(t *testing.T, dir, tools string) string {
	t.Helper()
	inv, err := filepath.Abs(filepath.Join("..", "examples", "mcp", "inventory.json"))
	require.NoError(t, err)
	cfg := filepath.Join(dir, "mcp-"+strings.ReplaceAll(tools, ",", "-")+".yaml")
	yaml := "servers:\n  response:\n    command: " + filepath.Join(bin, "response-server") +
		"\n    args: [--inventory, " + inv + ", --state-dir, " + filepath.Join(dir, "state") + "]\n    read_only: [lookup_host, list_blocked]\n"
	if tools != "" {
		yaml += "    tools: [" + tools + "]\n"
	}
	require.NoError(t, os.WriteFile(cfg, []byte(yaml), 0o600))
	return cfg
}

// blocked reads the response server's list of blocked addresses.
func blocked(t *testing.T, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "state", "blocked-ips.txt"))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(raw)
}

// TestMCPResponseServer: the local stack's response server over stdio. The
// plan reads with lookup_host and list_blocked and asks to block the
// alert's address; the test approves and the file changes; the conclusion
// lists the action as approved.
func TestMCPResponseServer(t *testing.T) {
	dir := t.TempDir()
	restartWorker(t, "MCP_CONFIG="+responseConfig(t, dir, ""))
	id := startStandin(t)
	act := pendingAction(t, id)
	require.Equal(t, "response.block_ip", act.Tool)
	require.Contains(t, act.Args, `"ip":"198.51.100.23"`)
	require.Empty(t, blocked(t, dir), "nothing is blocked before the approval")
	ok := starter(t, nil, "approve-call", id, act.CallID)
	require.Equal(t, 0, ok.code, ok.stderr)
	require.Contains(t, ok.stdout, "approved")
	st := concludedStatus(t, id)
	require.Contains(t, blocked(t, dir), "198.51.100.23")
	require.Equal(t, investigation.ActionApproved, st.Actions[0].Status)
	closeIdle(t, id)
	watch := starter(t, nil, "watch", id)
	require.Contains(t, watch.stdout, "-> response.lookup_host")
	require.Regexp(t, `response\.block_ip.*\*\*approved\*\*`, watch.stdout)
	saveHistory(t, history(t, id), "mcp.history.json")
}

// TestMCPResponseServerHTTP: the same server over streamable HTTP; the
// analyst denies the action: the file does not change and the conclusion
// says it was denied and why.
func TestMCPResponseServerHTTP(t *testing.T) {
	dir := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	inv := filepath.Join("..", "examples", "mcp", "inventory.json")
	srv := exec.Command(filepath.Join(bin, "response-server"), "--http", addr, "--inventory", inv, "--state-dir", filepath.Join(dir, "state"))
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
	}
	cfg := filepath.Join(dir, "mcp.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("servers:\n  response:\n    url: http://"+addr+"/mcp\n    read_only: [lookup_host, list_blocked]\n"), 0o600))
	restartWorker(t, "MCP_CONFIG="+cfg)
	tools := starter(t, nil, "tools")
	require.Contains(t, tools.stdout, "response.block_ip")
	require.Regexp(t, `response\s+http\s+connected\s+4 tools`, tools.stdout)

	id := startStandin(t)
	st := decide(t, id, "deny-call", "198.51.100.23 is our scanner")
	require.Equal(t, investigation.ActionDenied, st.Actions[0].Status)
	require.Empty(t, blocked(t, dir), "a denied action does not run")
	closeIdle(t, id)
	watch := starter(t, nil, "watch", id)
	require.Regexp(t, `response\.block_ip.*\*\*denied\*\* \(198\.51\.100\.23 is our scanner\)`, watch.stdout)
}

// TestMCPWorkerRestartWhileApprovalWaits: the worker dies while an action
// waits, and comes back with the server's tool list changed (lookup_host
// and list_blocked no longer offered): nothing is lost, the approval runs
// the call, the file changes, and the step's next turn still declares the
// tools the plan recorded. Its history is the replay fixture of a tool
// list changed after the plan.
func TestMCPWorkerRestartWhileApprovalWaits(t *testing.T) {
	dir := t.TempDir()
	restartWorker(t, "MCP_CONFIG="+responseConfig(t, dir, ""))
	id := startStandin(t)
	act := pendingAction(t, id)
	// Once every other step is over, only the wait is left: the restart
	// meets nothing in flight but it.
	statusWhen(t, id, "only the action's step is left", func(st investigation.Status) bool {
		for _, s := range st.Plan.Steps {
			if s.ID != act.Step && (s.Status == plan.Pending || s.Status == plan.Running) {
				return false
			}
		}
		return true
	})
	before := modelTurnInputs(t, id)

	swapWorker(t, "MCP_CONFIG="+responseConfig(t, dir, "block_ip,disable_user"))
	tools := starter(t, nil, "tools")
	require.NotContains(t, tools.stdout, "response.lookup_host", "the server's tool list changed")
	require.Equal(t, act, pendingAction(t, id), "the wait survived the restart")

	ok := starter(t, nil, "approve-call", id, act.CallID)
	require.Equal(t, 0, ok.code, ok.stderr)
	st := concludedStatus(t, id)
	require.Contains(t, blocked(t, dir), "198.51.100.23")
	require.Equal(t, investigation.ActionApproved, st.Actions[0].Status)
	// The acting step's turn after the change declares block_ip as its
	// first turn did, from the plan's record.
	turns := modelTurnInputs(t, id)
	var first, later []toolcall.Tool
	for i, in := range turns {
		if in.Step.ID != act.Step {
			continue
		}
		if i < len(before) && first == nil {
			first = in.Declared
		}
		if i >= len(before) {
			later = in.Declared
		}
	}
	require.NotEmpty(t, first)
	require.Equal(t, first, later, "a turn after the change declares what the plan recorded")
	closeIdle(t, id)
	saveHistory(t, history(t, id), "mcp-changed.history.json")
}

// modelTurnInputs are the inputs of the ModelTurn activities of a run, in
// order.
func modelTurnInputs(t *testing.T, id string) []activities.TurnInput {
	t.Helper()
	var out []activities.TurnInput
	for _, e := range history(t, id).Events {
		a := e.GetActivityTaskScheduledEventAttributes()
		if a.GetActivityType().GetName() != "ModelTurn" {
			continue
		}
		var in activities.TurnInput
		require.NoError(t, json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in))
		out = append(out, in)
	}
	return out
}
