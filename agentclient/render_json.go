package agentclient

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// FinalKind is the kind of the last JSON line, beside the event kinds.
const FinalKind = "result"

// Final is the last JSON line of following (when it did not end with an
// error or Ctrl-C): where the investigation stands and what it cost.
type Final struct {
	Kind       string `json:"kind"` // FinalKind
	WorkflowID string `json:"workflow_id"`
	// Closed says the workflow completed; otherwise the turn concluded and
	// the investigation stays open (Phase says what it does now).
	Closed  bool                   `json:"closed"`
	Phase   string                 `json:"phase,omitempty"`
	Verdict *investigation.Verdict `json:"verdict,omitempty"`
	Steps   int                    `json:"steps"`
	investigation.Spend
	// Cost estimates what the model calls cost (see pricing.Table).
	Cost Cost `json:"cost"`
	// Result is the workflow's result, once it completed.
	Result *investigation.Result `json:"result,omitempty"`
}

// NewJSONRenderer writes one JSON line to out per event of the
// investigation, exactly as the workflow recorded it, then a Final line.
// Child runs' events are left out (their numbers are their own; a
// tool_call event names the child, which can be watched by its ID); notices
// and the resume hint after Ctrl-C go to info as text.
func NewJSONRenderer(out, info io.Writer, prices pricing.Table) Renderer {
	return &jsonRenderer{out: out, info: info, prices: prices}
}

type jsonRenderer struct {
	out, info io.Writer
	prices    pricing.Table
}

func (j *jsonRenderer) Event(e investigation.Event) { j.line(e) }

func (j *jsonRenderer) ChildEvent(string, investigation.Event) {}

func (j *jsonRenderer) Notice(child, msg string) {
	if child != "" {
		msg = child + ": " + msg
	}
	fmt.Fprintln(j.info, msg)
}

func (j *jsonRenderer) End(e Ending) {
	f := Final{Kind: FinalKind, WorkflowID: e.ID, Closed: e.Closed, Result: e.Result}
	switch {
	case e.Status != nil:
		f.Phase, f.Verdict = e.Status.Phase, e.Status.Verdict
		f.Steps, f.Spend = e.Status.Plan.Count(plan.Done), e.Status.Spend
	case e.Result != nil:
		f.Verdict = e.Result.Verdict
		f.Steps, f.Spend = e.Result.Plan.Count(plan.Done), e.Result.Spend
	}
	f.Cost = estimate(f.Spend, j.prices)
	j.line(f)
}

// line writes v as one JSON line; like the text renderer's lines, a
// failed write (a closed pipe) is not an error of following.
func (j *jsonRenderer) line(v any) { _ = writeJSON(j.out, v, false) }

// WriteJSON writes v as indented JSON whose strings cannot drive the
// terminal (see termtext.JSON) and still decode to the same values.
func WriteJSON(w io.Writer, v any) error { return writeJSON(w, v, true) }

func writeJSON(w io.Writer, v any, indent bool) error {
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(append(termtext.JSON(b), '\n'))
	return err
}
