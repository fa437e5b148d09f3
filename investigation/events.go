package investigation

import "github.com/secops-agent/investigator/plan"

// EventKind classifies a progress event; each kind fills Text and the
// fields listed beside it, and no field means different things for
// different kinds.
type EventKind string

// Progress event kinds, in the order an investigation usually emits them.
const (
	EventPlan       EventKind = "plan"        // Plan; Notes: what planning repaired or dropped
	EventStep       EventKind = "step"        // Step; Text: its description; Expected
	EventToolCall   EventKind = "tool_call"   // Step; Text: the call's summary; Child: the child workflow it starts
	EventToolResult EventKind = "tool_result" // Step; Text: "<tool>: <size or error>"
	EventStepDone   EventKind = "step_done"   // Step; Text: the step's answer (capped)
	EventInsight    EventKind = "insight"     // Step; Insights
	EventPlanUpdate EventKind = "plan_update" // Step; Updates: each update and what became of it; Completed, Pending
	EventNote       EventKind = "note"        // Text; Notes: the items it names
	EventConclusion EventKind = "conclusion"  // Text: the Markdown; Verdict (for a direct answer, only one that changed)
	// EventVerdictChanged: an exchange changed the standing verdict. From: the
	// standing verdict; Verdict: the new one with its evidence; Reason: why.
	EventVerdictChanged EventKind = "verdict_changed"
	// Steering and conversation events.
	EventHint     EventKind = "hint"     // Text: the hint
	EventApproval EventKind = "approval" // Text: "awaiting", "approved" or "revise: <feedback>"
	EventQuestion EventKind = "question" // Step; QuestionID; Text: the question
	EventAnswer   EventKind = "answer"   // QuestionID; Text: the answer (or that none came)
	EventTurn     EventKind = "turn"     // a follow-up exchange starts; Text: the question; Mode, Reason; Queued
	EventStop     EventKind = "stop"     // Text: why the run stops early
	EventIdle     EventKind = "idle"     // Text: how long the concluded investigation waits for follow-ups
)

// Event is one line of live progress. Seq numbers start at 1 and have no
// gaps, also across continue-as-new, so a watcher asks for the events after
// the last one it saw.
type Event struct {
	Seq  int       `json:"seq"`
	Kind EventKind `json:"kind"`
	// Turn is the exchange of the conversation the event belongs to.
	Turn int    `json:"turn,omitempty"`
	Step string `json:"step,omitempty"`
	Text string `json:"text,omitempty"`

	Plan     *plan.Plan `json:"plan,omitempty"`
	Expected string     `json:"expected,omitempty"`
	Child    string     `json:"child,omitempty"`
	// Tool names the tool of a tool_call or tool_result event.
	Tool       string   `json:"tool,omitempty"`
	Insights   []string `json:"insights,omitempty"`
	Updates    []string `json:"updates,omitempty"`
	Completed  []string `json:"completed,omitempty"`
	Pending    []string `json:"pending,omitempty"`
	Notes      []string `json:"notes,omitempty"`
	QuestionID string   `json:"question_id,omitempty"`
	Mode       string   `json:"mode,omitempty"`
	// Reason says why: a follow-up's mode, a verdict's change.
	Reason  string   `json:"reason,omitempty"`
	Verdict *Verdict `json:"verdict,omitempty"`
	// From is the verdict a verdict_changed event replaced.
	From *Verdict `json:"from,omitempty"`
	// CallID names the action an approval_requested or approval_decided
	// event is about (actions.go).
	CallID string `json:"call_id,omitempty"`
	// Queued is, on a turn event, the number of the note that queued its
	// question (the ask's Ack.Seq), so a client that asked the same
	// question twice follows its own turn; 0 when unknown (a turn recorded
	// before it was set, or a question whose note was lost).
	Queued int `json:"queued,omitempty"`
}
