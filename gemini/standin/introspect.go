package standin

import (
	"fmt"
	"slices"
	"strings"
)

// answerBlock holds the sub-agent's final answer in the introspection
// prompt.
const answerBlock = "answer"

// introspectReply keeps one claim of schema knowledge from the session (the
// column that told the events apart, and its values, as the sub-agent's
// record gives them), unless a recalled memory already says it, and rates
// the recalled memories the session relied on (helpful) or found wrong
// (harmful). The claim names the table and holds no address, host, user or
// time: those are results, not knowledge.
func introspectReply(p page) map[string]any {
	out := map[string]any{"claims": []string{}, "helpful_memory_ids": []string{}, "harmful_memory_ids": []string{}}
	content, _ := p.block(answerBlock)
	recs := readRecords(content)
	if len(recs) == 0 {
		return out
	}
	rec := recs[0]
	mems, _ := p.block(memoriesBlock)
	recalled := readMemories(mems)
	ids := func(want []string) []string {
		keep := []string{}
		for _, m := range recalled {
			if slices.Contains(want, m.ID) {
				keep = append(keep, m.ID)
			}
		}
		return keep
	}
	out["helpful_memory_ids"], out["harmful_memory_ids"] = ids(rec.MemoriesUsed), ids(rec.MemoriesWrong)
	if c := claim(rec.Learned); c != "" && !slices.ContainsFunc(recalled, func(m memoryNote) bool { return m.Claim == c }) {
		out["claims"] = []string{c}
	}
	return out
}

// claim states what a session learned as one sentence.
func claim(l *learned) string {
	if l == nil || l.Table == "" || l.Column == "" || len(l.Values) == 0 {
		return ""
	}
	quoted := make([]string, len(l.Values))
	for i, v := range l.Values {
		quoted[i] = "'" + v + "'"
		if l.Kind == "logins" && i < len(l.Success) && l.Flag != "" {
			quoted[i] += fmt.Sprintf(" (%s %t)", l.Flag, l.Success[i])
		}
	}
	switch l.Kind {
	case "logins":
		return fmt.Sprintf("In %s, logins from a %s have %s %s.", l.Table, or(l.Source, "source address"), l.Column, strings.Join(quoted, " or "))
	case "session":
		return fmt.Sprintf("In %s, what a user did after a login shows as %s %s rows, matched by %s rather than by address.",
			l.Table, l.Column, strings.Join(quoted, " and "), strings.Join(l.Match, " and "))
	}
	return ""
}
