package standin

import (
	"fmt"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/toolcall"
)

// logsStep asks the BigQuery sub-agent (a child workflow) about the alert's
// source address: whether it logged in, or, once an earlier step found a
// login after failures, what that session did. The request names the
// address, the host and the day or the login's time: the sub-agent reads
// those values back from it and finds the rest in the logs.
func logsStep(step string, al alertInfo, earlier []record, t turn, last bool) geminitest.Reply {
	var found *login
	sessionChecked := false
	for _, rec := range earlier {
		if rec.Login != nil && rec.Failures > 0 {
			found = rec.Login
		}
		sessionChecked = sessionChecked || rec.SessionChecked
	}
	session := found != nil && !sessionChecked
	address := al.Source
	if address == "" {
		address = al.Key
	}
	res := t.result(callLogs)
	if !last && res == nil {
		var request string
		switch {
		case session:
			request = fmt.Sprintf("What did the session of user %s, who logged in to %s from %s at %s, do in the hour after that login? List its events in order.",
				found.User, found.Host, found.Source, at(found.Time))
		case address != "":
			request = fmt.Sprintf("Did %s log in to %s on %s after its failed attempts, and as which user? Count the failed attempts per host and give the time of each successful login.",
				address, al.target(), al.days())
		default:
			return geminitest.Text(answer(intro(step)+" the alert names no address to ask the logs about.", record{Step: step}))
		}
		return geminitest.Calls(call(callLogs, toolcall.BigQueryAgent, map[string]any{"request": request}))
	}
	rec := record{Step: step}
	switch {
	case res == nil:
		return geminitest.Text(answer(intro(step)+" the logs were not asked (no turns left).", rec))
	case res["error"] != nil:
		// Said, not cited: only a call that returned a result is evidence.
		rec.Evidence = []evidence{{Fact: "bigquery_agent failed: " + clip.String(str(res["error"]), maxValue)}}
		return geminitest.Text(answer(intro(step), rec))
	}
	rec.Child = str(res["child_workflow_id"])
	got := readRecords(str(res["answer"]))
	if len(got) == 0 {
		rec.Evidence = []evidence{{Tool: toolcall.BigQueryAgent, Fact: "bigquery_agent answered: " + clip.String(str(res["answer"]), 400)}}
		return geminitest.Text(answer(intro(step), rec))
	}
	c := got[0]
	rec.LogsChecked, rec.Login, rec.Failures, rec.FirstFailure, rec.LastFailure = c.LogsChecked, c.Login, c.Failures, c.FirstFailure, c.LastFailure
	rec.SessionChecked, rec.Activity = c.SessionChecked, c.Activity
	if session {
		rec.Login = nil // this step looked at the session, not for logins
	}
	for _, e := range c.Evidence {
		rec.Evidence = append(rec.Evidence, evidence{Tool: toolcall.BigQueryAgent, Fact: e.Fact})
	}
	return geminitest.Text(answer(intro(step)+fmt.Sprintf(" the BigQuery sub-agent (child workflow %s) answered from the logs.", rec.Child), rec))
}
