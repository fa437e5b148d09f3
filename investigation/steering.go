package investigation

import "github.com/secops-agent/investigator/plan"

// Updates (with validators) and queries of a running investigation. Every
// update returns only after the workflow recorded the input, so the CLI can
// confirm it; a validator rejects what cannot apply now, with the reason.
const (
	UpdateHint    = "hint"    // arg: string; result: Ack
	UpdateApprove = "approve" // arg: Approval (senders before it sent none); result: Ack
	UpdateRevise  = "revise"  // arg: string (what to change); result: Ack
	UpdateAnswer  = "answer"  // arg: Answer; result: Ack
	UpdateStop    = "stop"    // arg: string (reason, may be empty); result: Ack
	UpdateAsk     = "ask"     // arg: string (follow-up question); result: Ack
	StatusQuery   = "status"  // result: Status
)

// Ack confirms that an input was recorded.
type Ack struct {
	// Message says what happens next, for the CLI to print.
	Message string `json:"message"`
	// Seq is the progress event that records the input.
	Seq int `json:"seq"`
}

// Approval approves the plan that waits. It holds nothing yet: under a
// payload key file its encrypted payload is what shows that the sender
// holds the key (an approve without one is refused, design/security.md).
type Approval struct{}

// Answer answers a pending ask_user question; an empty QuestionID answers
// the oldest pending one.
type Answer struct {
	QuestionID string `json:"question_id,omitempty"`
	Text       string `json:"text"`
}

// Question is an ask_user question waiting for the analyst.
type Question struct {
	ID       string `json:"id"`
	Step     string `json:"step"`
	Question string `json:"question"`
}

// Phases of an investigation, as Status reports them.
const (
	PhasePlanning         = "planning"
	PhaseAwaitingApproval = "awaiting_approval"
	PhaseExecuting        = "executing"
	PhaseWaitingForAnswer = "waiting_for_answer"
	PhaseConcluding       = "concluding"
	PhaseIdle             = "idle" // concluded; waiting for a follow-up question
	PhaseCancelled        = "cancelled"
)

// Status is a snapshot of a running investigation.
type Status struct {
	Phase     string     `json:"phase"`
	Turn      int        `json:"turn"`
	Request   string     `json:"request"`
	Plan      plan.Plan  `json:"plan"`
	Insights  []Insight  `json:"insights"`
	Verdict   *Verdict   `json:"verdict,omitempty"`
	Hints     []string   `json:"hints"`
	Questions []Question `json:"questions"`
	FollowUps []string   `json:"follow_ups"`
	Spend
	LastSeq    int    `json:"last_seq"`
	StopReason string `json:"stop_reason,omitempty"`
	// VerdictHistory is the verdict of each exchange that set or changed
	// it, oldest first (the latest ones only: State bounds it).
	VerdictHistory []VerdictChange `json:"verdict_history,omitempty"`
	// Intake is set for an investigation the intake started or that alerts arrived for.
	Intake *IntakeStatus `json:"intake,omitempty"`
	// Actions are the calls of acting tools of this investigation and what
	// became of each; the pending ones wait for approve-call or deny-call.
	Actions []Action `json:"actions,omitempty"`
}
