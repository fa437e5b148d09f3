package standin

import (
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/toolcall"
)

// Call IDs of the parent's calls, by which their results are read back.
const (
	callAlert   = "alert"
	callEarlier = "earlier"
	callLogs    = "logs"
	callRead    = "read-" // + the earlier alert's ID
)

// maxValue bounds a value quoted in a sentence (a title, a command line).
const maxValue = 160

// stepReply runs one turn of a step's tool loop. The step's kind follows
// from the functions it declares (a step gets its own tools, plus get_alert
// and ask_user): bigquery_agent asks the logs, search_alerts reads the alert
// and searches for earlier ones, get_alert alone reads the earlier alerts
// a search found, and a step without tools weighs the evidence. ask_user is
// never called: the demo never waits for a person.
func stepReply(r *geminitest.Request, p page) geminitest.Reply {
	id, _ := p.step()
	al := alertFromPage(p)
	earlier := p.records()
	t := readTurn(r)
	last := final(r)
	searched := false
	for _, rec := range earlier {
		searched = searched || rec.Searched
	}
	switch {
	case len(mcpDeclared(r)) > 0:
		return mcpStep(id, al, mcpDeclared(r), t, last) // mcp.go
	case declares(r, toolcall.BigQueryAgent):
		return logsStep(id, al, earlier, t, last)
	case declares(r, toolcall.SearchAlerts) || declares(r, toolcall.GetAlert) && !searched:
		return alertStep(id, al, declares(r, toolcall.SearchAlerts), t, last)
	case declares(r, toolcall.GetAlert):
		return earlierStep(id, earlier, t, last)
	}
	return weighStep(id, al)
}

// intro opens every step result.
func intro(step string) string {
	return fmt.Sprintf("Findings of %s (offline stand-in: a script, not a model's analysis):", step)
}

// alertStep reads the alert with get_alert and, with search, looks for
// earlier alerts involving its address, both calls in one turn.
func alertStep(step string, al alertInfo, search bool, t turn, last bool) geminitest.Reply {
	search = search && al.Key != ""
	if !last && al.ID != "" && t.result(callAlert) == nil {
		calls := []*genai.FunctionCall{call(callAlert, toolcall.GetAlert, map[string]any{"id": al.ID})}
		if search {
			calls = append(calls, call(callEarlier, toolcall.SearchAlerts, map[string]any{
				"field": al.Field, "op": al.Op, "value": al.Key, "value_type": "string", "limit": 10,
			}))
		}
		return geminitest.Calls(calls...)
	}
	rec := record{Step: step}
	// Only a call that returned a result is cited; without one the step
	// says what the prompt's alert shows, citing no tool.
	full, read := al, ""
	if res := t.result(callAlert); res != nil && res["error"] == nil {
		full, read = alertFromResult(res), toolcall.GetAlert
		full.ID = al.ID
	}
	rec.Evidence = append(rec.Evidence, evidence{Tool: read, Fact: describeAlert(full)})
	if res := t.result(callEarlier); res != nil {
		rec.Searched, rec.SearchedFor = true, al.Key
		fact, tool := "", toolcall.SearchAlerts
		if e := res["error"]; e != nil {
			fact, tool = "The search for earlier alerts failed: "+clip.String(str(e), maxValue), ""
		} else {
			var found []string
			list, _ := res["alerts"].([]any)
			for _, a := range list {
				m, _ := a.(map[string]any)
				if id := str(m["id"]); id != "" && id != al.ID {
					rec.Earlier = append(rec.Earlier, id)
					found = append(found, fmt.Sprintf("%s (%s, %s)", id, str(m["type"]), day(str(m["observed_at"]))))
				}
			}
			fact = fmt.Sprintf("No earlier alert where %s.", al.condition())
			if len(found) > 0 {
				fact = fmt.Sprintf("%d earlier alert(s) involve %s: %s.", len(found), al.Key, strings.Join(found, "; "))
			}
		}
		rec.Evidence = append(rec.Evidence, evidence{Tool: tool, Fact: fact})
	}
	return geminitest.Text(answer(intro(step), rec))
}

// describeAlert says in one sentence what an alert shows.
func describeAlert(al alertInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Alert %s", al.name())
	if al.Severity != "" {
		fmt.Fprintf(&b, ", severity %s", al.Severity)
	}
	switch {
	case al.Source != "" && al.Count > 0:
		fmt.Fprintf(&b, ": %d events from %s against %s", al.Count, al.Source, al.target())
	case al.Source != "":
		fmt.Fprintf(&b, ": activity from %s against %s", al.Source, al.target())
	default:
		fmt.Fprintf(&b, ", on %s", al.target())
	}
	if w := al.window(); w != "" {
		b.WriteString(", " + w)
	}
	if own := al.indicators(); own != "" {
		b.WriteString("; " + own)
	}
	b.WriteString(".")
	return b.String()
}

// indicators lists the alert's users, files, hashes and command lines (the
// last of each kind: the most specific, e.g. a file rather than its folder).
func (al alertInfo) indicators() string {
	var parts []string
	for _, part := range []struct {
		what string
		list []string
	}{{"user", al.Users}, {"file", al.Files}, {"hash", al.Hashes}, {"command line", al.Cmds}} {
		if len(part.list) > 0 {
			parts = append(parts, part.what+" "+clip.String(part.list[len(part.list)-1], maxValue))
		}
	}
	return strings.Join(parts, "; ")
}

// day is the date part of an RFC 3339 time.
func day(s string) string {
	if d, _, ok := strings.Cut(s, "T"); ok {
		return d
	}
	return s
}

// earlierStep reads in full the earlier alerts that a search found.
func earlierStep(step string, earlier []record, t turn, last bool) geminitest.Reply {
	var ids []string
	for _, rec := range earlier {
		for _, id := range rec.Earlier {
			if len(ids) < maxEarlier {
				ids = appendNew(ids, id)
			}
		}
	}
	rec := record{Step: step}
	if len(ids) == 0 {
		return geminitest.Text(answer(intro(step)+" no earlier alert to read: the search found none.", rec))
	}
	if !last && t.result(callRead+ids[0]) == nil {
		calls := make([]*genai.FunctionCall, len(ids))
		for i, id := range ids {
			calls[i] = call(callRead+id, toolcall.GetAlert, map[string]any{"id": id})
		}
		return geminitest.Calls(calls...)
	}
	for _, id := range ids {
		res := t.result(callRead + id)
		var fact, tool string
		switch {
		case res == nil:
			fact = "Earlier alert " + id + " was not read."
		case res["error"] != nil:
			fact = "Earlier alert " + id + " could not be read: " + clip.String(str(res["error"]), maxValue)
		default:
			fact, tool = "Earlier alert "+strings.TrimPrefix(describeAlert(alertFromResult(res)), "Alert "), toolcall.GetAlert
		}
		rec.Evidence = append(rec.Evidence, evidence{Tool: tool, Fact: fact})
	}
	return geminitest.Text(answer(intro(step), rec))
}

// weighStep is a step without tools: it names what no step corroborated.
func weighStep(step string, al alertInfo) geminitest.Reply {
	fact := "No step corroborated the alert beyond its own evidence"
	if own := al.indicators(); own != "" {
		fact += "; still to check in the logs: " + own
	}
	rec := record{Step: step, Evidence: []evidence{{Fact: fact + "."}}}
	return geminitest.Text(answer(intro(step)+" weighed without tools; the stand-in's script settles a verdict only from logins in the logs, which no step read.", rec))
}
