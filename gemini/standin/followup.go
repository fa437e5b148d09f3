package standin

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// Data blocks of the follow-up prompts: the plan in progress (lines
// "- <id> (<status>): ..."), the conversation so far and the standing
// verdict (JSON).
const (
	activePlanBlock   = "active plan"
	conversationBlock = "conversation"
	standingBlock     = "standing verdict"
)

// verdictReply reviews the verdict after a direct answer: the stand-in
// cannot read the question or weigh the answer, so it keeps the standing
// verdict as it is (undetermined, low, when there is none).
func verdictReply(p page) map[string]any {
	out := map[string]any{"evidence": []any{}, "reason": "The offline stand-in does not weigh follow-up answers: the verdict stays as it was.",
		"verdict": undetermined, "confidence": "low"}
	raw, _ := p.block(standingBlock)
	var standing struct {
		Verdict    string           `json:"verdict"`
		Confidence string           `json:"confidence"`
		Evidence   []map[string]any `json:"evidence"`
	}
	if json.Unmarshal([]byte(raw), &standing) == nil && standing.Verdict != "" {
		out["verdict"], out["confidence"] = standing.Verdict, standing.Confidence
		if standing.Evidence != nil {
			out["evidence"] = standing.Evidence
		}
	}
	return out
}

// modeReply routes a follow-up question. The stand-in cannot read a
// question (it sits behind no declared label, and the stand-in is no
// model), so it decides from the plan in progress: steps still pending are
// continued with Plan & Execute; once every step has finished, the question
// gets a direct answer.
func modeReply(p page) map[string]any {
	content, _ := p.block(activePlanBlock)
	var pending []string
	for _, l := range strings.Split(content, "\n") {
		id, rest, ok := strings.Cut(strings.TrimPrefix(l, "- "), " (")
		status, _, _ := strings.Cut(rest, ")")
		if ok && strings.HasPrefix(l, "- ") && (status == string(plan.Pending) || status == string(plan.Running)) {
			pending = append(pending, id)
		}
	}
	if len(pending) > 0 {
		return map[string]any{
			"reason": fmt.Sprintf("Steps %s of the plan in progress are still pending, so the offline stand-in continues the plan.", strings.Join(pending, ", ")),
			"mode":   investigation.ModePlan,
		}
	}
	return map[string]any{
		"reason": "Every step of the plan has finished, so the offline stand-in answers directly from what the investigation found, with one look at the alert.",
		"mode":   investigation.ModeDirect,
	}
}

// answerReply is a direct answer's tool loop: one get_alert call, then the
// answer: the key findings of the conversation's last conclusion and the
// alert's indicators.
func answerReply(r *geminitest.Request, p page) geminitest.Reply {
	al := alertFromPage(p)
	t := readTurn(r)
	if !final(r) && al.ID != "" && declares(r, toolcall.GetAlert) && t.result(callAlert) == nil {
		return geminitest.Calls(call(callAlert, toolcall.GetAlert, map[string]any{"id": al.ID}))
	}
	if res := t.result(callAlert); res != nil && res["error"] == nil {
		full := alertFromResult(res)
		full.ID = al.ID
		al = full
	}
	var b strings.Builder
	b.WriteString("The offline Gemini stand-in answers follow-up questions without reading them: it is a script, not a model. What this investigation established:\n")
	findings := keyFindings(p)
	if len(findings) == 0 {
		b.WriteString("- (no earlier conclusion to quote)\n")
	}
	for _, f := range findings {
		b.WriteString(f + "\n")
	}
	b.WriteString("\nThe alert (get_alert): " + describeAlert(al))
	return geminitest.Text(b.String())
}

// keyFindings are the bullets under the last "## Key findings" heading of
// the conversation: the stand-in's own report.
func keyFindings(p page) []string {
	content, _ := p.block(conversationBlock)
	var out []string
	in := false
	for _, l := range strings.Split(content, "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			if in = l == "## Key findings"; in {
				out = nil
			}
		case in && strings.HasPrefix(l, "- "):
			out = append(out, l)
		}
	}
	return out
}
