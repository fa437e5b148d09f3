package standin

import (
	"encoding/json"
	"slices"
	"strings"
)

// sessionBlock holds the sub-agent's session in the introspection prompt:
// JSON of the schemas it read and its calls, their SQL without values.
const sessionBlock = "session"

// session is the part of the session block the script reads.
type session struct {
	Schemas []map[string]any `json:"schemas"`
	Calls   []sessionCall    `json:"calls"`
}

type sessionCall struct {
	Tool string `json:"tool"`
	SQL  string `json:"sql"`
}

// introspectReply proposes one claim of schema knowledge from the session's
// structure (introspection sees no row and no answer): for the table of
// logins among the schemas read, the columns that tell its events apart
// when the session looked for an address's logins, or the columns that tie
// a session to its login when it looked for what a user did on a host;
// unless a recalled memory already says it. Recalled memories that named
// the table of logins are helpful, those that named a table whose schema
// has no logins harmful.
func introspectReply(p page) map[string]any {
	out := map[string]any{"claims": []any{}, "helpful_memory_ids": []string{}, "harmful_memory_ids": []string{}}
	content, _ := p.block(sessionBlock)
	var s session
	if json.Unmarshal([]byte(content), &s) != nil {
		return out
	}
	var login *authTable
	var others []string
	for _, schema := range s.Schemas {
		name := str(schema["table"])
		if t, ok := authColumns("`"+name+"`", name, schema); ok && login == nil {
			login = &t
		} else {
			others = append(others, name)
		}
	}
	mems, _ := p.block(memoriesBlock)
	helpful, harmful := []string{}, []string{}
	recalled := readMemories(mems)
	for _, m := range recalled {
		switch table := tableIn(m.Claim); {
		case login != nil && table == login.Name:
			helpful = append(helpful, m.ID)
		case slices.Contains(others, table):
			harmful = append(harmful, m.ID)
		}
	}
	out["helpful_memory_ids"], out["harmful_memory_ids"] = helpful, harmful
	if login == nil {
		return out
	}
	c := login.claim(s)
	if c != nil && !slices.ContainsFunc(recalled, func(m memoryNote) bool { return strings.HasSuffix(m.Claim, c["text"].(string)) }) {
		out["claims"] = []any{c}
	}
	return out
}

// claim is what the session's queries of the table of logins show about
// it, as a typed claim, or nil.
func (t authTable) claim(s session) map[string]any {
	queried := func(cols ...string) bool {
		return slices.ContainsFunc(s.Calls, func(c sessionCall) bool {
			for _, col := range cols {
				if !strings.Contains(c.SQL, col+" = ?") {
					return false
				}
			}
			return true
		})
	}
	switch {
	case t.Type != "" && queried(t.Host, t.User):
		return map[string]any{"kind": "join_key", "table": t.Name, "columns": []string{t.Host, t.User},
			"text": "the events of a session share " + t.Host + " and " + t.User + " with its login, so match them on both."}
	case t.Type != "" && queried(t.Source):
		return map[string]any{"kind": "column_meaning", "table": t.Name, "columns": []string{t.Type, t.Success},
			"text": t.Type + " names the kind of each login event and " + t.Success + " tells whether it succeeded."}
	}
	return nil
}
