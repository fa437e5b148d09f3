package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/transcript"
)

// KindContext is the transcript entry kind of a stored Context.
const KindContext = "context"

// Context is what grows with an investigation, or with an exchange's plan,
// and several phases read: the conversation, the analyst's hints, the
// insights of earlier exchanges and of this one, the steps that ran, the
// standing verdict and the exchange's plan (without step results). The workflow stores it once per
// change (StoreContext) and activity inputs name it by key (their Context
// field), so no input repeats it: history grows with the number of
// exchanges, not with its square.
type Context struct {
	History  []investigation.Message `json:"history,omitempty"`
	Hints    []string                `json:"hints,omitempty"`
	Earlier  []investigation.Insight `json:"earlier,omitempty"`
	Ran      []investigation.StepRun `json:"ran,omitempty"`
	Standing *investigation.Verdict  `json:"standing,omitempty"`
	Insights []investigation.Insight `json:"insights,omitempty"`
	Plan     *plan.Plan              `json:"plan,omitempty"`
	// ActivePlan is the plan follow-ups continue (without step results).
	ActivePlan *plan.Plan `json:"active_plan,omitempty"`
	// Request is the exchange's request: the investigation's, or a
	// follow-up's question. Inputs that name a context holding it leave
	// their own copy out; one written before it was stored here is "",
	// and such inputs carry theirs.
	Request string `json:"request,omitempty"`
}

// ContextInput stores a Context under Key in the workflow's session. It runs
// as a local activity: its input never enters history.
type ContextInput struct {
	Session string  `json:"session"`
	Key     string  `json:"key"`
	Context Context `json:"context"`
	// Progress, when it holds events, is written too (one marker less).
	Progress ProgressInput `json:"progress,omitzero"`
}

// StoreContext writes a Context into the transcript store. The key names
// its content (the workflow hashes it), so a second write of one key is
// the same context and the first write wins.
func (a *Activities) StoreContext(ctx context.Context, in ContextInput) error {
	raw, err := json.Marshal(in.Context)
	if err != nil {
		return fmt.Errorf("encode the context: %w", err)
	}
	if _, err = a.Model.Transcript.Put(ctx, in.Session, in.Key, transcript.Entry{Kind: KindContext, Text: string(raw)}); err != nil {
		return err
	}
	if len(in.Progress.Events) > 0 {
		return a.StoreProgress(ctx, in.Progress)
	}
	return nil
}

// lostRequest stands for the request of a context the store lost, in an
// input that left its own copy out: the model is told, not given nothing.
const lostRequest = "(The request was kept with the investigation's stored context, which the store no longer holds: say that it was lost and ask the analyst to repeat it.)"

// readContext reads the Context stored under key ("": none). A context the
// store lost reads as empty, with a warning: the phase goes on without the
// conversation, as it goes on without a lost step answer (lostAnswer), and
// a request the input left out reads as lostRequest.
func (a *Activities) readContext(ctx context.Context, session, key string) (Context, error) {
	var c Context
	if key == "" {
		return c, nil
	}
	entries, err := a.Model.getEach(ctx, session, []string{key})
	if err != nil {
		return c, err
	}
	if entries[0] == nil {
		Logger(ctx).Warn("the investigation's context is no longer stored; going on without it", "key", key)
		c.Request = lostRequest
		return c, nil
	}
	if err := json.Unmarshal([]byte(entries[0].Text), &c); err != nil {
		return c, fmt.Errorf("decode the stored context %s: %w", key, err)
	}
	return c, nil
}

// withContext reads the stored context key names, if any, into in with use.
func (a *Activities) withContext(ctx context.Context, session, key string, use func(Context)) error {
	if key == "" {
		return nil
	}
	c, err := a.readContext(ctx, session, key)
	if err != nil {
		return err
	}
	use(c)
	return nil
}

// UseContext methods put a stored Context's fields where the input would
// carry them inline.

// UseContext fills the conversation, the hints, the active plan and the
// request the input left out.
func (in *PlanInput) UseContext(c Context) {
	in.History, in.Hints, in.ActivePlan = c.History, c.Hints, c.ActivePlan
	in.Request = cmp.Or(in.Request, c.Request)
}

// UseContext fills the conversation, the active plan and the question the
// input left out.
func (in *ModeInput) UseContext(c Context) {
	in.History, in.ActivePlan = c.History, c.ActivePlan
	in.Question = cmp.Or(in.Question, c.Request)
}

// UseContext fills the hints and, for a direct answer, the conversation, the
// standing verdict and the question the input left out.
func (in *TurnInput) UseContext(c Context) {
	in.Hints = c.Hints
	for i, e := range in.Earlier {
		if s := c.step(e.StepID); e.Description == "" && s != nil {
			in.Earlier[i].Description = s.Description
		}
	}
	if in.Direct {
		in.History, in.Standing = c.History, c.Standing
		in.Question = cmp.Or(in.Question, c.Request)
	}
}

// UseContext fills the hints and the earlier insights.
func (in *ReflectInput) UseContext(c Context) {
	in.Hints, in.Earlier, in.Insights = c.Hints, c.Earlier, c.Insights
	if c.Plan == nil {
		return
	}
	in.Completed, in.Running, in.Pending = nil, nil, nil
	for _, s := range c.Plan.Steps {
		switch {
		case s.ID == in.Step.ID:
		case s.Status == plan.Done:
			in.Completed = append(in.Completed, s)
		case s.Status == plan.Running:
			in.Running = append(in.Running, s)
		case s.Status == plan.Pending:
			in.Pending = append(in.Pending, s)
		}
	}
}

// step is the plan's step id, or nil.
func (c Context) step(id string) *plan.Step {
	if c.Plan == nil {
		return nil
	}
	for i := range c.Plan.Steps {
		if c.Plan.Steps[i].ID == id {
			return &c.Plan.Steps[i]
		}
	}
	return nil
}

// UseContext fills the hints, the earlier insights, the steps that ran, the
// standing verdict and the request the input left out.
func (in *ConcludeInput) UseContext(c Context) {
	in.Hints, in.Earlier, in.Verdict.Ran, in.Verdict.Standing, in.Insights = c.Hints, c.Earlier, c.Ran, c.Standing, c.Insights
	in.Request = cmp.Or(in.Request, c.Request)
	if c.Plan != nil {
		in.Steps = c.Plan.Steps
	}
}

// UseContext fills the hints, the steps that ran, the standing verdict and
// the question the input left out. Steps the input names follow the
// context's: the answer's own, which the context it read predates.
func (in *ReviewInput) UseContext(c Context) {
	in.Hints, in.Verdict.Ran, in.Verdict.Standing = c.Hints, append(slices.Clip(c.Ran), in.Verdict.Ran...), c.Standing
	in.Question = cmp.Or(in.Question, c.Request)
}

// ProgressStore keeps an investigation's progress events and latest status
// beside its transcript (progress.Store).
type ProgressStore interface {
	Put(ctx context.Context, session string, events []investigation.Event, st *investigation.Status) error
}

// ProgressQueue is a ProgressStore that can also write behind its caller
// (progress.Behind).
type ProgressQueue interface {
	ProgressStore
	Enqueue(session string, events []investigation.Event, st *investigation.Status)
}

// ProgressInput stores a run's new progress events and its status. It runs
// as a local activity: its input (event texts, the conclusion) never enters
// history.
type ProgressInput struct {
	Session string                `json:"session"`
	Events  []investigation.Event `json:"events,omitempty"`
	Status  *investigation.Status `json:"status,omitempty"`
	// Wait says the write is committed before the activity returns: the
	// run is about to wait for a person or to close. Otherwise a worker
	// whose store is a ProgressQueue writes it behind the workflow.
	Wait bool `json:"wait,omitempty"`
}

// StoreProgress writes progress events and the status into the store; a
// worker without a progress store writes nothing (followers then read the
// events with the progress query).
func (a *Activities) StoreProgress(ctx context.Context, in ProgressInput) error {
	if a.Progress == nil {
		return nil
	}
	if q, ok := a.Progress.(ProgressQueue); ok && !in.Wait {
		q.Enqueue(in.Session, in.Events, in.Status)
		return nil
	}
	return a.Progress.Put(ctx, in.Session, in.Events, in.Status)
}
