package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/gemini/standin"
	"github.com/secops-agent/investigator/internal/testenv"
)

const sccAlert = "examples/alerts/scc-cryptominer.json"

// demo investigates an alert with the offline stand-in (what
// bin/gemini-standin serves), a fresh memory store and the example past
// alerts imported, as `go tool task investigate` has them. It returns the
// starter's output and the workflow ID.
func demo(t *testing.T, alert string) (out, wfID string) {
	t.Helper()
	require.NoError(t, testenv.ResetFirestore(fsHost, testenv.Project))
	imp := starter(t, nil, append([]string{"alert", "import"}, historyFiles(t)...)...)
	require.Equal(t, 0, imp.code, imp.stderr)
	model.use(t, standin.Handler())
	res := starter(t, nil, "investigate", "--alert", alert)
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	t.Logf("REPORT demo stdout (%s):\n%s", alert, res.stdout)
	return res.stdout, workflowIDFrom(t, res.stdout)
}

// childIDs lists the child workflows a run started, from its history.
func childIDs(t *testing.T, wfID string) []string {
	t.Helper()
	var ids []string
	for _, e := range history(t, wfID).Events {
		if at := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); at != nil {
			ids = append(ids, at.GetWorkflowId())
		}
	}
	return ids
}

// TestDemoGuardDuty: the default example, as a newcomer without a Gemini
// key sees it. The stand-in plans three steps, reads the alert and searches
// earlier alerts for the remote IP in one turn, reads the earlier alert it
// found, asks the BigQuery sub-agent (a child workflow under the
// bigquery_agent call) whether the address logged in, adds a step to see
// what that session did (a second child that recalls what the first one
// learned), never asks the analyst, and concludes true_positive. The logs
// step runs alongside the first, which it does not depend on.
func TestDemoGuardDuty(t *testing.T) {
	id := exampleID(t)
	out, parentID := demo(t, exampleAlert)

	for _, want := range []string{
		"PLAN  Decide whether 198.51.100.23, the source of alert " + id + " (UnauthorizedAccess:EC2/SSHBruteForce), got into web-server-prod-01 (i-0abc1234def567890)",
		"step_1  Read alert " + id,
		"[get_alert, search_alerts]",
		"step_3  Ask bigquery_agent whether 198.51.100.23 logged in to web-server-prod-01 (i-0abc1234def567890) on 2026-11-20",
		"-> get_alert " + id,
		"-> search_alerts service.action.networkConnectionAction.remoteIpDetails.ipAddressV4 == 198.51.100.23",
		"1 earlier alert(s) involve 198.51.100.23: guardduty-8db0f55e83fd",
		"-> get_alert guardduty-8db0f55e83fd",
		`-> bigquery_agent request="Did 198.51.100.23 log in to web-server-prod-01 (i-0abc1234def567890) on 2026-11-20`,
		"(child workflow " + parentID + "-bq-t1-step_3-i1-c1)",
		"198.51.100.23 logged in to web-server-prod-01 as deploy at 2026-11-20 08:14:52 UTC (password) after 214 failed attempts there",
		"plan: add_step step_4",
		"(child workflow " + parentID + "-bq-t1-step_4-i1-c1)",
		"COMMAND=/usr/bin/bash /tmp/.x.sh",
		"Written by the offline Gemini stand-in, not by a model.",
		"## Key findings", "## Assessment", "## Uncertainties", "## Recommended actions",
		"VERDICT  true_positive (high confidence)",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "QUESTION", "the stand-in never asks the analyst")
	require.Regexp(t, `(?m)^PLAN  .*\n(  step_\d  .*\n          expect: .*\n){3}`, out, "three planned steps")
	require.Regexp(t, `(?m)^  - .*\[step_3, bigquery_agent\]$`, out, "evidence names the step and tool")
	require.Regexp(t, `(?m)^  - .*guardduty-8db0f55e83fd.*\[step_1, search_alerts\]$`, out)

	// step_3 (the logs) does not need step_1: they ran side by side, and
	// the lines of each name their step while both run.
	require.Regexp(t, `(?s)\nSTEP  step_1: .*\nSTEP  step_3: .*\n\[step_1\]  done: `, out, "step_3 started before step_1 was done")
	saveHistory(t, history(t, parentID), "parallel.history.json")

	// The two children ran under the parent's bigquery_agent calls.
	children := []string{parentID + "-bq-t1-step_3-i1-c1", parentID + "-bq-t1-step_4-i1-c1"}
	require.Equal(t, children, childIDs(t, parentID))
	for _, c := range children {
		started := history(t, c).Events[0].GetWorkflowExecutionStartedEventAttributes()
		require.Equal(t, parentID, started.GetParentWorkflowExecution().GetWorkflowId())
		require.Equal(t, "BigQueryAgent", started.GetWorkflowType().GetName())
	}
	tree := starter(t, nil, "tree", parentID)
	require.Equal(t, 0, tree.code, tree.stderr)
	for _, c := range children {
		require.Contains(t, tree.stdout, "BigQueryAgent  "+c+"  [Completed]")
	}
	require.Contains(t, tree.stdout, "request: Did 198.51.100.23 log in to web-server-prod-01")
	t.Logf("REPORT demo tree:\n%s", tree.stdout)

	// Each child proposed a claim; neither is recalled before a person
	// approves it, so the second child listed the tables itself.
	mem := starter(t, nil, "memory", "list", "--proposed")
	require.Equal(t, 0, mem.code, mem.stderr)
	t.Logf("REPORT demo memories:\n%s", mem.stdout)
	proposed := regexp.MustCompile(`(?m)^(m-[0-9a-f]+)\s+proposed\s+0\s+\S+ \S+\s+security_logs\.auth_events\s+(.*)$`).FindAllStringSubmatch(mem.stdout, -1)
	require.Len(t, proposed, 2, mem.stdout)
	texts := []string{proposed[0][2], proposed[1][2]}
	require.ElementsMatch(t, []string{"event_type names the kind of each login event and success tells whether it succeeded.",
		"the events of a session share host and user with its login, so match them on both."}, texts)
	require.Contains(t, out, "note: Proposed 1 claims for review (starter memory list --proposed)")
	require.NotContains(t, out, "Recalled 1 memories", "a proposed memory is not recalled")

	// The analyst approves both.
	approve := starter(t, nil, "memory", "approve", proposed[0][1], proposed[1][1])
	require.Equal(t, 0, approve.code, approve.stderr)
	shown := starter(t, nil, "memory", "show", proposed[0][1])
	require.Equal(t, 0, shown.code, shown.stderr)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(shown.stdout), &m))
	require.Equal(t, "approved", m["status"])
	require.Equal(t, "security_logs.auth_events", m["table"])

	// Run again: the first child now recalls what the last run learned, goes
	// straight to the login table's schema, rates both memories helpful, and
	// learns nothing twice. Both children rate both helpful, and the
	// investigation's votes count once per memory.
	again := starter(t, nil, "investigate", "--alert", exampleAlert)
	require.Equal(t, 0, again.code, "stdout:\n%s\nstderr:\n%s", again.stdout, again.stderr)
	t.Logf("REPORT demo stdout (second run):\n%s", again.stdout)
	require.Contains(t, again.stdout, "VERDICT  true_positive (high confidence)")
	require.Contains(t, again.stdout, "[bigquery]   note: Recalled 2 memories")
	require.NotContains(t, again.stdout, "-> bigquery_tables", "a recalled memory named the table")
	mem = starter(t, nil, "memory", "list")
	require.Equal(t, 0, mem.code, mem.stderr)
	require.Equal(t, 2, strings.Count(mem.stdout, "\nm-"), "no claim learned twice:\n%s", mem.stdout)
	require.Equal(t, 2, strings.Count(again.stdout, "; 2 helpful, 0 harmful memories"), "each child rated both helpful")
	require.Len(t, regexp.MustCompile(`(?m)^m-[0-9a-f]+\s+approved\s+1\s`).FindAllString(mem.stdout, -1), 2, "both children rated both helpful, one vote per investigation:\n%s", mem.stdout)

	// The model saw no question and no ask_user call was made.
	for _, r := range modelSrv.Requests() {
		for _, c := range r.Contents {
			for _, p := range c.Parts {
				if p.FunctionCall != nil {
					require.NotEqual(t, "ask_user", p.FunctionCall.Name)
				}
			}
		}
	}
}

// TestDemoSCC: the SCC example takes another path. It names no source
// address, so no child workflow runs; the search finds no earlier alert and
// reflection cancels the step that would read them; the verdict is
// undetermined. A follow-up question gets a direct answer.
func TestDemoSCC(t *testing.T) {
	out, id := demo(t, sccAlert)
	for _, want := range []string{
		"-> search_alerts finding.indicator.ipAddresses array-contains 203.0.113.45",
		"No earlier alert where finding.indicator.ipAddresses array-contains 203.0.113.45",
		"plan: cancel_step step_2",
		"user svc-batch",
		"Written by the offline Gemini stand-in, not by a model.",
		"VERDICT  undetermined (low confidence)",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "-> bigquery_agent")
	require.NotContains(t, out, "QUESTION")
	require.Empty(t, childIDs(t, id), "no child workflow")

	before := len(modelSrv.Requests())
	ask := starter(t, nil, "ask", id, "Which user ran the miner?")
	require.Equal(t, 0, ask.code, "stdout:\n%s\nstderr:\n%s", ask.stdout, ask.stderr)
	t.Logf("REPORT demo follow-up (scc):\n%s", ask.stdout)
	require.Contains(t, ask.stdout, "mode direct")
	require.Contains(t, ask.stdout, "The offline Gemini stand-in answers follow-up questions without reading them")
	require.Contains(t, ask.stdout, "user svc-batch")
	phases := map[string]int{}
	for _, r := range modelSrv.Requests()[before:] {
		phases[r.Phase()]++
	}
	require.Equal(t, 1, phases[geminitest.PhaseMode], "%v", phases)
	require.Zero(t, phases[geminitest.PhasePlan], "a direct answer plans nothing: %v", phases)
	require.Empty(t, childIDs(t, id), "the follow-up started no child either")
}
