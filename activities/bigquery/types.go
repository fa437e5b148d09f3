package bigquery

// The inputs and outputs of the sub-agent's workflow and activities.

import (
	"time"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/investigation"
)

// Request starts the BigQuery sub-agent for one bigquery_agent call.
type Request struct {
	Request string `json:"request"`
	// ParentSession and ResultKey say where the answer is stored for the
	// parent's next model turn; CallID is the parent's function call ID.
	ParentSession  string `json:"parent_session"`
	ResultKey      string `json:"result_key"`
	CallID         string `json:"call_id"`
	MaxIterations  int    `json:"max_iterations"`
	MaxResultBytes int    `json:"max_result_bytes"`
	// Deadline is when the answer is due: the parent's time budget. The
	// sub-agent then answers from what it has (and so it does when the
	// parent cancels it).
	Deadline time.Time `json:"deadline,omitempty"`
	// MaxToolCalls bounds the sub-agent's tool calls for this request.
	MaxToolCalls int `json:"max_tool_calls,omitempty"`
	// ScanBytesLeft is what the investigation may still scan in BigQuery
	// (0: no limit); the sub-agent's result reports what it scanned.
	ScanBytesLeft int64 `json:"scan_bytes_left,omitempty"`
}

// MemoryNote is a recalled memory as the sub-agent sees it.
type MemoryNote struct {
	ID    string `json:"id"`
	Claim string `json:"claim"`
	// Kind, Table and Columns say what the claim is about (empty for a
	// memory stored before claims were typed).
	Kind       string   `json:"kind,omitempty"`
	Table      string   `json:"table,omitempty"`
	Columns    []string `json:"columns,omitempty"`
	Score      int      `json:"score"`
	Similarity float64  `json:"similarity"`
}

// RecallInput asks for the memories relevant to a request.
type RecallInput struct {
	Request string `json:"request"`
}

// Recall is what memory recall found.
type Recall struct {
	Memories []MemoryNote `json:"memories"`
	// Usage is what embedding the request was billed for.
	Usage investigation.Usage `json:"usage,omitzero"`
}

// SubAgentTurnInput asks for one model turn of the BigQuery sub-agent.
type SubAgentTurnInput struct {
	Session    string           `json:"session"`
	Key        string           `json:"key"`
	Request    string           `json:"request"`
	Memories   []MemoryNote     `json:"memories,omitempty"`
	Transcript []activities.Ref `json:"transcript,omitempty"`
	Final      bool             `json:"final,omitempty"`
}

// IntrospectInput reviews a whole sub-agent session: its tool calls and
// results (Transcript) and the memories it was given. Neither the request
// nor the answer: the first was written from the alert, the second from the
// rows, and introspection learns from neither.
type IntrospectInput struct {
	Session    string           `json:"session"`
	Memories   []MemoryNote     `json:"memories,omitempty"`
	Transcript []activities.Ref `json:"transcript"`
}

// Introspection is what the sub-agent learned from its session: the claims
// memory.CheckClaim accepted, in canonical form.
type Introspection struct {
	Claims  []memory.Claim `json:"claims"`
	Helpful []string       `json:"helpful_memory_ids"`
	Harmful []string       `json:"harmful_memory_ids"`
	// Refused says why each claim the model made was not kept: the first
	// few (maxRefused), then how many more.
	Refused []string            `json:"refused,omitempty"`
	Usage   investigation.Usage `json:"usage"`
}

// MemoryUpdate proposes claims and adjusts scores after introspection.
// Request is kept with each new memory, for the person who reviews it.
type MemoryUpdate struct {
	Session string `json:"session"`
	// ParentSession is the investigation's session: the votes are its, one
	// per memory however many sub-agent runs it starts (empty in inputs
	// recorded before: the run votes as itself).
	ParentSession string         `json:"parent_session,omitempty"`
	Request       string         `json:"request"`
	Claims        []memory.Claim `json:"claims"`
	Helpful       []string       `json:"helpful_memory_ids"`
	Harmful       []string       `json:"harmful_memory_ids"`
}

// MemoryChanges reports what a MemoryUpdate did: the memories it created
// (claims already stored are not counted again), those of them approved at
// once, and those it pruned.
type MemoryChanges struct {
	Saved []string `json:"saved"`
	// Approved are the saved memories approved at once
	// (--auto-approve-memories, memory.ApprovableAtOnce); the rest were
	// proposed for review.
	Approved []string `json:"approved,omitempty"`
	// Status is what results recorded before Approved hold: the status
	// every saved memory got.
	Status  memory.Status `json:"status,omitempty"`
	Deleted []string      `json:"deleted"`
	// Usage is what embedding the claims was billed for.
	Usage investigation.Usage `json:"usage,omitzero"`
}

// ApprovedCount is how many saved memories were approved at once.
func (c MemoryChanges) ApprovedCount() int {
	if c.Status == memory.StatusApproved && c.Approved == nil {
		return len(c.Saved)
	}
	return len(c.Approved)
}

// DeliverInput stores the sub-agent's answer as the parent's tool result.
type DeliverInput struct {
	ParentSession  string               `json:"parent_session"`
	ResultKey      string               `json:"result_key"`
	CallID         string               `json:"call_id"`
	Tool           string               `json:"tool"`
	Answer         string               `json:"answer"`
	Link           activities.ChildLink `json:"link"`
	MaxResultBytes int                  `json:"max_result_bytes"`
	// NoQuery says no query of the session succeeded: the answer is the
	// model's alone, and the result tells the parent's model so.
	NoQuery bool `json:"no_query,omitempty"`
}
