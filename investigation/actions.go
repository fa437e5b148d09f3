package investigation

// Actions: calls of tools that act outside the investigation (an MCP tool
// not marked read-only, or configured approval: required). Each waits for
// the analyst's decision; the conclusion lists every one.
const (
	// UpdateApproveCall approves a waiting action. arg: CallDecision (Reason
	// unused); result: Ack.
	UpdateApproveCall = "approve_call"
	// UpdateDenyCall denies a waiting action. arg: CallDecision; result: Ack.
	UpdateDenyCall = "deny_call"

	// EventApprovalRequested: an action waits. Step; Tool; CallID; Text:
	// the call's arguments; Reason: the step it serves.
	EventApprovalRequested EventKind = "approval_requested"
	// EventApprovalDecided: an action was approved, denied or expired, or
	// an approved one did not run (ActionNotRun). Step; Tool; CallID; Text:
	// the outcome (and the reason given).
	EventApprovalDecided EventKind = "approval_decided"

	// PhaseAwaitingCallApproval: an action waits for the analyst.
	PhaseAwaitingCallApproval = "awaiting_call_approval"

	// The states of an action.
	ActionPending  = "pending"
	ActionApproved = "approved"
	ActionDenied   = "denied"
	ActionExpired  = "expired"
	// ActionUnknown: approved, and its one attempt failed after it may
	// have reached the tool (a lost connection, a lost worker, a cut): it
	// may or may not have run, and is never tried again under the approval.
	ActionUnknown = "unknown"
	// ActionNotRun: approved, and it was not performed: stopped before it
	// reached the tool (its server not connected, its tool or toolset not
	// on the worker, the investigation stopped first), or refused by the
	// worker or the server, or the tool reported an error. Status values are state and payload only, never a
	// command, so a new one needs no version gate.
	ActionNotRun = "not_run"
)

// CallDecision approves or denies one waiting action by its call ID; one
// without a call ID is refused.
type CallDecision struct {
	CallID string `json:"call_id"`
	Reason string `json:"reason,omitempty"`
}

// Action is one call of an acting tool and what became of it.
type Action struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Args are the call's arguments as JSON (capped).
	Args string `json:"args"`
	Step string `json:"step"`
	// Reason is the step's description: why the plan wanted it.
	Reason string `json:"reason"`
	Status string `json:"status"`
	// Note is the analyst's reason for a denial, or why it ended otherwise.
	Note string `json:"note,omitempty"`
	// Turn is the exchange that asked for it.
	Turn int `json:"turn,omitempty"`
}
