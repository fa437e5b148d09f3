package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/log"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// emit records a progress event and returns its sequence number. Numbers
// continue across continue-as-new, so a watcher never sees one twice.
func (r *run) emit(e investigation.Event) int {
	if r.closed {
		if r.continuing && (len(r.Unwritten) < maxUnwritten || r.acking) {
			// An input taken during the last write before continue-as-new:
			// the next run emits it first, under this number. An update
			// accepted is carried whole: its validator refused it once
			// Unwritten was full (unwrittenFull), so its acknowledgement
			// never names a number already used. A signal has no
			// acknowledgement: past the bound its note is lost (its
			// state is carried), so a flood of signals cannot grow the
			// state carried.
			r.Unwritten = append(r.Unwritten, e)
			return r.lastSeq() + len(r.Unwritten)
		}
		return r.lastSeq()
	}
	if len(r.events) >= maxRunEvents {
		// A run steered for long (hints as signals need no follow-up to
		// continue as new) keeps its latest events; a follower that far
		// behind skips ahead.
		n := maxRunEvents / 4
		r.dropped += n
		r.events = slices.Clone(r.events[n:])
	}
	e.Seq = r.lastSeq() + 1
	e.Turn = r.Turn
	r.events = append(r.events, e)
	if r.storesContext {
		r.unstored = append(r.unstored, e)
	}
	logEvent(r.log, e)
	return e.Seq
}

// unwrittenFull says the run, continuing as new, carries as many events of
// inputs taken during its last progress write as it may (maxUnwritten):
// an update is refused then (errContinuing), since the events of one it
// accepted must reach the next run under the numbers acknowledged. An
// update's validator does not run in replay, and the events carried are
// the continue-as-new input's payload, not a command: no gate.
func (r *run) unwrittenFull() bool {
	return r.closed && r.continuing && len(r.Unwritten) >= maxUnwritten
}

var errContinuing = errors.New("the investigation is continuing as new: try again in a moment")

// logEvent logs a progress event's kind and where it belongs (Temporal's
// logger adds the workflow and run IDs, and stays quiet during replay).
// Never its text: alert data, tool results and conclusions stay out of the
// logs, as they stay encrypted in history.
func logEvent(l log.Logger, e investigation.Event) {
	if l == nil {
		return
	}
	kv := []any{"kind", e.Kind, "seq", e.Seq, "turn", e.Turn}
	if e.Step != "" {
		kv = append(kv, "step", e.Step)
	}
	if e.Tool != "" {
		kv = append(kv, "tool", e.Tool)
	}
	if e.Child != "" {
		kv = append(kv, "child", e.Child)
	}
	if e.Verdict != nil {
		kv = append(kv, "verdict", e.Verdict.Verdict, "confidence", e.Verdict.Confidence)
	}
	if e.Mode != "" {
		kv = append(kv, "mode", e.Mode)
	}
	l.Info("progress", kv...)
}

// lastSeq is the number of the run's latest event.
func (r *run) lastSeq() int { return r.LastSeq + r.dropped + len(r.events) }

// eventsAfter answers the progress query: the events after seq `after` that
// this run holds (earlier ones are in the run before a continue-as-new, or
// no longer kept).
func (r *run) eventsAfter(after int) ([]investigation.Event, error) {
	return page(r.events, after-r.LastSeq-r.dropped), nil
}

// page returns at most investigation.MaxProgressEvents events from index i,
// and no more than fit maxPageBytes.
func page(events []investigation.Event, i int) []investigation.Event {
	i = max(i, 0)
	if i >= len(events) {
		return nil
	}
	return pageBytes(events[i:min(len(events), i+investigation.MaxProgressEvents)])
}

// maxDetailsConclusion bounds the conclusion shown in the current details.
const maxDetailsConclusion = 8 << 10

// setDetails keeps the workflow's current details (the Web UI's "Current
// Details") set to the plan's progress and, once concluded, the verdict and
// the latest conclusion. The UI renders them as Markdown: every text from an
// alert or a model goes through uiText (the conclusion, of many lines, termtext.Markdown), so it is never a link and
// never passes for our bold labels. Details are metadata the worker returns,
// not a command: replay compares nothing of them, so no gate.
func (r *run) setDetails(ctx workflow.Context, phase string) {
	var b strings.Builder
	if r.Input.Summary != "" {
		fmt.Fprintf(&b, "%s\n\n", uiText(r.Input.Summary))
	}
	fmt.Fprintf(&b, "**%s** — %d/%d steps done, %d tool calls\n\n", phase, r.Plan.Count(plan.Done), len(r.Plan.Steps), r.ToolCalls)
	if v := r.Verdict; v != nil {
		fmt.Fprintf(&b, "**Verdict: %s** (%s confidence)\n\n", closedSet(v.Verdict, investigation.Verdicts), closedSet(v.Confidence, investigation.Confidences))
	}
	fmt.Fprintf(&b, "Objective: %s\n\n", uiText(r.Plan.Objective))
	for _, s := range r.Plan.Steps {
		// Step IDs are the plan's own (plan.Repair numbers them step_N).
		fmt.Fprintf(&b, "- %s %s: %s (%s)\n", statusMark(s.Status), s.ID, uiText(s.Description), s.Status)
	}
	if r.Conclusion != "" {
		fmt.Fprintf(&b, "\n---\n\n%s\n", termtext.MarkdownClipped(r.Conclusion, maxDetailsConclusion))
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

// closedSet is s as written when it is one of set (checked values such as
// a verdict, shown without escapes), else as uiText.
func closedSet(s string, set []string) string {
	if slices.Contains(set, s) {
		return s
	}
	return uiText(s)
}

// uiText is a one-line text from an alert or a model as the Web UI's
// Markdown shows it: plain, links defanged (termtext.Markdown).
func uiText(s string) string { return termtext.Markdown(termtext.Line(s)) }

func statusMark(s plan.Status) string {
	switch s {
	case plan.Done:
		return "[x]"
	case plan.Running:
		return "[>]"
	case plan.Cancelled, plan.Skipped:
		return "[-]"
	}
	return "[ ]"
}
