package standin

import (
	"fmt"
	"strings"
	"time"
)

// Verdicts and confidences of the conclusion's schema.
const (
	truePositive = "true_positive"
	undetermined = "undetermined"
)

// findings are the records of all steps, summed up for the verdict.
type findings struct {
	recs     []record
	login    *record // the step that found a login after failures
	anyLogin *record // a step that found a login without failures before it
	session  *record // the step that read what the session did
	logs     bool    // some step asked the logs about logins
	earlier  []string
}

func sum(recs []record) findings {
	f := findings{recs: recs}
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Login != nil && r.Failures > 0 && f.login == nil:
			f.login = r
		case r.Login != nil && f.anyLogin == nil:
			f.anyLogin = r
		}
		if r.SessionChecked && f.session == nil {
			f.session = r
		}
		f.logs = f.logs || r.LogsChecked
		for _, id := range r.Earlier {
			f.earlier = appendNew(f.earlier, id)
		}
	}
	return f
}

// judge applies the stand-in's one rule: a successful login from the
// alert's source after failed attempts is a true positive with high
// confidence; everything else stays undetermined, with medium confidence
// when the logs were read and low when they were not.
func (f findings) judge() (verdict, confidence, why string) {
	switch {
	case f.login != nil:
		l := f.login.Login
		why = fmt.Sprintf("%s logged in to %s as %s at %s after %d failed attempts (%s, bigquery_agent): the brute force succeeded", l.Source, l.Host, l.User, at(l.Time), f.login.Failures, f.login.Step)
		if f.session != nil && len(f.session.Activity) > 0 {
			why += fmt.Sprintf(", and the session went on to %d more event(s) (%s)", len(f.session.Activity), f.session.Step)
		}
		return truePositive, "high", why
	case f.anyLogin != nil:
		l := f.anyLogin.Login
		return undetermined, "medium", fmt.Sprintf("%s logged in to %s as %s at %s (%s) with no failed attempt before it, which may be legitimate use", l.Source, l.Host, l.User, at(l.Time), f.anyLogin.Step)
	case f.logs:
		return undetermined, "medium", "the logs show no successful login from the source address, so the attempts did not get in as far as the logs tell"
	}
	return undetermined, "low", "the script settles a verdict only from logins in the logs, and no step found one; the alert's own evidence needs a person's judgement"
}

// concludeReply writes the verdict, the evidence items (each naming the
// step and tool that showed it) and the report in the five sections.
func concludeReply(p page) map[string]any {
	al := alertFromPage(p)
	f := sum(p.records())
	verdict, confidence, why := f.judge()
	items := []map[string]any{}
	for _, r := range f.recs {
		for _, e := range r.Evidence {
			if e.Tool != "" { // evidence names the tool that showed it; a step's own reasoning is no evidence
				items = append(items, map[string]any{"step_id": r.Step, "tool": e.Tool, "fact": e.Fact})
			}
		}
	}
	return map[string]any{"report": f.report(al, verdict, confidence, why), "evidence": items, "reason": why, "verdict": verdict, "confidence": confidence}
}

func (f findings) report(al alertInfo, verdict, confidence, why string) string {
	var b strings.Builder
	b.WriteString("## Summary\n")
	b.WriteString("**Written by the offline Gemini stand-in, not by a model.** No Gemini credentials were configured, so a fixed script chose the steps and the tool calls and wrote this report from what the tools returned; it restates evidence and applies one rule, it does not analyse.\n\n")
	b.WriteString(f.story(al) + "\n\n")

	b.WriteString("## Key findings\n")
	n := 0
	for _, r := range f.recs {
		for _, e := range r.Evidence {
			from := r.Step
			if e.Tool != "" {
				from += ", " + e.Tool
			}
			fmt.Fprintf(&b, "- %s (%s)\n", e.Fact, from)
			n++
		}
	}
	if n == 0 {
		b.WriteString("- No step recorded a finding.\n")
	}

	label := map[string]string{truePositive: "True positive", undetermined: "Undetermined"}[verdict]
	fmt.Fprintf(&b, "\n## Assessment\n**%s**, %s confidence: %s.\n\n", label, confidence, why)

	b.WriteString("## Uncertainties\n")
	b.WriteString("- The verdict follows the stand-in's one rule (a successful login from the alert's source after failed attempts is a true positive; anything else stays undetermined), not a judgement of the evidence.\n")
	switch {
	case f.login != nil && f.session == nil:
		b.WriteString("- What the session did after the login was not checked.\n")
	case f.session != nil:
		b.WriteString("- Only the authentication log was read: the session's processes, network connections and cloud API calls were not checked.\n")
	case !f.logs && al.Source == "":
		b.WriteString("- The logs were not read: the alert names no source address to ask them about.\n")
	case !f.logs:
		b.WriteString("- The logs were not read.\n")
	}
	b.WriteString("- Threat intelligence on the addresses and hashes was not queried.\n")

	b.WriteString("\n## Recommended actions\n")
	for i, a := range f.actions(al) {
		fmt.Fprintf(&b, "%d. %s\n", i+1, a)
	}
	return b.String()
}

// story is the summary's account of what was found.
func (f findings) story(al alertInfo) string {
	var s string
	if f.login != nil {
		l := f.login.Login
		s = fmt.Sprintf("%s attacked %s with %d failed login attempts (%s) and then logged in as %s at %s", l.Source, l.Host, f.login.Failures,
			spanOf(f.login.FirstFailure, f.login.LastFailure), l.User, at(l.Time))
		if l.Method != "" {
			s += " by " + l.Method
		}
		s += "."
		if f.session != nil && len(f.session.Activity) > 0 {
			s += " In the following hour the session logged: " + strings.Join(f.session.Activity, "; ") + "."
		}
	} else {
		s = "Alert " + al.name() + " on " + al.target() + ": no step found a login from the alert's source that followed failed attempts."
	}
	if len(f.earlier) > 0 {
		s += fmt.Sprintf(" %s also appears in earlier alert(s) %s.", or(al.Key, "The alert's address"), strings.Join(f.earlier, ", "))
	}
	return s
}

// spanOf writes two RFC 3339 times from a record as span does.
func spanOf(a, b string) string {
	ta, errA := time.Parse(time.RFC3339, a)
	tb, errB := time.Parse(time.RFC3339, b)
	if errA != nil || errB != nil {
		return a + " – " + b
	}
	return span(ta, tb)
}

func (f findings) actions(al alertInfo) []string {
	var out []string
	if f.login != nil {
		l := f.login.Login
		host := l.Host
		if al.Host == l.Host {
			host = al.target()
		}
		out = append(out,
			fmt.Sprintf("Isolate %s and preserve its disk and memory for forensics.", host),
			fmt.Sprintf("Disable password logins for %s and rotate its credentials and any keys the session could read.", l.User),
			fmt.Sprintf("Block %s at the network edge.", l.Source))
		if f.session != nil && len(f.session.Activity) > 0 {
			out = append(out, "Review every command of the session listed above and undo what it changed (files, crontabs, accounts).")
		} else {
			out = append(out, fmt.Sprintf("Ask the logs what %s's session did on %s after %s.", l.User, l.Host, at(l.Time)))
		}
	} else {
		out = append(out, fmt.Sprintf("Have an analyst review alert %s and its own evidence.", or(al.ID, "this")))
		if al.Source == "" {
			out = append(out, fmt.Sprintf("Check the processes and network connections of %s around %s in the logs.", al.target(), or(al.window(), "the alert's time")))
		}
	}
	if len(f.earlier) > 0 {
		out = append(out, "Check the hosts named in the earlier alerts: "+strings.Join(f.earlier, ", ")+".")
	}
	return append(out, "Re-run the investigation with GEMINI_API_KEY (or Vertex AI) configured for a real model's analysis.")
}
