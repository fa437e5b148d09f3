package standin

import (
	"fmt"
	"strings"
	"time"

	"github.com/secops-agent/investigator/internal/clip"
)

// hostTally is one host's events from the address.
type hostTally struct {
	host                string
	failures, successes int
	firstFail, lastFail time.Time
}

// judgeLogins reads the summary rows (per host, type and outcome) and the
// successful logins: the login that came after failures on its host is the
// one that matters; failures elsewhere are reported beside it.
func judgeLogins(rec *record, t authTable, a ask, summary, logins []map[string]any) {
	var hosts []*hostTally
	tally := func(h string) *hostTally {
		for _, x := range hosts {
			if x.host == h {
				return x
			}
		}
		x := &hostTally{host: h}
		hosts = append(hosts, x)
		return x
	}
	for _, row := range summary {
		x := tally(str(row[t.Host]))
		n := count(row["events"])
		ok, _ := row[t.Success].(bool)
		if ok {
			x.successes += n
		} else {
			x.failures += n
			first, last := timeOf(row["first_seen"]), timeOf(row["last_seen"])
			if x.firstFail.IsZero() || first.Before(x.firstFail) {
				x.firstFail = first
			}
			if last.After(x.lastFail) {
				x.lastFail = last
			}
		}
	}
	var chosen map[string]any
	for _, l := range logins {
		x := tally(str(l[t.Host]))
		if x.failures > 0 && x.firstFail.Before(timeOf(l[t.Time])) {
			chosen = l
			break
		}
	}
	if chosen == nil && len(logins) > 0 {
		chosen = logins[0]
	}
	if chosen != nil {
		when := timeOf(chosen[t.Time])
		rec.Login = &login{Source: a.IP, User: str(chosen[t.User]), Host: str(chosen[t.Host]), Time: when.Format(time.RFC3339), Method: str(chosen[t.Method])}
		x := tally(rec.Login.Host)
		how := ""
		if rec.Login.Method != "" {
			how = " (" + rec.Login.Method + ")"
		}
		fact := fmt.Sprintf("%s logged in to %s as %s at %s%s", a.IP, rec.Login.Host, rec.Login.User, clock(when), how)
		if x.failures > 0 && x.firstFail.Before(when) {
			rec.Failures, rec.FirstFailure, rec.LastFailure = x.failures, x.firstFail.Format(time.RFC3339), x.lastFail.Format(time.RFC3339)
			fact += fmt.Sprintf(" after %d failed attempts there, %s.", x.failures, span(x.firstFail, x.lastFail))
		} else {
			fact += ", with no failed attempt from it there before."
		}
		rec.Evidence = append(rec.Evidence, evidence{Fact: fact})
	}
	failed, where := 0, []string{}
	for _, x := range hosts {
		failed += x.failures
		if x.failures > 0 && (rec.Login == nil || x.host != rec.Login.Host) {
			where = append(where, fmt.Sprintf("%d on %s, %s", x.failures, x.host, span(x.firstFail, x.lastFail)))
		}
	}
	from, to := a.window()
	days := "in the logs"
	if !from.IsZero() {
		days = fmt.Sprintf("between %s and %s", clock(from), clock(to))
	}
	switch {
	case rec.Login != nil && len(where) > 0:
		rec.Evidence = append(rec.Evidence, evidence{Fact: fmt.Sprintf("%s also failed without a successful login elsewhere: %s.", a.IP, strings.Join(where, "; "))})
	case rec.Login == nil && failed > 0:
		rec.Evidence = append(rec.Evidence, evidence{Fact: fmt.Sprintf("No successful login from %s %s; %d failed attempts: %s.", a.IP, days, failed, strings.Join(where, "; "))})
	case rec.Login == nil:
		rec.Evidence = append(rec.Evidence, evidence{Fact: fmt.Sprintf("No login event from %s %s.", a.IP, days)})
	}
}

// judgeSession lists what followed the login: every row after it.
func judgeSession(rec *record, t authTable, found []map[string]any) {
	l := rec.Login
	start, _ := time.Parse(time.RFC3339, l.Time)
	for _, row := range found {
		when := timeOf(row[t.Time])
		if !when.After(start) {
			continue // the login itself
		}
		typ := str(row[t.Type])
		line := when.UTC().Format(time.TimeOnly) + " " + or(typ, "event")
		if m := str(row[t.Method]); m != "" {
			line += " (" + m + ")"
		}
		if msg := str(row[t.Message]); msg != "" {
			line += ": " + clip.String(msg, maxValue)
		}
		rec.Activity = append(rec.Activity, line)
	}
	if len(rec.Activity) == 0 {
		rec.Evidence = append(rec.Evidence, evidence{Fact: fmt.Sprintf("The logs show nothing %s did on %s in the hour after the login at %s.", l.User, l.Host, clock(start))})
		return
	}
	rec.Evidence = append(rec.Evidence, evidence{Fact: fmt.Sprintf("After %s logged in to %s from %s at %s, the session shows %d event(s): %s.",
		l.User, l.Host, l.Source, clock(start), len(rec.Activity), strings.Join(rec.Activity, "; "))})
}

// count reads a COUNT(*) value (a JSON number, or text).
func count(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case int:
		return x
	case int64:
		return int(x)
	}
	var n int
	_, _ = fmt.Sscan(str(v), &n)
	return n
}

// timeOf reads a TIMESTAMP value (RFC 3339 text).
func timeOf(v any) time.Time {
	t, err := time.Parse(time.RFC3339Nano, str(v))
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
