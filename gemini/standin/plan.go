package standin

import (
	"fmt"
	"strings"
	"time"

	"github.com/secops-agent/investigator/toolcall"
)

// planStep is one step of the plan the stand-in writes.
type planStep struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Tools       []string `json:"tools"`
	Expected    string   `json:"expected"`
	// DependsOn is always given: [] lets a step run alongside the others.
	DependsOn []string `json:"depends_on"`
}

// planReply writes the plan: read the alert and search for earlier alerts
// with the same address; read those earlier alerts; then, when the alert
// names where the activity came from and bigquery_agent is in the catalog,
// ask the logs whether that address logged in, else weigh the evidence
// without tools. Only tools the catalog lists are named. Reading the
// earlier alerts depends on the search, weighing the evidence on every
// earlier step; the rest may run alongside.
func planReply(p page) map[string]any {
	al := alertFromPage(p)
	var steps []planStep
	add := func(description, expected string, deps []string, tools ...string) {
		if tools == nil {
			tools = []string{} // "tools": [] for a step without tools, never null
		}
		steps = append(steps, planStep{ID: stepID(len(steps) + 1), Description: description, Tools: tools, Expected: expected, DependsOn: deps})
	}
	earlier := func() []string {
		ids := []string{}
		for _, s := range steps {
			ids = append(ids, s.ID)
		}
		return ids
	}
	search := al.Key != "" && p.listed(toolcall.SearchAlerts)
	switch {
	case p.listed(toolcall.GetAlert) && search:
		add(fmt.Sprintf("Read alert %s in full with get_alert, and find earlier alerts where %s with search_alerts.", al.name(), al.condition()),
			"The alert's source, target and time window, and the IDs of earlier alerts involving "+al.Key+".",
			[]string{}, toolcall.GetAlert, toolcall.SearchAlerts)
		add(fmt.Sprintf("Read in full, with get_alert, up to %d earlier alerts that %s finds, to see what %s did before.", maxEarlier, steps[0].ID, al.Key),
			"What each earlier alert shows: its type, target and time.", []string{steps[0].ID}, toolcall.GetAlert)
	case p.listed(toolcall.GetAlert):
		add(fmt.Sprintf("Read alert %s in full with get_alert: its source, target and time window.", al.name()),
			"The alert's source, target and time window.", []string{}, toolcall.GetAlert)
	case search:
		add(fmt.Sprintf("Find earlier alerts where %s with search_alerts.", al.condition()),
			"The IDs of earlier alerts involving "+al.Key+".", []string{}, toolcall.SearchAlerts)
	}
	mcpSteps(p, al, add) // mcp.go: the MCP servers' tools, read and act
	if al.Source != "" && p.listed(toolcall.BigQueryAgent) {
		add(fmt.Sprintf("Ask bigquery_agent whether %s logged in to %s on %s after its failed attempts, and as which user.", al.Source, al.target(), al.days()),
			"Successful logins from "+al.Source+" with user and time, and the failures before them, or none.", []string{}, toolcall.BigQueryAgent)
	} else {
		add("Weigh what the earlier steps found against the alert's own evidence (users, files, hashes, command lines) and say what a person must still check.",
			"An assessment of the alert from the evidence gathered, with what remains unchecked.", earlier())
	}
	objective := fmt.Sprintf("Decide whether alert %s on %s reflects malicious activity, and what to do about it.", al.name(), al.target())
	if al.Source != "" {
		objective = fmt.Sprintf("Decide whether %s, the source of alert %s, got into %s, how far it reached, and what to do about it.", al.Source, al.name(), al.target())
	}
	return map[string]any{"objective": objective, "continues_active_plan": false, "steps": steps}
}

// maxEarlier is how many earlier alerts the script reads in full.
const maxEarlier = 3

// name is the alert's ID with its type.
func (al alertInfo) name() string {
	id := al.ID
	if id == "" {
		id = "(no ID given)"
	}
	if al.Type != "" {
		return id + " (" + al.Type + ")"
	}
	return id
}

// condition is the search_alerts condition for the alert's address.
func (al alertInfo) condition() string {
	return al.Field + " " + al.Op + " " + al.Key
}

// target names the host the alert is about, with its instance ID.
func (al alertInfo) target() string {
	switch {
	case al.Host != "" && al.Instance != "":
		return al.Host + " (" + al.Instance + ")"
	case al.Host != "":
		return al.Host
	case al.Instance != "":
		return al.Instance
	}
	return "the target"
}

// days names the UTC day or days of the alert's activity.
func (al alertInfo) days() string {
	first, last := al.First, al.Last
	if first.IsZero() {
		first = last
	}
	if last.IsZero() {
		last = first
	}
	if first.IsZero() {
		return "the day of the alert"
	}
	a, b := first.UTC().Format(time.DateOnly), last.UTC().Format(time.DateOnly)
	if a == b {
		return a
	}
	return a + " to " + b
}

// window is the alert's activity window in UTC.
func (al alertInfo) window() string {
	switch {
	case al.First.IsZero() && al.Last.IsZero():
		return ""
	case al.Last.IsZero() || al.Last.Equal(al.First):
		return clock(al.First)
	case al.First.IsZero():
		return clock(al.Last)
	}
	return span(al.First, al.Last)
}

// clock writes a time as "2026-11-20 08:14:52 UTC".
func clock(t time.Time) string { return t.UTC().Format(time.DateTime) + " UTC" }

// at writes an RFC 3339 time from a record as clock does, or as it is.
func at(s string) string {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return clock(t)
	}
	return s
}

// span writes two times, the second without its date when it is the same.
func span(a, b time.Time) string {
	a, b = a.UTC(), b.UTC()
	if a.Format(time.DateOnly) == b.Format(time.DateOnly) {
		return a.Format(time.DateTime) + "–" + b.Format(time.TimeOnly) + " UTC"
	}
	return a.Format(time.DateTime) + " – " + b.Format(time.DateTime) + " UTC"
}

// reflectReply judges the step that just finished: its evidence becomes
// insights; a login found adds a step that checks what the session did; a
// search that found no earlier alert cancels the step planned to read them
// (the plan puts it right after the search). The objective is achieved once
// a login and its session are known.
func reflectReply(p page) map[string]any {
	recs := p.records()
	insights := []string{}
	updates := []map[string]any{}
	if len(recs) == 0 {
		return map[string]any{"insights": insights, "plan_updates": updates, "achieved": false}
	}
	done := recs[len(recs)-1] // steps run in the order of their numbers
	for _, e := range done.Evidence {
		insights = append(insights, strings.TrimSuffix(e.Fact, ".")+" ("+done.Step+").")
	}
	sessionChecked, loggedIn := false, false
	for _, r := range recs {
		sessionChecked = sessionChecked || r.SessionChecked
		loggedIn = loggedIn || r.Login != nil && r.Failures > 0
	}
	if done.Login != nil && done.Failures > 0 && !sessionChecked {
		l := done.Login
		updates = append(updates, map[string]any{
			"type": "add_step",
			"step": map[string]any{
				"description": fmt.Sprintf("Ask bigquery_agent what the session of %s, logged in to %s from %s at %s, did in the following hour.", l.User, l.Host, l.Source, at(l.Time)),
				"tools":       []string{toolcall.BigQueryAgent},
				"expected":    "The commands and events of that session, or none.",
				"depends_on":  []string{done.Step},
			},
			"reason": fmt.Sprintf("%s found a successful login after %d failures; what the session did decides the impact.", done.Step, done.Failures),
		})
	}
	if done.Searched && len(done.Earlier) == 0 {
		updates = append(updates, map[string]any{
			"type":    "cancel_step",
			"step_id": stepID(stepNumber(done.Step) + 1),
			"reason":  fmt.Sprintf("%s found no earlier alert involving %s, so there is nothing to read.", done.Step, done.SearchedFor),
		})
	}
	return map[string]any{"insights": insights, "plan_updates": updates, "achieved": loggedIn && sessionChecked}
}
