// Package investigation holds the plain types that flow between the
// Investigation workflow, its activities and the starter: inputs, results,
// progress events and limits. Nothing here does I/O.
package investigation

import (
	"time"

	"github.com/secops-agent/investigator/plan"
)

// Names shared by the worker, the workflow and the starter.
const (
	WorkflowName = "Investigation"
	// CatalogWorkflowName lists the worker's tools (starter tools).
	CatalogWorkflowName = "ToolCatalog"
	// BigQueryWorkflowName is the BigQuery sub-agent, a child workflow.
	BigQueryWorkflowName = "BigQueryAgent"
	DefaultQueue         = "investigations"
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
	// MaxToolCalls and TimeBudget bound one exchange (the investigation,
	// then each follow-up); time spent waiting for the analyst does not count.
	MaxToolCalls int      `json:"max_tool_calls,omitempty"`
	TimeBudget   Duration `json:"time_budget,omitempty"`
	// MaxHistoryEvents is the history length after which an idle
	// investigation continues as new when a follow-up arrives. The
	// server's limit of 2,000 updates per run is kept by a count of its own
	// (workflows.updateBounds: continue as new once idle at 500, or half
	// this value if lower), since inputs without a follow-up grow history too.
	MaxHistoryEvents int `json:"max_history_events,omitempty"`
	// AnswerTimeout is how long an ask_user question waits for the analyst.
	AnswerTimeout Duration `json:"answer_timeout,omitempty"`
	// ApprovalTimeout is how long a call of an acting tool waits for the
	// analyst's approval; then it expires, which the model reads as its
	// result. The wait does not count against the time budget.
	ApprovalTimeout Duration `json:"approval_timeout,omitempty"`
	// MaxScanBytes bounds what the whole investigation (every exchange,
	// every sub-agent run) may scan in BigQuery; a query whose estimate is
	// over what is left is refused. Each query is also bounded by the
	// per-query max_scan_bytes of examples/bigquery/tables.yaml.
	MaxScanBytes int64 `json:"max_scan_bytes,omitempty"`
	// MaxParallelSteps bounds the steps that run at once: a step whose
	// depends_on is finished starts alongside the others (1: in order).
	MaxParallelSteps int `json:"max_parallel_steps,omitempty"`
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
	MinMaxHistoryEvents     = 50
	DefaultAnswerTimeout    = 15 * time.Minute
	DefaultApprovalTimeout  = 24 * time.Hour
	DefaultMaxScanBytes     = 10 << 30 // 10 GiB
	DefaultMaxParallelSteps = 3
	DefaultIdleTimeout      = 30 * time.Minute
)

// Upper limits of the budgets the starter accepts: past them one exchange
// could hold more than its history and payload bounds were measured for
// (design/durability.md, "Budgets").
const (
	MaxMaxSteps         = 64
	MaxMaxParallelSteps = 16
	MaxMaxIterations    = 50
	MaxMaxToolCalls     = 1000
	MaxTimeBudget       = 24 * time.Hour
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
		l.TimeBudget = Duration(DefaultTimeBudget)
	}
	if l.MaxHistoryEvents <= 0 {
		l.MaxHistoryEvents = DefaultMaxHistoryEvents
	}
	if l.AnswerTimeout <= 0 {
		l.AnswerTimeout = Duration(DefaultAnswerTimeout)
	}
	if l.ApprovalTimeout <= 0 {
		l.ApprovalTimeout = Duration(DefaultApprovalTimeout)
	}
	if l.MaxScanBytes <= 0 {
		l.MaxScanBytes = DefaultMaxScanBytes
	}
	if l.MaxParallelSteps <= 0 {
		l.MaxParallelSteps = DefaultMaxParallelSteps
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
	// ConcludeFromAlert makes the first exchange conclude from the alert
	// alone: no plan, no step, no tool call, only the conclusion phase with
	// its usual prompt and model (starter eval's baseline). Follow-ups plan
	// as usual.
	ConcludeFromAlert bool `json:"conclude_from_alert,omitempty"`
	// IdleTimeout is how long a concluded investigation stays open for
	// follow-up questions.
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// Summary is the one line the Web UI shows for the investigation. The
	// starter sets it as the workflow's static summary too, which the SDK
	// does not carry over a continue-as-new: every run repeats it at the
	// top of its current details.
	Summary string `json:"summary,omitempty"`
	// SearchAttributes are the custom search attributes the server had
	// registered when the investigation started; the workflow sets only
	// those (setting an unregistered one would fail its workflow task).
	SearchAttributes []string `json:"search_attributes,omitempty"`
	// Intake is set when the intake started the investigation (intake.go).
	Intake *IntakeInput `json:"intake,omitempty"`
	// Session names the transcript and progress when it is not the
	// workflow ID: a new run of a closed run's ID sets one of its own
	// (CheckSession says which are allowed).
	Session string `json:"session,omitempty"`
}

// Message is one entry of the conversation history kept across turns.
type Message struct {
	Role string `json:"role"` // "user" or "assistant"
	Text string `json:"text"`
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

// Metrics the workflow counts through Temporal's metrics handler (exported
// as OpenTelemetry metrics with OTEL_EXPORTER_OTLP_ENDPOINT): each
// investigation once, at its first verdict, by verdict and confidence; and
// each later change of the verdict, by the verdicts it went from and to.
const (
	MetricInvestigations = "investigator.investigations"
	MetricVerdictChanges = "investigator.verdict.changes"
)

// Evidence is one fact a verdict rests on, with the step and tool that
// established it: a step that ran in this investigation and a tool it
// called, or EvidenceAlert or EvidenceAnalyst with no tool.
type Evidence struct {
	StepID string `json:"step_id"`
	Tool   string `json:"tool,omitempty"`
	Fact   string `json:"fact"`
}

// Evidence sources that are not steps (Evidence.StepID, with no tool).
const (
	// EvidenceAlert is a fact the alert itself shows.
	EvidenceAlert = "alert"
	// EvidenceAnalyst is a fact the analyst stated in this exchange (a
	// request, a follow-up question, a hint, an answer): valid only in an
	// exchange where the analyst spoke, never in a follow-up the workflow
	// queued itself.
	EvidenceAnalyst = "analyst"
)

// Verdict is the machine-readable outcome of a conclusion.
type Verdict struct {
	Verdict    string `json:"verdict"`
	Confidence string `json:"confidence"`
	// Reason says in a sentence or two why; for a verdict that changed,
	// what changed it.
	Reason   string     `json:"reason,omitempty"`
	Evidence []Evidence `json:"evidence,omitempty"`
}

// Same says whether two verdicts say the same thing (verdict and
// confidence); a nil verdict is the same only as another nil.
func (v *Verdict) Same(o *Verdict) bool {
	if v == nil || o == nil {
		return v == o
	}
	return v.Verdict == o.Verdict && v.Confidence == o.Confidence
}

// String is "true_positive (high)".
func (v Verdict) String() string { return v.Verdict + " (" + v.Confidence + ")" }

// VerdictChange is one entry of the verdict's history: the verdict an
// exchange (Turn) reached, the first one or a change of the standing one.
type VerdictChange struct {
	Turn       int    `json:"turn"`
	Verdict    string `json:"verdict"`
	Confidence string `json:"confidence"`
	Reason     string `json:"reason,omitempty"`
}

// StepRun is a step that ran in an exchange (Turn) and the tools whose
// calls returned a result in it: what a verdict's evidence may name. A call
// that failed, was refused or cut short, or an action that was not
// performed, returned none. Earlier are the tools whose results the step
// was served from an earlier exchange's identical call: citable, but as
// earlier evidence. A follow-up's direct answer runs as the step "answer".
type StepRun struct {
	Turn    int      `json:"turn"`
	Step    string   `json:"step"`
	Tools   []string `json:"tools,omitempty"`
	Earlier []string `json:"earlier,omitempty"`
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
	Spend
	// ReusedCalls counts calls served from an identical earlier call.
	ReusedCalls int `json:"reused_calls,omitempty"`
	// Actions are the calls of acting tools requested, and what became of each.
	Actions []Action `json:"actions,omitempty"`
}

// Modes of a follow-up turn.
const (
	ModePlan   = "plan"
	ModeDirect = "direct"
)
