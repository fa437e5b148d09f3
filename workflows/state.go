package workflows

import (
	"slices"
	"time"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/toolcall"
)

// State is everything an investigation knows, in one serializable struct:
// queries read it, update handlers change it, and continue-as-new hands it
// whole to the next run (the way samples-go's safe_message_handler keeps a
// workflow's state). Only the progress events of the current run stay out:
// they are the run's own log, and the next run numbers on from LastSeq.
type State struct {
	Input investigation.Input `json:"input"`
	// Turn numbers the exchanges of the conversation: 1 is the first
	// investigation of the alert, each follow-up question adds one.
	Turn    int    `json:"turn"`
	Request string `json:"request,omitempty"`
	Phase   string `json:"phase"`

	// Tools are the tools the worker offers, as the last plan saw them.
	Tools []toolcall.Tool `json:"tools,omitempty"`
	Plan  plan.Plan       `json:"plan"`
	// ActivePlan is the plan a follow-up continues, once one concluded. Its
	// steps keep their ResultKey but no Result: Plan holds the results
	// (withResultsFrom), so state holds each once.
	ActivePlan *plan.Plan `json:"active_plan,omitempty"`
	// StepCap bounds the plan's steps in this exchange: the limit, plus the
	// steps the active plan held when this exchange continued it.
	StepCap  int                     `json:"step_cap,omitempty"`
	Insights []investigation.Insight `json:"insights,omitempty"`
	// Verdict and Conclusion are the latest exchange's: a follow-up's
	// conclusion or direct answer keeps the standing verdict unless its
	// evidence changes it. VerdictHistory is the verdict of each exchange
	// that set or changed it (the latest maxVerdicts); Ran the steps that
	// ran and the tools they called, which a verdict's evidence may name.
	Verdict        *investigation.Verdict        `json:"verdict,omitempty"`
	VerdictHistory []investigation.VerdictChange `json:"verdict_history,omitempty"`
	Ran            []investigation.StepRun       `json:"ran,omitempty"`
	Conclusion     string                        `json:"conclusion,omitempty"`
	History        []investigation.Message       `json:"history,omitempty"`
	// Spend is what the investigation used: its ScannedBytes count against
	// Limits.MaxScanBytes. (Its JSON fields are State's.)
	investigation.Spend
	Reused int `json:"reused,omitempty"`
	// Finished are the steps this exchange has finished, whose answers
	// later steps see.
	Finished []activities.StepRef `json:"finished,omitempty"`
	// Results serve a call identical to an earlier one from its result.
	Results Reuse `json:"results"`

	Steering Steering `json:"steering"`
	Budget   Budget   `json:"budget"`
	// Intake is what the intake brought and delivered (intake.go).
	Intake IntakeState `json:"intake,omitzero"`
	// Actions are the calls of acting tools and what became of each
	// (mcp.go), at most maxActions.
	Actions []*investigation.Action `json:"actions,omitempty"`

	// IdleUntil is when the idle wait of the run before would have ended:
	// it continued as new for the updates it took (updatesSpent), not for
	// a question, so this run's first idle wait ends there too.
	IdleUntil time.Time `json:"idle_until,omitzero"`

	// LastSeq is the number of the last event of the runs before this one.
	LastSeq int `json:"last_seq"`
	// Unwritten are the events of inputs the run before took while its
	// last progress write was in flight (emit, continueAsNew), numbered
	// from LastSeq+1: this run emits them first.
	Unwritten []investigation.Event `json:"unwritten,omitempty"`
}

// Steering is the analyst's input, written by the update handlers.
type Steering struct {
	// Hints are the latest hints (see bounds.go); HintCount counts them all.
	Hints     []string `json:"hints,omitempty"`
	HintCount int      `json:"hint_count,omitempty"`
	FollowUps []string `json:"follow_ups,omitempty"`
	// FollowUpSeqs are, beside FollowUps, the numbers of the notes that
	// queued them (0: unknown), which their turn events name
	// (Event.Queued). Runs before it kept none: queueFollowUp realigns.
	FollowUpSeqs []int `json:"follow_up_seqs,omitempty"`
	// Generated are the queued follow-ups the workflow asked itself (an
	// alert arrived, intake.go), by text, at most maxFollowUps: no analyst
	// speaks in the exchange that answers one.
	Generated []string `json:"generated,omitempty"`
	// AnalystAsked says the current exchange's request is the analyst's:
	// the question they started with or a follow-up they asked.
	AnalystAsked bool `json:"analyst_asked,omitempty"`
	// Said counts the analyst's statements (hints, revisions, ask_user
	// answers); SaidChecked is Said when the last verdict check was built,
	// so each check counts only what came after the one before.
	Said        int `json:"said,omitempty"`
	SaidChecked int `json:"said_checked,omitempty"`
	// Questions are this run's ask_user questions, answered or not.
	Questions []*Question `json:"questions,omitempty"`
	// NextQID numbers questions across runs, so their IDs stay unique.
	NextQID    int    `json:"next_qid,omitempty"`
	Approval   string `json:"approval,omitempty"` // "", approvalGiven or approvalRevise
	Feedback   string `json:"feedback,omitempty"`
	StopReason string `json:"stop_reason,omitempty"`
	// UpdateIDs are the IDs of the inputs recorded, carried ones first;
	// Carried counts those from earlier runs.
	UpdateIDs []string `json:"update_ids,omitempty"`
	Carried   int      `json:"carried,omitempty"`
	// RunUpdates counts the updates this run accepted, which the server
	// bounds per run (updateBounds); the next run starts from zero.
	RunUpdates int `json:"run_updates,omitempty"`
}

// Question is an ask_user question and, once given, its answer.
type Question struct {
	investigation.Question
	Answered bool   `json:"answered,omitempty"`
	Answer   string `json:"answer,omitempty"`
}

// Approval decisions.
const (
	approvalGiven  = "approved"
	approvalRevise = "revise"
)

// Budget is what the current exchange has spent: its tool calls and its
// time, waits for the analyst excluded.
type Budget struct {
	TurnStart time.Time     `json:"turn_start"`
	Waited    time.Duration `json:"waited"`
	TurnCalls int           `json:"turn_calls"`
	// Waiting counts the ask_user questions waiting now; WaitStart is when
	// the first of them began, so overlapping waits count once.
	Waiting   int       `json:"waiting,omitempty"`
	WaitStart time.Time `json:"wait_start"`
}

// maxCarriedUpdateIDs is how many recent input IDs a run hands to the next
// one: a client retries an input for 30 s at most.
const maxCarriedUpdateIDs = 200

// newState is the state of a fresh investigation.
func newState(in investigation.Input) *State {
	return &State{
		Input:   in,
		Turn:    len(in.History)/2 + 1,
		History: in.History,
	}
}

// carried is the state handed to the next run: the inputs it recorded
// (latest ones only), without this run's answered questions.
func (s State) carried(lastSeq int) *State {
	next := s
	next.LastSeq = lastSeq
	next.Unwritten = slices.Clone(s.Unwritten)
	next.Steering.Questions = nil
	ids := s.Steering.UpdateIDs
	next.Steering.UpdateIDs = ids[max(len(ids)-maxCarriedUpdateIDs, 0):]
	next.Steering.Carried = len(next.Steering.UpdateIDs)
	next.Steering.RunUpdates = 0
	return &next
}

// resultsHeldOnce drops from the active plan the step results Plan holds
// too: a run from before results were held once carried both. A result
// only the active plan holds stays.
func (s *State) resultsHeldOnce() {
	if s.ActivePlan == nil {
		return
	}
	for i, st := range s.ActivePlan.Steps {
		j := s.Plan.Index(st.ID)
		if st.Result != "" && j >= 0 && s.Plan.Steps[j].ResultKey == st.ResultKey && s.Plan.Steps[j].Result == st.Result {
			s.ActivePlan.Steps[i].Result = ""
		}
	}
}

// toolNames are the names of the tools the worker offers.
func (s *State) toolNames() []string {
	names := make([]string, len(s.Tools))
	for i, t := range s.Tools {
		names[i] = t.Name
	}
	return names
}

// tool returns how the named tool runs (an activity when unknown, without
// a declaration: CallTool runs no outside tool the plan did not record).
func (s *State) tool(name string) toolcall.Tool {
	for _, t := range s.Tools {
		if t.Name == name {
			return t
		}
	}
	return toolcall.Tool{Name: name, Kind: toolcall.Activity}
}

// charge adds a model call's usage to its phase and to the total.
func (s *State) charge(phase *investigation.Usage, u investigation.Usage) {
	*phase = phase.Add(u)
	s.Usage = s.Usage.Add(u)
}

func (s *State) result() investigation.Result {
	return investigation.Result{
		AlertID:     s.Input.AlertID,
		Objective:   s.Plan.Objective,
		Conclusion:  s.Conclusion,
		Verdict:     s.Verdict,
		Plan:        s.Plan,
		Insights:    s.Insights,
		History:     s.History,
		Spend:       s.Spend,
		ReusedCalls: s.Reused,
		Actions:     s.actions(),
	}
}
