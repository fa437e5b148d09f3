package activities

// The inputs and outputs of the investigation's activities. The workflow
// builds the inputs from its state; none holds an alert body or a secret.

import (
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// Asker is who asked an exchange's request or question; the prompts that
// show it say so. The workflow sets it from the record its verdict check
// reads, so a question the workflow wrote is never passed off as the
// analyst's, while the evidence list says no analyst spoke.
type Asker string

const (
	// AskerAnalyst is the zero value: inputs scheduled before Asker existed
	// were all shown as the analyst's.
	AskerAnalyst Asker = ""
	// AskerIntake: the intake's default request of an investigation it
	// started, or a follow-up the workflow queued when an alert arrived.
	AskerIntake Asker = "intake"
	// AskerDefault: the default request of an investigation started with
	// none.
	AskerDefault Asker = "default"
)

// PlanInput asks the model for a plan.
type PlanInput struct {
	AlertID string `json:"alert_id"`
	Session string `json:"session,omitempty"`
	// Context names the stored Context (context.go) that holds what this
	// input leaves out: the activity reads it from the store.
	Context  string                  `json:"context,omitempty"`
	Request  string                  `json:"request,omitempty"`
	Asker    Asker                   `json:"asker,omitempty"`
	History  []investigation.Message `json:"history,omitempty"`
	MaxSteps int                     `json:"max_steps"`
	// ActivePlan is the plan in progress from earlier turns, if any: the
	// planner continues it unless the request asks for something new.
	ActivePlan *plan.Plan `json:"active_plan,omitempty"`
	// Feedback is the analyst's revision request for the previous plan.
	Feedback string     `json:"feedback,omitempty"`
	Previous *plan.Plan `json:"previous,omitempty"`
	Hints    []string   `json:"hints,omitempty"`
	// Arrivals are alerts that arrived for the investigation (the intake).
	Arrivals investigation.ArrivalBatch `json:"arrivals,omitzero"`
}

// PlanOutput is a checked, executable plan plus notes on what was repaired.
type PlanOutput struct {
	Plan  plan.Plan `json:"plan"`
	Notes []string  `json:"notes,omitempty"`
	// Tools are the tools the worker offers and how each runs; plan updates are
	// checked against them.
	Tools []toolcall.Tool     `json:"tools"`
	Usage investigation.Usage `json:"usage"`
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
	Direct   bool                    `json:"direct,omitempty"`
	Question string                  `json:"question,omitempty"`
	Asker    Asker                   `json:"asker,omitempty"`
	Language string                  `json:"language,omitempty"`
	History  []investigation.Message `json:"history,omitempty"`
	// Standing is the verdict a direct answer is given (ReviewVerdict then
	// decides whether the answer changed it).
	Standing *investigation.Verdict `json:"standing,omitempty"`
	// Arrivals are alerts that arrived for the investigation (the intake).
	Arrivals investigation.ArrivalBatch `json:"arrivals,omitzero"`
	// Declared are the outside (MCP) tools this turn may call, as the plan
	// recorded them: the turn declares them from these, not from what the
	// servers offer now, so a replay sees what the plan saw.
	Declared []toolcall.Tool `json:"declared,omitempty"`
	// Context names the stored Context (context.go) that holds what this
	// input leaves out: the activity reads it from the store.
	Context string `json:"context,omitempty"`
}

// TurnOutput is the model's answer for one turn: text, calls, or both.
type TurnOutput struct {
	Key   string              `json:"key"`
	Text  string              `json:"text,omitempty"`
	Calls []toolcall.Call     `json:"calls,omitempty"`
	Usage investigation.Usage `json:"usage"`
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
	// InlineRefs maps each ref name whose call's result the workflow
	// produced itself (an ask_user answer, an action that did not run;
	// Ref.Inline) to that result, a JSON object: it has no transcript key.
	// The workflow bounds their sum (maxInlineRefBytes).
	InlineRefs map[string]string `json:"inline_refs,omitempty"`
	// ScanBytesLeft is what the investigation may still scan in BigQuery
	// (0: no limit, negative: none left); a query estimated above it is
	// refused.
	ScanBytesLeft int64 `json:"scan_bytes_left,omitempty"`
	// Toolset selects the registry: "" for the investigation's tools, or
	// another agent's toolset (bigquery.Toolset for the sub-agent's).
	Toolset string `json:"toolset,omitempty"`
	// Recorded says the plan recorded this outside (MCP) tool, so the
	// model was offered it; CallTool refuses an outside tool without it.
	Recorded bool `json:"recorded,omitempty"`
	// Approved is the analyst's approval of an action, bound to the
	// arguments they were shown (Approval): set only once the workflow's
	// gate let the call through, and checked by CallTool for a tool that
	// acts.
	Approved string `json:"approved,omitempty"`
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
	// Unperformed says the call ran no tool though OK: an action denied,
	// expired or of unknown outcome, a question nobody answered (Inline
	// says why), a sub-agent none of whose queries succeeded. No verdict's
	// evidence may cite it as the tool's result.
	Unperformed bool `json:"unperformed,omitempty"`
	// Outcome says, for a call that returned no result (OK false), whether
	// the tool may have acted: CallRefused or CallUnknown. The workflow
	// reads it for an approved action; empty is taken as CallUnknown.
	Outcome string `json:"outcome,omitempty"`
	// ScannedBytes is what the call scanned (billed) in BigQuery.
	ScannedBytes int64 `json:"scanned_bytes,omitempty"`
	// Usage is a child workflow's model usage (the sub-agent's).
	Usage investigation.Usage `json:"usage,omitzero"`
}

// The outcomes of a failed call (ToolOutput.Outcome).
const (
	// CallRefused: the call did nothing: the worker or the server refused
	// it, or the tool reported an error.
	CallRefused = "refused"
	// CallUnknown: the call may have reached the tool and acted, though no
	// answer was read (it came too late or too large).
	CallUnknown = "unknown"
)

// ReflectInput holds only what reflection needs: never the conversation.
// Step results travel by transcript key (plan.Step.ResultKey); the activity
// reads them from the store.
type ReflectInput struct {
	Session   string      `json:"session"`
	Objective string      `json:"objective"`
	Step      plan.Step   `json:"step"`
	Completed []plan.Step `json:"completed"`
	// Running are the steps still running alongside (their results come
	// later): reflection may not change them.
	Running []plan.Step `json:"running,omitempty"`
	Pending []plan.Step `json:"pending"`
	// Insights are those of this exchange, Earlier those carried from
	// earlier exchanges.
	Insights []investigation.Insight `json:"insights,omitempty"`
	Earlier  []investigation.Insight `json:"earlier,omitempty"`
	// Steps is how many steps the plan holds (cancelled ones included) and
	// MaxSteps the cap plan updates must respect.
	Steps    int      `json:"steps"`
	MaxSteps int      `json:"max_steps"`
	Tools    []string `json:"tools"`
	Hints    []string `json:"hints,omitempty"`
	// Context names the stored Context (context.go) that holds what this
	// input leaves out: the activity reads it from the store.
	Context string `json:"context,omitempty"`
}

// Reflection is the model's judgement after a step.
type Reflection struct {
	Insights    []string            `json:"insights"`
	PlanUpdates []plan.Update       `json:"plan_updates"`
	Achieved    bool                `json:"achieved"`
	Usage       investigation.Usage `json:"usage"`
}

// ConcludeInput holds what the conclusion is written from; step results
// travel by transcript key.
type ConcludeInput struct {
	Session   string                  `json:"session"`
	AlertID   string                  `json:"alert_id"`
	Request   string                  `json:"request,omitempty"`
	Asker     Asker                   `json:"asker,omitempty"`
	Objective string                  `json:"objective"`
	Steps     []plan.Step             `json:"steps"`
	Insights  []investigation.Insight `json:"insights"`
	Earlier   []investigation.Insight `json:"earlier,omitempty"`
	Language  string                  `json:"language"`
	// EndedEarly says why the exchange stopped before finishing the plan, if it did.
	EndedEarly string   `json:"ended_early,omitempty"`
	Hints      []string `json:"hints,omitempty"`
	// Verdict is what the verdict is checked against: the standing verdict
	// of earlier exchanges and the steps that ran.
	Verdict VerdictContext `json:"verdict,omitzero"`
	// Actions are the calls of acting tools requested so far and what
	// became of each; the conclusion lists them.
	Actions []investigation.Action `json:"actions,omitempty"`
	// Context names the stored Context (context.go) that holds what this
	// input leaves out: the activity reads it from the store.
	Context string `json:"context,omitempty"`
}

// VerdictContext is what a verdict's evidence is checked against: the steps
// that ran in the investigation (by exchange) with the tools they called,
// this exchange's number (Turn) and the standing verdict, if there is one.
type VerdictContext struct {
	Turn     int                     `json:"turn,omitempty"`
	Ran      []investigation.StepRun `json:"ran,omitempty"`
	Standing *investigation.Verdict  `json:"standing,omitempty"`
	// Compact asks the activity to leave out of its verdict evidence that
	// is the standing verdict's, and to say so (SameEvidence): the workflow
	// holds that evidence already, and each follow-up would repeat it in
	// history. Workflow code from before it reads whole verdicts only.
	Compact bool `json:"compact,omitempty"`
	// Analyst says the analyst said something in this exchange: its
	// request is theirs (not a follow-up the workflow queued itself), or a
	// hint, a revision or an ask_user answer came since the last verdict
	// check. Only then may evidence cite the analyst. A bool: the analyst's
	// words reach the prompt in their own fields.
	Analyst bool `json:"analyst,omitempty"`
	// alertText says a tool's result is alerts' text (tools.AlertText): the
	// activity sets it from its registry (readingAlerts).
	alertText func(tool string) bool
	// thirdParty says a tool's result carries text anyone may publish
	// (tools.ThirdPartyText), set with alertText.
	thirdParty func(tool string) bool
	// analystTool says a tool's result is the analyst's answer
	// (tools.Registry.AnsweredByAnalyst), set with alertText.
	analystTool func(tool string) bool
}

// ReviewInput asks whether a follow-up's direct answer changes the
// standing verdict. The answer travels by transcript key.
type ReviewInput struct {
	Session   string         `json:"session"`
	Question  string         `json:"question,omitempty"`
	Asker     Asker          `json:"asker,omitempty"`
	AnswerKey string         `json:"answer_key"`
	Language  string         `json:"language"`
	Hints     []string       `json:"hints,omitempty"`
	Verdict   VerdictContext `json:"verdict"`
	// Context names the stored Context (context.go) that holds what this
	// input leaves out: the activity reads it from the store.
	Context string `json:"context,omitempty"`
}

// Review is the verdict after a direct answer: the standing one, or the one
// the answer's evidence changed it to.
type Review struct {
	Verdict *investigation.Verdict `json:"verdict,omitempty"`
	// SameEvidence says Verdict's evidence is the standing verdict's,
	// left out (VerdictContext.Compact).
	SameEvidence bool `json:"same_evidence,omitempty"`
	// Notes say what the evidence check dropped or refused.
	Notes []string `json:"notes,omitempty"`
	// Overruled, when the check did not keep the verdict the answer
	// proposed, is the sentence (in the answer's language) the answer ends
	// with: its text may say the verdict changed.
	Overruled string              `json:"overruled,omitempty"`
	Usage     investigation.Usage `json:"usage"`
}

// ModeInput asks whether a follow-up needs Plan & Execute or a direct answer.
type ModeInput struct {
	AlertID string `json:"alert_id"`
	Session string `json:"session,omitempty"`
	// Context names the stored Context (context.go) that holds what this
	// input leaves out: the activity reads it from the store.
	Context    string                  `json:"context,omitempty"`
	Question   string                  `json:"question,omitempty"`
	Asker      Asker                   `json:"asker,omitempty"`
	History    []investigation.Message `json:"history,omitempty"`
	ActivePlan *plan.Plan              `json:"active_plan,omitempty"`
}

// Mode is the model's choice for a follow-up.
type Mode struct {
	Reason string              `json:"reason"`
	Mode   string              `json:"mode"`
	Usage  investigation.Usage `json:"usage"`
}

// Conclusion is the final Markdown report and its verdict, checked against
// the evidence and the standing verdict (ConcludeInput.Verdict).
type Conclusion struct {
	Markdown string                 `json:"markdown"`
	Verdict  *investigation.Verdict `json:"verdict,omitempty"`
	// SameEvidence says Verdict's evidence is the standing verdict's,
	// left out (VerdictContext.Compact).
	SameEvidence bool `json:"same_evidence,omitempty"`
	// Notes say what the evidence check dropped or refused.
	Notes []string            `json:"notes,omitempty"`
	Usage investigation.Usage `json:"usage"`
}
