package activities

import (
	"embed"
	"fmt"
	"strings"

	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// The prompt of each phase is prompts/<phase>.md, defining "<phase>/system"
// and "<phase>/user", with its response schema and example beside it.
//
//go:embed prompts
var promptFS embed.FS

var (
	prompts         = prompt.Load(promptFS, "prompts")
	planSchema      = prompts.Schema("plan")
	reflectSchema   = prompts.Schema("reflect")
	concludeSchema  = prompts.Schema("conclude")
	modeSchema      = prompts.Schema("mode")
	planExample     = prompts.Example("plan")
	reflectExample  = prompts.Example("reflect")
	concludeExample = prompts.Example("conclude")
)

// Per-prompt budgets of step results (the whole answers are in the
// transcript store; these bound what one prompt shows of each).
const (
	// maxResultInPrompt bounds the result of the step being judged, and each
	// step's result in the conclusion.
	maxResultInPrompt = 8 << 10
	// maxCompletedInPrompt bounds each earlier step's result in reflection.
	maxCompletedInPrompt = 2 << 10
)

// phasePrompt is a rendered phase: the system instruction and the user text.
type phasePrompt struct{ system, user string }

// renderPhase fills "<name>/system" and "<name>/user" with the same data.
func renderPhase(name string, data any) (phasePrompt, error) {
	system, err := prompts.Render(name+"/system", data)
	if err != nil {
		return phasePrompt{}, err
	}
	user, err := prompts.Render(name+"/user", data)
	if err != nil {
		return phasePrompt{}, err
	}
	return phasePrompt{system, user}, nil
}

// conversationText renders the conversation history for a data block.
func conversationText(history []investigation.Message) string {
	var b strings.Builder
	for i, m := range history {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "[%s]\n%s", m.Role, m.Text)
	}
	return b.String()
}

// planText renders a plan (objective and steps with status, no results)
// for a data block.
func planText(p *plan.Plan) string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Objective: %s", p.Objective)
	for _, s := range p.Steps {
		status := s.Status
		if status == "" {
			status = plan.Pending
		}
		fmt.Fprintf(&b, "\n- %s (%s): %s [tools: %s]", s.ID, status, s.Description, strings.Join(s.Tools, ", "))
		if s.Note != "" {
			fmt.Fprintf(&b, " (%s)", s.Note)
		}
	}
	return b.String()
}

// insightsText renders insights as lines naming the step each came from.
func insightsText(in []investigation.Insight) string {
	var b strings.Builder
	for i, x := range in {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "- %s (%s)", x.Text, x.Step)
	}
	return b.String()
}
