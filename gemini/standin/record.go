package standin

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/secops-agent/investigator/internal/prompt"
)

// recordPrefix opens the last line of every answer the stand-in writes in
// a tool loop (a step's result, the sub-agent's answer): the values it found,
// as JSON, for its own later phases. Its evidence is the answer's bullets,
// "- <fact> [<step>, <tool>]" (the sub-agent's are bare). The agent passes
// those answers on as data (step results in data blocks, the sub-agent's
// answer in a function response), so reflection and the conclusion read
// them back from there, never from prompt wording. A real model reads the
// sentences instead.
const recordPrefix = "Stand-in record: "

// record is what one answer established.
type record struct {
	// Step is the plan step that wrote the record ("" for the sub-agent).
	Step string `json:"step,omitempty"`
	// Evidence is written as the answer's bullets, not in the JSON.
	Evidence []evidence `json:"-"`

	// search_alerts: the value searched for and the earlier alerts found
	// (the investigated alert left out).
	Searched    bool     `json:"searched,omitempty"`
	SearchedFor string   `json:"searched_for,omitempty"`
	Earlier     []string `json:"earlier_alerts,omitempty"`

	// The logs (bigquery_agent): whether logins were checked, the login
	// found, the failures before it, and what the session did.
	LogsChecked    bool     `json:"logs_checked,omitempty"`
	Login          *login   `json:"login,omitempty"`
	Failures       int      `json:"failures,omitempty"`
	FirstFailure   string   `json:"first_failure,omitempty"`
	LastFailure    string   `json:"last_failure,omitempty"`
	SessionChecked bool     `json:"session_checked,omitempty"`
	Activity       []string `json:"activity,omitempty"`
	Child          string   `json:"child_workflow_id,omitempty"`
}

type evidence struct {
	Tool string `json:"tool,omitempty"`
	Fact string `json:"fact"`
}

// login is a successful login found in the logs.
type login struct {
	Source string `json:"source_ip"`
	User   string `json:"user"`
	Host   string `json:"host"`
	Time   string `json:"time"`
	Method string `json:"method,omitempty"`
}

// line renders the record as the last line of an answer.
func (r record) line() string {
	raw, err := prompt.MarshalJSON(r, "")
	if err != nil { // plain strings, bools and ints always encode
		return recordPrefix + "{}"
	}
	return recordPrefix + string(raw)
}

// readRecords reads the record of every answer in text (a data block's
// content, or a function response's answer), with the bullets above its
// line as its evidence.
func readRecords(text string) []record {
	var out []record
	var bullets []evidence
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if fact, ok := strings.CutPrefix(l, "- "); ok {
			bullets = append(bullets, readBullet(fact))
			continue
		}
		raw, ok := strings.CutPrefix(l, recordPrefix)
		if !ok {
			continue
		}
		var r record
		if json.Unmarshal([]byte(raw), &r) == nil {
			r.Evidence = bullets
			out = append(out, r)
		}
		bullets = nil
	}
	return out
}

// readBullet splits "<fact> [<step>, <tool>]" (or "<fact> [<step>]"); a
// bracket that names no step is part of the fact.
func readBullet(line string) evidence {
	i := strings.LastIndex(line, " [")
	if i < 0 || !strings.HasSuffix(line, "]") {
		return evidence{Fact: line}
	}
	step, tool, _ := strings.Cut(line[i+2:len(line)-1], ", ")
	if stepNumber(step) == 0 {
		return evidence{Fact: line}
	}
	return evidence{Fact: line[:i], Tool: tool}
}

// records reads the records in every data block of a page, one per step
// (the first seen), in the order of the steps' numbers.
func (p page) records() []record {
	var out []record
	seen := map[string]bool{}
	for _, b := range p.blocks {
		for _, r := range readRecords(b.content) {
			if r.Step == "" || seen[r.Step] {
				continue
			}
			seen[r.Step] = true
			out = append(out, r)
		}
	}
	for i := 1; i < len(out); i++ { // insertion sort: a handful of steps
		for j := i; j > 0 && stepNumber(out[j].Step) < stepNumber(out[j-1].Step); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// stepNumber reads N from "step_N" (0 for anything else).
func stepNumber(id string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "step_"))
	if err != nil || !strings.HasPrefix(id, "step_") {
		return 0
	}
	return n
}

// stepID is the ID of the n-th step, as plan.Repair numbers them.
func stepID(n int) string { return fmt.Sprintf("step_%d", n) }

// answer writes an answer: its sentences, each evidence item as a bullet
// naming the step and tool (a step's answer), and the record line last.
func answer(intro string, r record) string {
	var b strings.Builder
	b.WriteString(intro)
	for _, e := range r.Evidence {
		b.WriteString("\n- " + strings.Join(strings.Fields(e.Fact), " ")) // one line, whatever the data held
		switch {
		case r.Step != "" && e.Tool != "":
			b.WriteString(" [" + r.Step + ", " + e.Tool + "]")
		case r.Step != "":
			b.WriteString(" [" + r.Step + "]")
		}
	}
	b.WriteString("\n" + r.line())
	return b.String()
}
