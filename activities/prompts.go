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
	prompts        = prompt.Load(promptFS, "prompts")
	planSchema     = prompts.Schema("plan")
	reflectSchema  = prompts.Schema("reflect")
	concludeSchema = prompts.Schema("conclude")
	modeSchema     = prompts.Schema("mode")
	verdictSchema  = prompts.Schema(prompt.PhaseVerdict)
	planExample    = prompts.Example("plan")
	reflectExample = prompts.Example("reflect")
	// The examples of phases that write in the configured language, one per
	// language (investigation.Languages), written wholly in it.
	concludeExamples = map[string]string{"en": prompts.Example("conclude"), "ja": prompts.Example("conclude.ja")}
	verdictExamples  = map[string]string{"en": prompts.Example("verdict"), "ja": prompts.Example("verdict.ja")}
)

// inLanguage picks a language's entry (English when there is none).
func inLanguage(m map[string]string, code string) string {
	if s, ok := m[code]; ok {
		return s
	}
	return m["en"]
}

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

// renderPhase fills "<name>/system" and "<name>/user" with the same data;
// their data blocks carry tag, as those the caller wrote into data must.
func renderPhase(tag prompt.Tag, name string, data any) (phasePrompt, error) {
	system, err := prompts.Render(name+"/system", tag, data)
	if err != nil {
		return phasePrompt{}, err
	}
	user, err := prompts.Render(name+"/user", tag, data)
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
// for a data block: the planner and reflection wrote it.
func planText(p *plan.Plan) string {
	if p == nil {
		return ""
	}
	return "Objective: " + p.Objective + "\n" + stepLines(p.Steps, false)
}

// stepLines renders steps for a data block, one line each (with status,
// tools, dependencies and note), and with expected their expected outcome.
func stepLines(steps []plan.Step, expected bool) string {
	var b strings.Builder
	for i, s := range steps {
		if i > 0 {
			b.WriteByte('\n')
		}
		status := s.Status
		if status == "" {
			status = plan.Pending
		}
		fmt.Fprintf(&b, "- %s (%s): %s [tools: %s]", s.ID, status, s.Description, strings.Join(s.Tools, ", "))
		if len(s.DependsOn) > 0 {
			fmt.Fprintf(&b, " [depends on: %s]", strings.Join(s.DependsOn, ", "))
		}
		if s.Note != "" {
			fmt.Fprintf(&b, " (%s)", s.Note)
		}
		if expected && s.Expected != "" {
			fmt.Fprintf(&b, "\n  expected: %s", s.Expected)
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
