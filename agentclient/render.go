package agentclient

import (
	"fmt"
	"io"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
)

// Renderer shows what following an investigation reads: its events, the
// events of the child runs it started, notices about the following itself,
// and how following ended. NewTextRenderer writes the lines the analyst
// reads, NewJSONRenderer JSON lines for scripts.
type Renderer interface {
	// Event is the investigation's next event (each once, in order).
	Event(e investigation.Event)
	// ChildEvent is the next event of a child run (a BigQuery sub-agent).
	ChildEvent(child string, e investigation.Event)
	// Notice is a line about the following itself: a header, a gap, a wait
	// for a worker; child names the child run it is about, or is "".
	Notice(child, msg string)
	// End shows how following ended, when it did not end with an error
	// (a Ctrl-C is one: InterruptedError).
	End(e Ending)
}

// Ending is how following ended without an error.
type Ending struct {
	// ID is the investigation's workflow ID.
	ID string
	// Closed says the workflow completed; otherwise following stopped at
	// the conclusion it waited for and the investigation stays open.
	Closed bool
	// Watch says following was a watch (which reports a closed workflow in
	// one line) rather than one turn (investigate, ask).
	Watch bool
	// Status is the investigation's status when following stopped at a
	// conclusion, if the status query answered.
	Status *investigation.Status
	// Result is the workflow's result once it completed, if it could be read.
	Result *investigation.Result
}

// NewTextRenderer renders for people on out: the investigation id's
// events, its child runs' events indented and prefixed [bigquery], and a
// totals line whose cost comes from prices.
func NewTextRenderer(out io.Writer, id string, prices pricing.Table) Renderer {
	return &textRenderer{out: out, prices: prices, main: &printer{out: out, id: id}, children: map[string]*printer{}}
}

type textRenderer struct {
	out      io.Writer
	prices   pricing.Table
	main     *printer
	children map[string]*printer
}

func (t *textRenderer) Event(e investigation.Event) { t.main.print(e) }

func (t *textRenderer) ChildEvent(child string, e investigation.Event) { t.child(child).print(e) }

func (t *textRenderer) Notice(child, msg string) {
	w := t.out
	if child != "" {
		w = t.child(child).out
	}
	fmt.Fprintln(w, msg)
}

// child is the printer of a child run, whose lines are prefixed.
func (t *textRenderer) child(id string) *printer {
	p, ok := t.children[id]
	if !ok {
		p = &printer{out: &prefixWriter{w: t.out, prefix: "    [bigquery] "}, id: id}
		t.children[id] = p
	}
	return p
}

func (t *textRenderer) End(e Ending) {
	switch {
	case e.Watch && e.Result != nil:
		fmt.Fprintf(t.out, "\ninvestigation %s completed: %s\n", e.ID, spendText(e.Result.Spend, t.prices))
	case e.Watch:
		fmt.Fprintf(t.out, "\ninvestigation %s completed\n", e.ID)
	case e.Status != nil:
		summary(t.out, e.Status.Plan, e.Status.Spend, t.prices)
		if e.Status.Phase == investigation.PhaseIdle {
			t.main.idle()
		}
	case e.Result != nil:
		if e.Closed && !t.main.concluded && e.Result.Conclusion != "" {
			t.main.conclusion(e.Result.Conclusion, e.Result.Verdict)
		}
		summary(t.out, e.Result.Plan, e.Result.Spend, t.prices)
	}
}
