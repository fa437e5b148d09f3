// Package investigation holds the plain types that flow between the
// Investigation workflow, its activities and the starter: inputs, results,
// progress events and limits. Nothing here does I/O.
package investigation

import (
	"time"

	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// Names shared by the worker, the workflow and the starter.
const (
	WorkflowName = "Investigation"
	// CatalogWorkflowName lists the worker's tools (starter tools).
	CatalogWorkflowName = "ToolCatalog"
	// BigQueryWorkflowName is the BigQuery sub-agent, a child workflow.
	BigQueryWorkflowName = "BigQueryAgent"
	// ToolsetBigQuery selects the sub-agent's tools in CallTool.
	ToolsetBigQuery = "bigquery"
	DefaultQueue    = "investigations"
	// ProgressQuery returns a run's progress events after a sequence
	// number, at most MaxProgressEvents of them per answer: a follower that
	// gets a full page asks again at once.
	ProgressQuery = "progress"
	// SearchAttribute is the Keyword search attribute that holds the alert ID.
	SearchAttribute = "AlertId"
	// VerdictAttribute is the Keyword search attribute that holds the latest
	// conclusion's verdict (Verdict = "true_positive" in the Web UI).
	VerdictAttribute = "Verdict"
)

// MaxProgressEvents is the most events one progress query returns, so that
// an answer stays far below gRPC's message limit however long the run.
const MaxProgressEvents = 200

// Languages the conclusion can be written in.
var Languages = map[string]string{"en": "English", "ja": "Japanese"}

// Limits bound one investigation. Zero fields take the defaults.
type Limits struct {
	MaxSteps           int `json:"max_steps,omitempty"`
	MaxIterations      int `json:"max_iterations,omitempty"`
	MaxToolResultBytes int `json:"max_tool_result_bytes,omitempty"`
	MaxStepResultBytes int `json:"max_step_result_bytes,omitempty"`
	// MaxToolCalls and TimeBudget bound one run (one turn of the
	// conversation); time spent waiting for the analyst does not count.
	MaxToolCalls int           `json:"max_tool_calls,omitempty"`
	TimeBudget   time.Duration `json:"time_budget,omitempty"`
	// MaxHistoryEvents is the history length after which an idle
	// investigation continues as new. The default stays well below the
	// server's limit of 2,000 updates per run (each takes two events).
	MaxHistoryEvents int `json:"max_history_events,omitempty"`
	// AnswerTimeout is how long an ask_user question waits for the analyst.
	AnswerTimeout time.Duration `json:"answer_timeout,omitempty"`
}

// Default limits.
const (
	DefaultMaxSteps           = 8
	DefaultMaxIterations      = 6
	DefaultMaxToolResultBytes = 16 << 10
	DefaultMaxStepResultBytes = 4 << 10
	DefaultMaxToolCalls       = 60
	DefaultTimeBudget         = 30 * time.Minute
	DefaultMaxHistoryEvents   = 2000
	// MinMaxHistoryEvents is the lowest continue-as-new threshold the
	// starter accepts: a run needs room for at least one turn.
	MinMaxHistoryEvents  = 50
	DefaultAnswerTimeout = 15 * time.Minute
	DefaultIdleTimeout   = 30 * time.Minute
)

// WithDefaults fills zero fields.
func (l Limits) WithDefaults() Limits {
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxIterations <= 0 {
		l.MaxIterations = DefaultMaxIterations
	}
	if l.MaxToolResultBytes <= 0 {
		l.MaxToolResultBytes = DefaultMaxToolResultBytes
	}
	if l.MaxStepResultBytes <= 0 {
		l.MaxStepResultBytes = DefaultMaxStepResultBytes
	}
	if l.MaxToolCalls <= 0 {
		l.MaxToolCalls = DefaultMaxToolCalls
	}
	if l.TimeBudget <= 0 {
		l.TimeBudget = DefaultTimeBudget
	}
	if l.MaxHistoryEvents <= 0 {
		l.MaxHistoryEvents = DefaultMaxHistoryEvents
	}
	if l.AnswerTimeout <= 0 {
		l.AnswerTimeout = DefaultAnswerTimeout
	}
	return l
}

// Input starts an investigation. It never holds secrets or the alert body:
// activities load the alert by ID.
type Input struct {
	AlertID  string    `json:"alert_id"`
	Question string    `json:"question"`
	Language string    `json:"language"`
	Limits   Limits    `json:"limits,omitempty"`
	History  []Message `json:"history,omitempty"`
	// ApprovePlan makes the first plan wait for `starter approve` or
	// `starter revise` before it runs.
	ApprovePlan bool `json:"approve_plan,omitempty"`
	// IdleTimeout is how long a concluded investigation stays open for
	// follow-up questions.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	// SearchAttributes are the custom search attributes the server had
	// registered when the investigation started; the workflow sets only
	// those (setting an unregistered one would fail its workflow task).
	SearchAttributes []string `json:"search_attributes,omitempty"`
	// Carry is the state a continued-as-new investigation resumes from.
	Carry *Carry `json:"carry,omitempty"`
}

// Carry is what an investigation hands to its next run when it continues as
// new: the conversation (in Input.History), the active plan, and every input
// not handled yet.
type Carry struct {
	Turn       int        `json:"turn"`
	ActivePlan *plan.Plan `json:"active_plan,omitempty"`
	FollowUps  []string   `json:"follow_ups,omitempty"`
	Hints      []string   `json:"hints,omitempty"`
	Insights   []Insight  `json:"insights,omitempty"`
	Tools      []string   `json:"tools,omitempty"`
	LastSeq    int        `json:"last_seq"`
	Usage      Usage      `json:"usage"`
	ToolCalls  int        `json:"tool_calls"`
	Stop       string     `json:"stop,omitempty"`
	// Results maps a call (tool and arguments) to its stored result, so a
	// repeated call is served from it in the next run too; Reused counts
	// the calls served so.
	Results map[string]string `json:"results,omitempty"`
	Reused  int               `json:"reused,omitempty"`
	// Questions is the number of ask_user questions asked so far, so that
	// question IDs stay unique across runs.
	Questions int `json:"questions,omitempty"`
	// UpdateIDs are the IDs of the latest steering inputs recorded, so that
	// a client retrying an input that the previous run recorded is told so
	// instead of recording it twice.
	UpdateIDs []string `json:"update_ids,omitempty"`
}

// Message is one entry of the conversation history kept across turns.
type Message struct {
	Role string `json:"role"` // "user" or "assistant"
	Text string `json:"text"`
}

// Usage counts model tokens.
type Usage struct {
	Calls        int `json:"calls"`
	PromptTokens int `json:"prompt_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{Calls: u.Calls + o.Calls, PromptTokens: u.PromptTokens + o.PromptTokens, OutputTokens: u.OutputTokens + o.OutputTokens}
}

// Insight is a fact or inference reflection drew from a step, with the
// exchange (Turn) and step it came from: prompts tell the current exchange's
// insights from carried ones.
type Insight struct {
	Turn int    `json:"turn"`
	Step string `json:"step"`
	Text string `json:"text"`
}

// Verdicts a conclusion can reach.
const (
	VerdictTruePositive  = "true_positive"
	VerdictBenign        = "benign" // real but expected or authorised
	VerdictFalsePositive = "false_positive"
	VerdictUndetermined  = "undetermined"
)

// Verdicts lists the verdicts in the order the prompt and schema give them.
var Verdicts = []string{VerdictTruePositive, VerdictBenign, VerdictFalsePositive, VerdictUndetermined}

// Confidences a verdict can carry.
var Confidences = []string{"low", "medium", "high"}

// Evidence is one fact a verdict rests on, with the step and tool that
// established it.
type Evidence struct {
	StepID string `json:"step_id"`
	Tool   string `json:"tool,omitempty"`
	Fact   string `json:"fact"`
}

// Verdict is the machine-readable outcome of a conclusion.
type Verdict struct {
	Verdict    string     `json:"verdict"`
	Confidence string     `json:"confidence"`
	Evidence   []Evidence `json:"evidence,omitempty"`
}

// Result is what a finished investigation returns.
type Result struct {
	AlertID    string    `json:"alert_id"`
	Objective  string    `json:"objective"`
	Conclusion string    `json:"conclusion"`
	Verdict    *Verdict  `json:"verdict,omitempty"`
	Plan       plan.Plan `json:"plan"`
	Insights   []Insight `json:"insights"`
	History    []Message `json:"history"`
	Usage      Usage     `json:"usage"`
	ToolCalls  int       `json:"tool_calls"`
	// ReusedCalls counts calls served from an identical earlier call.
	ReusedCalls int `json:"reused_calls,omitempty"`
}

// EventKind classifies a progress event.
type EventKind string

// Progress event kinds, in the order an investigation usually emits them.
const (
	EventPlan       EventKind = "plan"
	EventStep       EventKind = "step"
	EventToolCall   EventKind = "tool_call"
	EventToolResult EventKind = "tool_result"
	EventStepDone   EventKind = "step_done"
	EventInsight    EventKind = "insight"
	EventPlanUpdate EventKind = "plan_update"
	EventNote       EventKind = "note"
	EventConclusion EventKind = "conclusion"
	// Steering and conversation events.
	EventHint     EventKind = "hint"     // Text: the hint
	EventApproval EventKind = "approval" // Text: "awaiting", "approved" or "revise: <feedback>"
	EventQuestion EventKind = "question" // Text: the question; Items: [question ID]
	EventAnswer   EventKind = "answer"   // Text: the answer (or that none came); Items: [question ID]
	EventTurn     EventKind = "turn"     // a follow-up turn starts; Text: the question, Items: [mode]
	EventStop     EventKind = "stop"     // Text: why the run stops early
	EventIdle     EventKind = "idle"     // the turn concluded; the investigation waits for follow-ups
)

// Event is one line of live progress. Seq numbers start at 1 and have no
// gaps, so a watcher asks for the events after the last one it saw.
type Event struct {
	Seq       int        `json:"seq"`
	Kind      EventKind  `json:"kind"`
	Step      string     `json:"step,omitempty"`
	Text      string     `json:"text,omitempty"`
	Items     []string   `json:"items,omitempty"`
	Plan      *plan.Plan `json:"plan,omitempty"`
	Completed []string   `json:"completed,omitempty"`
	Pending   []string   `json:"pending,omitempty"`
	// Child is the workflow ID of a child run this event started (a
	// bigquery_agent call), so watchers can follow it too.
	Child string `json:"child,omitempty"`
	// Turn is the conversation turn the event belongs to.
	Turn int `json:"turn,omitempty"`
	// Verdict comes with a conclusion event.
	Verdict *Verdict `json:"verdict,omitempty"`
}

// PlanInput asks the model for a plan.
type PlanInput struct {
	AlertID  string    `json:"alert_id"`
	Request  string    `json:"request"`
	History  []Message `json:"history,omitempty"`
	MaxSteps int       `json:"max_steps"`
	// ActivePlan is the plan in progress from earlier turns, if any: the
	// planner continues it unless the request asks for something new.
	ActivePlan *plan.Plan `json:"active_plan,omitempty"`
	// Feedback is the analyst's revision request for the previous plan.
	Feedback string     `json:"feedback,omitempty"`
	Previous *plan.Plan `json:"previous,omitempty"`
	Hints    []string   `json:"hints,omitempty"`
}

// PlanOutput is a checked, executable plan plus notes on what was repaired.
type PlanOutput struct {
	Plan  plan.Plan `json:"plan"`
	Notes []string  `json:"notes,omitempty"`
	// Tools are the names of the tools the worker offers; plan updates are
	// checked against them.
	Tools []string `json:"tools"`
	Usage Usage    `json:"usage"`
	// Continues says the plan's steps extend the active plan.
	Continues bool `json:"continues,omitempty"`
}

// Ref points at one transcript entry that a model turn must see. Entries are
// stored by the activities that produce them (claim check), so turn inputs
// stay small; a tool call that failed for good is carried inline instead.
// A repeated identical call points at the earlier call's entry, with its own
// CallID and Tool.
type Ref struct {
	Key    string `json:"key,omitempty"`
	CallID string `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Error  string `json:"error,omitempty"`
	// Inline is a small result the workflow itself produced (the analyst's
	// answer to ask_user), as a JSON object.
	Inline string `json:"inline,omitempty"`
}

// StepRef points at the final answer of an earlier step of this investigation.
type StepRef struct {
	StepID      string `json:"step_id"`
	Description string `json:"description"`
	Key         string `json:"key"`
}

// TurnInput asks for one model turn of a step's tool loop.
type TurnInput struct {
	Session   string    `json:"session"`
	Key       string    `json:"key"` // where to store this turn's output
	AlertID   string    `json:"alert_id"`
	Objective string    `json:"objective"`
	Step      plan.Step `json:"step"`
	Earlier   []StepRef `json:"earlier,omitempty"`
	// Transcript lists this step's earlier model turns and tool results.
	Transcript []Ref `json:"transcript,omitempty"`
	// Final asks for the step's answer without further tool calls.
	Final bool `json:"final,omitempty"`
	// Hints are the analyst's guidance so far.
	Hints []string `json:"hints,omitempty"`
	// Direct marks the tool loop that answers a follow-up question directly;
	// it gets the conversation (History) and answers in Language.
	Direct   bool      `json:"direct,omitempty"`
	Question string    `json:"question,omitempty"`
	Language string    `json:"language,omitempty"`
	History  []Message `json:"history,omitempty"`
}

// TurnOutput is the model's answer for one turn: text, calls, or both.
type TurnOutput struct {
	Key   string          `json:"key"`
	Text  string          `json:"text,omitempty"`
	Calls []toolcall.Call `json:"calls,omitempty"`
	Usage Usage           `json:"usage"`
}

// ToolInput runs one tool call and stores its result under Key.
type ToolInput struct {
	Session        string        `json:"session"`
	Key            string        `json:"key"`
	Call           toolcall.Call `json:"call"`
	MaxResultBytes int           `json:"max_result_bytes"`
	// Refs maps each ref name the call's arguments use (ref:<name>) to the
	// transcript key of that call's stored result.
	Refs map[string]string `json:"refs,omitempty"`
	// Toolset selects the registry: "" for the investigation's tools,
	// ToolsetBigQuery for the BigQuery sub-agent's.
	Toolset string `json:"toolset,omitempty"`
}

// ChildLink names a child workflow run.
type ChildLink struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}

// ToolOutput describes a stored tool result; the result itself stays out of
// workflow history.
type ToolOutput struct {
	Key       string `json:"key"`
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated,omitempty"`
	Preview   string `json:"preview,omitempty"`
	// Link names the child workflow that produced the result, if one did.
	Link *ChildLink `json:"link,omitempty"`
	// Inline holds a result the workflow produced itself (see Ref.Inline).
	Inline string `json:"inline,omitempty"`
}

// ReflectInput holds only what reflection needs: never the conversation.
// Step results travel by transcript key (plan.Step.ResultKey); the activity
// reads them from the store.
type ReflectInput struct {
	Session   string      `json:"session"`
	Objective string      `json:"objective"`
	Step      plan.Step   `json:"step"`
	Completed []plan.Step `json:"completed"`
	Pending   []plan.Step `json:"pending"`
	// Insights are those of this exchange, Earlier those carried from
	// earlier exchanges.
	Insights []Insight `json:"insights,omitempty"`
	Earlier  []Insight `json:"earlier,omitempty"`
	// Steps is how many steps the plan holds (cancelled ones included) and
	// MaxSteps the cap plan updates must respect.
	Steps    int      `json:"steps"`
	MaxSteps int      `json:"max_steps"`
	Tools    []string `json:"tools"`
	Hints    []string `json:"hints,omitempty"`
}

// Reflection is the model's judgement after a step.
type Reflection struct {
	Insights    []string      `json:"insights"`
	PlanUpdates []plan.Update `json:"plan_updates"`
	Achieved    bool          `json:"achieved"`
	Usage       Usage         `json:"usage"`
}

// ConcludeInput holds what the conclusion is written from; step results
// travel by transcript key.
type ConcludeInput struct {
	Session   string      `json:"session"`
	AlertID   string      `json:"alert_id"`
	Request   string      `json:"request"`
	Objective string      `json:"objective"`
	Steps     []plan.Step `json:"steps"`
	Insights  []Insight   `json:"insights"`
	Earlier   []Insight   `json:"earlier,omitempty"`
	Language  string      `json:"language"`
	// EndedEarly says why the run stopped before finishing the plan, if it did.
	EndedEarly string   `json:"ended_early,omitempty"`
	Hints      []string `json:"hints,omitempty"`
}

// Modes of a follow-up turn.
const (
	ModePlan   = "plan"
	ModeDirect = "direct"
)

// ModeInput asks whether a follow-up needs Plan & Execute or a direct answer.
type ModeInput struct {
	AlertID    string     `json:"alert_id"`
	Question   string     `json:"question"`
	History    []Message  `json:"history,omitempty"`
	ActivePlan *plan.Plan `json:"active_plan,omitempty"`
}

// Mode is the model's choice for a follow-up.
type Mode struct {
	Reason string `json:"reason"`
	Mode   string `json:"mode"`
	Usage  Usage  `json:"usage"`
}

// Conclusion is the final Markdown report and its verdict (nil for a
// direct answer to a follow-up, which keeps the earlier verdict).
type Conclusion struct {
	Markdown string   `json:"markdown"`
	Verdict  *Verdict `json:"verdict,omitempty"`
	Usage    Usage    `json:"usage"`
}

// BigQueryRequest starts the BigQuery sub-agent for one bigquery_agent call.
type BigQueryRequest struct {
	Request string `json:"request"`
	// ParentSession and ResultKey say where the answer is stored for the
	// parent's next model turn; CallID is the parent's function call ID.
	ParentSession  string `json:"parent_session"`
	ResultKey      string `json:"result_key"`
	CallID         string `json:"call_id"`
	MaxIterations  int    `json:"max_iterations"`
	MaxResultBytes int    `json:"max_result_bytes"`
}

// MemoryNote is a recalled memory as the sub-agent sees it.
type MemoryNote struct {
	ID         string  `json:"id"`
	Claim      string  `json:"claim"`
	Score      int     `json:"score"`
	Similarity float64 `json:"similarity"`
}

// RecallInput asks for the memories relevant to a request.
type RecallInput struct {
	Request string `json:"request"`
}

// Recall is what memory recall found.
type Recall struct {
	Memories []MemoryNote `json:"memories"`
}

// SubAgentTurnInput asks for one model turn of the BigQuery sub-agent.
type SubAgentTurnInput struct {
	Session    string       `json:"session"`
	Key        string       `json:"key"`
	Request    string       `json:"request"`
	Memories   []MemoryNote `json:"memories,omitempty"`
	Transcript []Ref        `json:"transcript,omitempty"`
	Final      bool         `json:"final,omitempty"`
}

// IntrospectInput reviews a whole sub-agent session.
type IntrospectInput struct {
	Session    string       `json:"session"`
	Request    string       `json:"request"`
	Memories   []MemoryNote `json:"memories,omitempty"`
	Transcript []Ref        `json:"transcript"`
	Answer     string       `json:"answer"`
}

// Introspection is what the sub-agent learned from its session.
type Introspection struct {
	Claims  []string `json:"claims"`
	Helpful []string `json:"helpful_memory_ids"`
	Harmful []string `json:"harmful_memory_ids"`
	// Refused says why each claim the model made was not kept.
	Refused []string `json:"refused,omitempty"`
	Usage   Usage    `json:"usage"`
}

// MemoryUpdate saves claims and adjusts scores after introspection.
type MemoryUpdate struct {
	Session string   `json:"session"`
	Request string   `json:"request"`
	Claims  []string `json:"claims"`
	Helpful []string `json:"helpful_memory_ids"`
	Harmful []string `json:"harmful_memory_ids"`
}

// MemoryChanges reports what a MemoryUpdate did.
type MemoryChanges struct {
	Saved   []string `json:"saved"`
	Deleted []string `json:"deleted"`
}

// DeliverInput stores the sub-agent's answer as the parent's tool result.
type DeliverInput struct {
	ParentSession  string    `json:"parent_session"`
	ResultKey      string    `json:"result_key"`
	CallID         string    `json:"call_id"`
	Tool           string    `json:"tool"`
	Answer         string    `json:"answer"`
	Link           ChildLink `json:"link"`
	MaxResultBytes int       `json:"max_result_bytes"`
}
