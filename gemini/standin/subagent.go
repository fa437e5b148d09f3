package standin

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
)

// The BigQuery sub-agent's tools the script calls, as its requests declare
// them (activities/bigquery/bqtools; a test checks the names against the
// declarations). No code constant names them, so the script takes the
// names the model sees.
const (
	bqTables = "bigquery_tables"
	bqSchema = "bigquery_schema"
	bqQuery  = "bigquery_query"
)

// Call IDs of the sub-agent's calls.
const (
	callTables  = "tables"
	callSchema  = "schema " // + the table
	callSummary = "q-summary"
	callLogins  = "q-logins"
	callLoginAt = "q-login-at"
	callSession = "q-session"
)

// The sub-agent's data blocks: its request, and the recalled memories
// ("[id] claim" lines).
const (
	requestBlock  = "request"
	memoriesBlock = "memories"
)

// ask is what the sub-agent reads from its request: values, not wording.
// The request names an IP; a request with a time of day asks what the
// session that logged in at that time did, one without asks about logins
// on the days it names.
type ask struct {
	IP    string
	Days  []time.Time
	Clock time.Duration // time of day; 0 when the request names none
	At    time.Time
}

func readAsk(text string) ask {
	var a ask
	for _, tok := range strings.Fields(text) {
		tok = strings.Trim(tok, ",.;:?!()[]\"'`")
		if addr, err := netip.ParseAddr(tok); err == nil && a.IP == "" && strings.ContainsAny(tok, ".:") {
			a.IP = addr.String()
		} else if d, err := time.Parse(time.DateOnly, tok); err == nil {
			a.Days = append(a.Days, d)
		} else if c, err := time.Parse(time.TimeOnly, tok); err == nil && a.Clock == 0 {
			a.Clock = c.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC))
		}
	}
	if a.Clock > 0 && len(a.Days) > 0 {
		a.At = a.Days[0].Add(a.Clock)
	}
	return a
}

// window is the days the request names, [first day, day after the last).
func (a ask) window() (from, to time.Time) {
	if len(a.Days) == 0 {
		return time.Time{}, time.Time{}
	}
	return slices.MinFunc(a.Days, time.Time.Compare), slices.MaxFunc(a.Days, time.Time.Compare).AddDate(0, 0, 1)
}

type memoryNote struct{ ID, Claim string }

func readMemories(content string) []memoryNote {
	var out []memoryNote
	for _, l := range strings.Split(content, "\n") {
		if id, claim, ok := strings.Cut(strings.TrimPrefix(l, "["), "] "); ok && strings.HasPrefix(l, "[") {
			out = append(out, memoryNote{ID: id, Claim: claim})
		}
	}
	return out
}

// tableIn finds the first "dataset.table" (or dataset.table.column) name
// in a claim.
func tableIn(claim string) string {
	for _, tok := range strings.FieldsFunc(claim, func(r rune) bool {
		return !(r == '.' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		parts := strings.Split(strings.Trim(tok, "."), ".")
		if len(parts) >= 2 && len(parts) <= 3 && parts[0] != "" && parts[1] != "" {
			return parts[0] + "." + parts[1]
		}
	}
	return ""
}

// subAgent is one turn of the BigQuery sub-agent.
type subAgent struct {
	ask      ask
	memories []memoryNote
	t        turn
	last     bool
}

// subAgentReply finds a table of logins (straight from a recalled memory
// that names one, else by listing the tables and reading their schemas),
// then queries it: the address's logins on the days asked, or what the
// session that logged in at the time asked did in the following hour. It
// answers from the rows the queries returned.
func subAgentReply(r *geminitest.Request, p page) geminitest.Reply {
	content, _ := p.block(memoriesBlock)
	request, _ := p.block(requestBlock)
	s := &subAgent{ask: readAsk(request), memories: readMemories(content), t: readTurn(r), last: final(r)}
	if s.ask.IP == "" {
		return geminitest.Text(answer("Answer (offline stand-in: a script, not a model):", record{Evidence: []evidence{{Fact: "The request names no IP address to look for."}}}))
	}
	table, need := s.findTable()
	switch {
	case len(need) > 0 && !s.last:
		return geminitest.Calls(need...)
	case len(need) > 0:
		return geminitest.Text(answer("Answer (offline stand-in: a script, not a model):", record{
			Evidence: []evidence{{Fact: "The turns ran out before a table of logins was found."}}}))
	case table == nil:
		return geminitest.Text(answer("Answer (offline stand-in: a script, not a model):", record{
			Evidence: []evidence{{Fact: "None of the tables holds logins with a time, source address, host, user and success flag."}}}))
	case s.ask.At.IsZero():
		return s.logins(*table)
	}
	return s.session(*table)
}

// findTable returns the table of logins, or the calls still needed to find
// it.
func (s *subAgent) findTable() (*authTable, []*genai.FunctionCall) {
	for _, m := range s.memories {
		name := tableIn(m.Claim)
		if name == "" {
			continue
		}
		res := s.t.result(callSchema + name)
		if res == nil {
			return nil, []*genai.FunctionCall{call(callSchema+name, bqSchema, map[string]any{"table": name})}
		}
		if t, ok := authColumns("`"+name+"`", name, res); ok {
			return &t, nil
		}
		break // the memory was wrong: look through the tables
	}
	listed := s.t.result(callTables)
	if listed == nil {
		return nil, []*genai.FunctionCall{call(callTables, bqTables, map[string]any{})}
	}
	tables, _ := listed["tables"].([]any)
	var need []*genai.FunctionCall
	var found *authTable
	for _, e := range tables {
		m, _ := e.(map[string]any)
		name := str(m["table"])
		sqlName := str(m["sql_name"])
		if sqlName == "" {
			sqlName = "`" + name + "`"
		}
		res := s.t.result(callSchema + name)
		if res == nil {
			need = append(need, call(callSchema+name, bqSchema, map[string]any{"table": name}))
			continue
		}
		if t, ok := authColumns(sqlName, name, res); ok && found == nil {
			found = &t
		}
	}
	if len(need) > 0 {
		return nil, need
	}
	return found, nil
}

// query is a bigquery_query call.
func query(id, sql string, limit int) *genai.FunctionCall {
	return call(id, bqQuery, map[string]any{"sql": sql, "limit": limit})
}

// failed reads a query's error, if it has one.
func failed(res map[string]any) string {
	if e := res["error"]; e != nil {
		return str(e)
	}
	return ""
}

// logins asks for the address's events per host and outcome and for its
// successful logins, in one turn, and answers from both.
func (s *subAgent) logins(t authTable) geminitest.Reply {
	from, to := s.ask.window()
	sum, list := t.summarySQL(s.ask.IP, from, to), t.loginsSQL(s.ask.IP, from, to)
	sumRes, listRes := s.t.result(callSummary), s.t.result(callLogins)
	if (sumRes == nil || listRes == nil) && !s.last {
		return geminitest.Calls(query(callSummary, sum, 100), query(callLogins, list, 20))
	}
	rec := record{LogsChecked: true}
	head := fmt.Sprintf("Answer from %s (offline stand-in: a script, not a model). SQL: %s ; %s", t.Name, sum, list)
	if msg := failed(sumRes) + failed(listRes); msg != "" || sumRes == nil || listRes == nil {
		rec.LogsChecked = false
		rec.Evidence = []evidence{{Fact: "The queries did not answer: " + or(msg, "no turns left")}}
		return geminitest.Text(answer(head, rec))
	}
	judgeLogins(&rec, t, s.ask, rows(sumRes), rows(listRes))
	return geminitest.Text(answer(head, rec))
}

// session finds the login at the time asked, then what its user did on its
// host in the following hour.
func (s *subAgent) session(t authTable) geminitest.Reply {
	loginSQL := t.loginsSQL(s.ask.IP, s.ask.At, s.ask.At.Add(time.Second))
	atRes := s.t.result(callLoginAt)
	if atRes == nil && !s.last {
		return geminitest.Calls(query(callLoginAt, loginSQL, 5))
	}
	rec := record{SessionChecked: true}
	head := fmt.Sprintf("Answer from %s (offline stand-in: a script, not a model). SQL: %s", t.Name, loginSQL)
	if atRes == nil || failed(atRes) != "" {
		rec.SessionChecked = false
		rec.Evidence = []evidence{{Fact: "The query for the login did not answer: " + or(failed(atRes), "no turns left")}}
		return geminitest.Text(answer(head, rec))
	}
	found := rows(atRes)
	if len(found) == 0 {
		rec.Evidence = []evidence{{Fact: fmt.Sprintf("No successful login from %s at %s.", s.ask.IP, clock(s.ask.At))}}
		return geminitest.Text(answer(head, rec))
	}
	l := found[0]
	host, user := str(l[t.Host]), str(l[t.User])
	rec.Login = &login{Source: s.ask.IP, User: user, Host: host, Time: s.ask.At.UTC().Format(time.RFC3339), Method: str(l[t.Method])}
	sql := t.sessionSQL(host, user, s.ask.At)
	res := s.t.result(callSession)
	if res == nil && !s.last {
		return geminitest.Calls(query(callSession, sql, 50))
	}
	head += " ; " + sql
	if res == nil || failed(res) != "" {
		rec.SessionChecked = false
		rec.Evidence = []evidence{{Fact: "The query for the session did not answer: " + or(failed(res), "no turns left")}}
		return geminitest.Text(answer(head, rec))
	}
	judgeSession(&rec, t, rows(res))
	return geminitest.Text(answer(head, rec))
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
