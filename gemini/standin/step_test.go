package standin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/plan"
)

// step_1 asks for the alert and the earlier alerts in one turn, then
// answers with what they returned (the alert itself left out of the
// search's results), ending with its record.
func TestAlertStep(t *testing.T) {
	h := newHarness(t)
	reg := registry(t, true)
	al := readAlert(t, guardDutyFile)
	step := plan.Step{ID: "step_1", Description: "Read the alert and search.", Tools: []string{"get_alert", "search_alerts"}}
	l := h.loop(agentPrompts, "execute", executeData(alertSection(t, al), step), stepDecls(reg, step))

	text, calls := l.turn(false)
	assert.Empty(t, text)
	require.Len(t, calls, 2, "both calls in one turn, run in parallel")
	assert.Equal(t, "get_alert", calls[0].Name)
	assert.Equal(t, map[string]any{"id": al.ID}, calls[0].Args)
	assert.Equal(t, "search_alerts", calls[1].Name)
	assert.Equal(t, map[string]any{"field": "service.action.networkConnectionAction.remoteIpDetails.ipAddressV4", "op": "==",
		"value": "198.51.100.23", "value_type": "string", "limit": float64(10)}, calls[1].Args)

	bastion := readAlert(t, bastionFile)
	l.answer(calls, map[string]map[string]any{
		calls[0].ID: getAlertResult(al),
		calls[1].ID: {"count": 2, "alerts": []any{
			map[string]any{"id": al.ID, "type": al.Type},
			map[string]any{"id": bastion.ID, "type": bastion.Type, "observed_at": "2026-11-10T02:12:05Z"},
		}},
	})
	text, calls = l.turn(false)
	assert.Empty(t, calls)
	assert.Contains(t, text, "offline stand-in")
	assert.Contains(t, text, "214 events from 198.51.100.23 against web-server-prod-01 (i-0abc1234def567890), 2026-11-20 07:58:12–08:14:47 UTC. [step_1, get_alert]")
	assert.Contains(t, text, "1 earlier alert(s) involve 198.51.100.23: "+bastion.ID+" (UnauthorizedAccess:EC2/SSHBruteForce, 2026-11-10). [step_1, search_alerts]")
	recs := readRecords(text)
	require.Len(t, recs, 1)
	assert.Equal(t, "step_1", recs[0].Step)
	assert.Equal(t, []string{bastion.ID}, recs[0].Earlier)
	assert.Len(t, recs[0].Evidence, 2)
}

// step_2 reads the earlier alerts that step_1's record names.
func TestEarlierStep(t *testing.T) {
	h := newHarness(t)
	reg := registry(t, true)
	al, bastion := readAlert(t, guardDutyFile), readAlert(t, bastionFile)
	first := answer("Findings of step_1:", record{Step: "step_1", Searched: true, SearchedFor: "198.51.100.23", Earlier: []string{bastion.ID}})
	step := plan.Step{ID: "step_2", Description: "Read the earlier alerts.", Tools: []string{"get_alert"}}
	l := h.loop(agentPrompts, "execute", executeData(alertSection(t, al), step, earlierResult{"step_1", first}), stepDecls(reg, step))
	_, calls := l.turn(false)
	require.Len(t, calls, 1)
	assert.Equal(t, map[string]any{"id": bastion.ID}, calls[0].Args)
	l.answer(calls, map[string]map[string]any{calls[0].ID: getAlertResult(bastion)})
	text, _ := l.turn(false)
	assert.Contains(t, text, "Earlier alert "+bastion.ID+" (UnauthorizedAccess:EC2/SSHBruteForce), severity low: 96 events from 198.51.100.23 against bastion-01 (i-0def5678abc901234), 2026-11-10 02:11:40–02:39:02 UTC. [step_2, get_alert]")
}

// The log step asks the sub-agent a concrete question with the address,
// the host and the day; with a login found earlier, it asks about that
// session instead. It carries the sub-agent's findings into its record.
func TestLogsStep(t *testing.T) {
	h := newHarness(t)
	reg := registry(t, true)
	al := readAlert(t, guardDutyFile)
	step := plan.Step{ID: "step_3", Description: "Ask the logs.", Tools: []string{"bigquery_agent"}}
	l := h.loop(agentPrompts, "execute", executeData(alertSection(t, al), step), stepDecls(reg, step))
	_, calls := l.turn(false)
	require.Len(t, calls, 1)
	assert.Equal(t, "bigquery_agent", calls[0].Name)
	assert.Equal(t, "Did 198.51.100.23 log in to web-server-prod-01 (i-0abc1234def567890) on 2026-11-20 after its failed attempts, and as which user? "+
		"Count the failed attempts per host and give the time of each successful login.", calls[0].Args["request"])

	child := record{LogsChecked: true, Failures: 214, FirstFailure: "2026-11-20T07:58:12Z", LastFailure: "2026-11-20T08:14:47Z",
		Login:    &login{Source: "198.51.100.23", User: "deploy", Host: "web-server-prod-01", Time: "2026-11-20T08:14:52Z", Method: "password"},
		Evidence: []evidence{{Fact: "198.51.100.23 logged in as deploy [preauth]"}}}
	l.answer(calls, map[string]map[string]any{calls[0].ID: {"answer": answer("Answer from the logs.", child), "child_workflow_id": "wf-bq-1", "child_run_id": "r"}})
	text, _ := l.turn(false)
	assert.Contains(t, text, "child workflow wf-bq-1")
	assert.Contains(t, text, "- 198.51.100.23 logged in as deploy [preauth] [step_3, bigquery_agent]")
	recs := readRecords(text)
	require.Len(t, recs, 1)
	assert.Equal(t, 214, recs[0].Failures)
	assert.Equal(t, "deploy", recs[0].Login.User)
	assert.Equal(t, []evidence{{Tool: "bigquery_agent", Fact: "198.51.100.23 logged in as deploy [preauth]"}}, recs[0].Evidence)

	session := plan.Step{ID: "step_4", Description: "Ask about the session.", Tools: []string{"bigquery_agent"}}
	l = h.loop(agentPrompts, "execute", executeData(alertSection(t, al), session, earlierResult{"step_3", text}), stepDecls(reg, session))
	_, calls = l.turn(false)
	require.Len(t, calls, 1)
	assert.Equal(t, "What did the session of user deploy, who logged in to web-server-prod-01 from 198.51.100.23 at 2026-11-20 08:14:52 UTC, do in the hour after that login? List its events in order.", calls[0].Args["request"])
}

// A step without tools gets no declarations and answers at once.
func TestWeighStep(t *testing.T) {
	h := newHarness(t)
	step := plan.Step{ID: "step_3", Description: "Weigh.", Tools: []string{}}
	l := h.loop(agentPrompts, "execute", executeData(alertSection(t, readAlert(t, sccFile)), step), nil)
	text, calls := l.turn(false)
	assert.Empty(t, calls)
	assert.Contains(t, text, "still to check in the logs: user svc-batch; file /tmp/.cache/kworkerds; hash 0b1e4f0a9d2c7e3b5a6f8d1c0e9b7a5f3d2c1b0a9e8f7d6c5b4a3f2e1d0c9b8a")
	assert.Equal(t, "step_3", readRecords(text)[0].Step)
}

// The last turn of a loop (function calling off) answers in text, and no
// turn ever calls ask_user, though every step declares it.
func TestFinalTurnAnswersAndNoOneIsAsked(t *testing.T) {
	h := newHarness(t)
	reg := registry(t, true)
	al := readAlert(t, guardDutyFile)
	for _, tools := range [][]string{{"get_alert", "search_alerts"}, {"get_alert"}, {"bigquery_agent"}} {
		step := plan.Step{ID: "step_1", Description: "d", Tools: tools}
		l := h.loop(agentPrompts, "execute", executeData(alertSection(t, al), step), stepDecls(reg, step))
		_, calls := l.turn(false)
		for _, c := range calls {
			assert.NotEqual(t, "ask_user", c.Name)
		}
		l = h.loop(agentPrompts, "execute", executeData(alertSection(t, al), step), stepDecls(reg, step))
		text, calls := l.turn(true)
		assert.Empty(t, calls, "%v", tools)
		assert.Contains(t, text, "Stand-in record: ")
	}
}

// Only a call that returned a result is evidence the workflow accepts: a
// failed call is said in the step's findings but cites no tool, so the
// offline demo gets no re-ask or dropped item when a call fails.
func TestFailedCallsAreNotCited(t *testing.T) {
	h := newHarness(t)
	reg := registry(t, true)
	al := readAlert(t, guardDutyFile)
	logs := plan.Step{ID: "step_3", Description: "Ask the logs.", Tools: []string{"bigquery_agent"}}
	l := h.loop(agentPrompts, "execute", executeData(alertSection(t, al), logs), stepDecls(reg, logs))
	_, calls := l.turn(false)
	require.Len(t, calls, 1)
	l.answer(calls, map[string]map[string]any{calls[0].ID: {"error": "the sub-agent failed: the model refused the request"}})
	text, _ := l.turn(false)
	assert.Contains(t, text, "- bigquery_agent failed: the sub-agent failed: the model refused the request [step_3]\n")
	assert.Equal(t, []evidence{{Fact: "bigquery_agent failed: the sub-agent failed: the model refused the request"}}, readRecords(text)[0].Evidence)

	read := plan.Step{ID: "step_1", Description: "Read the alert.", Tools: []string{"get_alert", "search_alerts"}}
	l = h.loop(agentPrompts, "execute", executeData(alertSection(t, al), read), stepDecls(reg, read))
	_, calls = l.turn(false)
	require.Len(t, calls, 2)
	l.answer(calls, map[string]map[string]any{calls[0].ID: {"error": "store unavailable"}, calls[1].ID: {"error": "store unavailable"}})
	text, _ = l.turn(false)
	for _, e := range readRecords(text)[0].Evidence {
		assert.Empty(t, e.Tool, "cited a failed call: %s", e.Fact)
	}
	assert.NotContains(t, text, ", get_alert]")
	assert.NotContains(t, text, ", search_alerts]")
}
