package agentclient

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// printer turns progress events into the lines the analyst reads (the text
// renderer's); a child run's events go through a printer whose writer
// prefixes every line.
type printer struct {
	out io.Writer
	// id is the investigation's workflow ID, for the commands the printer
	// suggests (approve, answer, ask).
	id        string
	concluded bool
	// running are the steps started and not yet done: while more than one
	// runs, each step's lines name their step.
	running []string
}

func (p *printer) print(e investigation.Event) {
	w := p.out
	switch e.Kind {
	case investigation.EventStep:
		p.running = append(p.running, e.Step)
	case investigation.EventTurn, investigation.EventConclusion:
		p.running = nil
	}
	if len(p.running) > 1 && e.Step != "" && e.Kind != investigation.EventStep {
		w = &prefixWriter{w: p.out, prefix: "[" + e.Step + "]"}
	}
	if e.Kind == investigation.EventStepDone {
		p.running = slices.DeleteFunc(p.running, func(s string) bool { return s == e.Step })
	}
	switch e.Kind {
	case investigation.EventPlan:
		if e.Plan != nil {
			printPlan(w, *e.Plan, false)
		}
		for _, n := range e.Notes {
			fmt.Fprintf(w, "  note: %s\n", oneLine(n))
		}
	case investigation.EventStep:
		fmt.Fprintf(w, "\nSTEP  %s: %s\n", e.Step, oneLine(e.Text))
	case investigation.EventToolCall:
		fmt.Fprintf(w, "  -> %s\n", oneLine(e.Text))
	case investigation.EventToolResult:
		fmt.Fprintf(w, "  <- %s\n", oneLine(e.Text))
	case investigation.EventStepDone:
		fmt.Fprintf(w, "  done: %s\n", indent(e.Text, "        "))
	case investigation.EventInsight:
		for _, in := range e.Insights {
			fmt.Fprintf(w, "  insight: %s\n", oneLine(in))
		}
	case investigation.EventPlanUpdate:
		for _, u := range e.Updates {
			fmt.Fprintf(w, "  plan: %s\n", oneLine(u))
		}
		fmt.Fprintf(w, "  completed: %s\n  pending:   %s\n", oneLine(list(e.Completed)), oneLine(list(e.Pending)))
	case investigation.EventNote:
		if len(e.Notes) > 0 {
			fmt.Fprintf(w, "  note: %s %s\n", oneLine(e.Text), oneLine(strings.Join(e.Notes, ", ")))
		} else {
			fmt.Fprintf(w, "  note: %s\n", oneLine(e.Text))
		}
	case investigation.EventConclusion:
		p.conclusion(e.Text, e.Verdict)
	case investigation.EventVerdictChanged:
		if e.Verdict != nil {
			from := "none"
			if e.From != nil {
				from = e.From.String()
			}
			fmt.Fprintf(w, "\nVERDICT CHANGED  %s -> %s\n", oneLine(from), oneLine(e.Verdict.String()))
			if e.Reason != "" {
				fmt.Fprintf(w, "  why: %s\n", indent(e.Reason, "       "))
			}
		}
	case investigation.EventHint:
		fmt.Fprintf(w, "  hint: %s\n", oneLine(e.Text))
	case investigation.EventApproval:
		switch t := strings.TrimSpace(e.Text); {
		case t == "awaiting":
			fmt.Fprintf(w, "PLAN AWAITS APPROVAL: starter approve %s | starter revise %s \"...\"\n", p.id, p.id)
		case t == "approved":
			fmt.Fprintln(w, "  plan approved")
		case strings.HasPrefix(t, "revise"):
			fmt.Fprintf(w, "  revision requested: %s\n", oneLine(strings.TrimPrefix(strings.TrimPrefix(t, "revise"), ":")))
		default:
			fmt.Fprintf(w, "  approval: %s\n", oneLine(t))
		}
	case investigation.EventQuestion:
		fmt.Fprintf(w, "QUESTION %s from %s: %s — answer with: starter answer %s \"...\"\n", oneLine(cmp.Or(e.QuestionID, "?")), stepName(e.Step), oneLine(e.Text), p.id)
	case investigation.EventApprovalRequested:
		// The arguments with every invisible character escaped: the analyst
		// approves what they read (termtext.Reveal). The reason is the
		// step's description, the model's: on the line.
		fmt.Fprintf(w, "ACTION AWAITS APPROVAL %s from %s: %s %s (%s) — starter approve-call %s %s | starter deny-call %s %s \"reason\"\n",
			oneLine(e.CallID), stepName(e.Step), oneLine(e.Tool), termtext.Reveal(e.Text), oneLine(e.Reason), p.id, oneLine(e.CallID), p.id, oneLine(e.CallID))
	case investigation.EventApprovalDecided:
		fmt.Fprintf(w, "  action %s (%s): %s\n", oneLine(e.CallID), oneLine(e.Tool), oneLine(e.Text))
	case investigation.EventAnswer:
		fmt.Fprintf(w, "  answer to %s: %s\n", oneLine(cmp.Or(e.QuestionID, "?")), indent(e.Text, bodyIndent))
	case investigation.EventTurn:
		fmt.Fprintf(w, "\n=== FOLLOW-UP (turn %d, mode %s): %s\n", e.Turn, oneLine(cmp.Or(e.Mode, investigation.ModePlan)), oneLine(e.Text))
	case investigation.EventStop:
		fmt.Fprintf(w, "  stopping early: %s\n", oneLine(e.Text))
	case investigation.EventIdle:
		p.idle()
	default:
		if e.Text != "" {
			fmt.Fprintf(w, "  %s: %s\n", oneLine(string(e.Kind)), oneLine(e.Text))
		}
	}
}

func (p *printer) conclusion(md string, v *investigation.Verdict) {
	p.concluded = true
	// The model's Markdown, indented: none of its lines can read as the
	// CLI's own (a VERDICT line where the verdict was kept and none follows).
	fmt.Fprintf(p.out, "\n==================== CONCLUSION ====================\n%s%s\n", bodyIndent, indent(md, bodyIndent))
	if v != nil {
		printVerdict(p.out, v)
	}
}

// printVerdict prints the machine-readable verdict, why, and the evidence
// it rests on.
func printVerdict(w io.Writer, v *investigation.Verdict) {
	fmt.Fprintf(w, "\nVERDICT  %s (%s confidence)\n", oneLine(v.Verdict), oneLine(v.Confidence))
	if v.Reason != "" {
		fmt.Fprintf(w, "  why: %s\n", indent(v.Reason, "       "))
	}
	for _, e := range v.Evidence {
		from := oneLine(e.StepID)
		if e.Tool != "" {
			from += ", " + oneLine(e.Tool)
		}
		fmt.Fprintf(w, "  - %s [%s]\n", oneLine(e.Fact), from)
	}
}

// idle tells the analyst that the investigation waits for follow-ups.
func (p *printer) idle() {
	fmt.Fprintf(p.out, "(the investigation stays open for follow-up questions: starter ask %s \"...\")\n", p.id)
}

// summary prints the totals line shown after a conclusion.
func summary(w io.Writer, p plan.Plan, s investigation.Spend, prices pricing.Table) {
	fmt.Fprintf(w, "\n%d steps, %s\n", p.Count(plan.Done), spendText(s, prices))
}

// stepMarks shows a step's status in front of it (as in the Web UI details).
var stepMarks = map[plan.Status]string{plan.Done: "[x]", plan.Running: "[>]", plan.Cancelled: "[-]", plan.Skipped: "[-]", plan.Pending: "[ ]"}

// printPlan prints a plan's objective and steps; withStatus puts each step's
// status in front of it and its note (why it was cancelled or skipped) after.
func printPlan(w io.Writer, p plan.Plan, withStatus bool) {
	// The plan is the model's: each field on one line, so none can print
	// a line of its own (a fake VERDICT).
	fmt.Fprintf(w, "PLAN  %s\n", oneLine(p.Objective))
	for _, s := range p.Steps {
		tools := strings.Join(s.Tools, ", ")
		if tools == "" {
			tools = "no tools"
		}
		pad := "          "
		if withStatus {
			mark := stepMarks[s.Status]
			if mark == "" {
				mark = "[ ]"
			}
			fmt.Fprintf(w, "  %s %s  %s [%s]", mark, s.ID, oneLine(s.Description), oneLine(tools))
			if s.Status != "" && s.Status != plan.Pending {
				fmt.Fprintf(w, " (%s)", s.Status)
			}
			fmt.Fprintln(w)
			pad = "              "
			if s.Note != "" {
				fmt.Fprintf(w, "%snote: %s\n", pad, oneLine(s.Note))
			}
			continue
		}
		fmt.Fprintf(w, "  %s  %s [%s]\n", s.ID, oneLine(s.Description), oneLine(tools))
		if s.Expected != "" {
			fmt.Fprintf(w, "%sexpect: %s\n", pad, oneLine(s.Expected))
		}
	}
}

func stepName(s string) string {
	if s == "" {
		return "the investigation"
	}
	return oneLine(s)
}

func list(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	return strings.Join(items, "; ")
}

// bodyIndent starts every line of multi-line text from outside (a
// conclusion, an answer): the CLI's own lines start at column 0 or 2, a
// child run's at 4 ("    [bigquery]"), so no line of it reads as one of them.
const bodyIndent = "      "

func indent(s, prefix string) string {
	// A bare CR reaches the terminal as a line break (termtext), so it is one here.
	s = strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(strings.TrimSpace(s))
	lines := strings.Split(s, "\n")
	for i := 1; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "" {
			lines[i] = "" // a blank line stays blank
		} else {
			lines[i] = prefix + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// oneLine is s on one line: a verdict's fact, from what the model and an
// alert's sender wrote, cannot print a line that reads as the verdict.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// prefixWriter writes every non-empty line with a prefix, for the events of a
// child run shown inside the parent's stream.
type prefixWriter struct {
	w       io.Writer
	prefix  string
	midLine bool
}

func (pw *prefixWriter) Write(b []byte) (int, error) {
	var buf []byte
	for _, c := range b {
		if !pw.midLine && c != '\n' {
			buf = append(buf, pw.prefix...)
			if c != ' ' && !strings.HasSuffix(pw.prefix, " ") {
				// "[step_2] QUESTION ...", not "[step_2]QUESTION ...".
				buf = append(buf, ' ')
			}
		}
		buf = append(buf, c)
		pw.midLine = c != '\n'
	}
	if _, err := pw.w.Write(buf); err != nil {
		return 0, err
	}
	return len(b), nil
}
