package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// Bounds of the state an investigation carries from turn to turn and run to
// run: whatever an analyst or a model sends, every activity input, query
// page and continue-as-new input stays far below Temporal's 2 MB payload
// limit (the tests hold them under 256 KiB). The oldest entries go first,
// and a progress note says so.
const (
	maxHints         = 50
	maxHintsBytes    = 32 << 10
	maxInsights      = 100
	maxInsightsBytes = 32 << 10
	maxFollowUps     = 20
	maxReusable      = 256 // call results kept for serving identical calls
	maxActiveSteps   = 32
	maxKeptQuestions = 20      // answered questions kept in the run's state
	maxQuestion      = 2 << 10 // an ask_user question, as the model wrote it
	maxConclusion    = 32 << 10
	maxPageBytes     = 128 << 10 // one progress query answer
	maxRunEvents     = 4000      // progress events a run keeps in memory
	maxUnwritten     = 32        // events carried to the next run (State.Unwritten)
	maxRan           = 128       // steps that ran, which evidence may name
	maxVerdicts      = 20        // entries of the verdict's history
	// maxInlineRefBytes bounds the inline results (ask_user answers of at
	// most maxInputBytes, 48 KiB once JSON escapes them; an action's
	// outcome) that one call's ref: arguments bring into its CallTool input.
	maxInlineRefBytes = 64 << 10
)

// addHint records a hint, dropping the oldest ones past the bounds.
func (r *run) addHint(hint string) {
	r.Steering.Hints = append(r.Steering.Hints, hint)
	dropped := 0
	for len(r.Steering.Hints) > 1 && (len(r.Steering.Hints) > maxHints || textBytes(r.Steering.Hints) > maxHintsBytes) {
		r.Steering.Hints = r.Steering.Hints[1:]
		dropped++
	}
	if dropped > 0 {
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf(
			"the %d oldest hints were dropped: at most %d hints and %d KiB are kept", dropped, maxHints, maxHintsBytes>>10)})
	}
}

// generated records a follow-up the workflow queued itself, keeping the
// latest maxFollowUps (no more are ever queued).
func (s *Steering) generated(question string) {
	s.Generated = append(s.Generated, question)
	s.Generated = s.Generated[max(len(s.Generated)-maxFollowUps, 0):]
}

// unqueue forgets a follow-up taken from the queue and says whether the
// workflow asked it itself. Of an analyst's question and the workflow's
// with the same text, the first taken counts as the workflow's: both say
// the same.
func (s *Steering) unqueue(question string) bool {
	i := slices.Index(s.Generated, question)
	if i >= 0 {
		s.Generated = slices.Delete(slices.Clone(s.Generated), i, i+1)
	}
	return i >= 0
}

// addInsight records an insight, dropping the oldest ones past the bounds.
func (r *run) addInsight(in investigation.Insight) {
	r.Insights = append(r.Insights, in)
	size := func() int {
		n := 0
		for _, x := range r.Insights {
			n += len(x.Text)
		}
		return n
	}
	dropped := 0
	for len(r.Insights) > 1 && (len(r.Insights) > maxInsights || size() > maxInsightsBytes) {
		r.Insights = r.Insights[1:]
		dropped++
	}
	if dropped > 0 {
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf(
			"the %d oldest insights were dropped: at most %d insights and %d KiB are kept", dropped, maxInsights, maxInsightsBytes>>10)})
	}
}

// keepQuestions drops the oldest answered questions past maxKeptQuestions;
// pending ones always stay.
func (r *run) keepQuestions() {
	answered := 0
	for _, q := range r.Steering.Questions {
		if q.Answered {
			answered++
		}
	}
	kept := r.Steering.Questions[:0]
	for _, q := range r.Steering.Questions {
		if q.Answered && answered > maxKeptQuestions {
			answered--
			continue
		}
		kept = append(kept, q)
	}
	r.Steering.Questions = kept
}

// activePlan is the plan follow-ups continue, without the oldest finished
// steps past maxActiveSteps (their answers live on in the conversation and
// the insights), and without step results: the exchange's plan holds them,
// so state holds each once (a continuing plan takes them back,
// withResultsFrom).
func (r *run) activePlan() *plan.Plan {
	p := r.Plan.Clone()
	for i := 0; len(p.Steps) > maxActiveSteps && i < len(p.Steps); {
		if p.Steps[i].Status == plan.Pending || p.Steps[i].Status == plan.Running {
			i++
			continue
		}
		p.Steps = append(p.Steps[:i], p.Steps[i+1:]...)
	}
	for i := range p.Steps {
		p.Steps[i].Result = ""
	}
	if n := len(r.Plan.Steps) - len(p.Steps); n > 0 {
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf(
			"the %d oldest finished steps leave the plan in progress, which keeps at most %d steps", n, maxActiveSteps)})
	}
	return &p
}

// addRan records a step that ran and the tools whose calls returned a
// result in it, and those served from an earlier exchange's call (only
// tools the worker offers: a call of an unknown name proves nothing),
// keeping the latest maxRan: a verdict's evidence may name only these.
func (r *run) addRan(ctx workflow.Context, step string, res loopResult) {
	known := func(names []string) (out []string) {
		for _, t := range names {
			if slices.Contains(r.toolNames(), t) && !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
		return out
	}
	tools, earlier := known(res.Tools), known(res.Earlier)
	if called := known(res.Called); (!slices.Equal(called, tools) || len(earlier) > 0) && !resultsAreEvidence(ctx) {
		tools, earlier = called, nil
	}
	r.Ran = append(r.Ran, investigation.StepRun{Turn: r.Turn, Step: step, Tools: tools, Earlier: earlier})
	r.Ran = r.Ran[max(len(r.Ran)-maxRan, 0):]
}

// resultsAreEvidence gates the rule that only a call that returned a
// result is evidence (a failed, refused, undone or unanswered call is
// none) and that one served from an earlier exchange is earlier evidence.
// Ran is part of the stored context, so a context near inlineContext
// could cross it and a StoreContext marker appear or vanish: histories
// recorded before count every call that started or was served. Asked only
// where the two rules record a step differently.
func resultsAreEvidence(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, "results-are-evidence", workflow.DefaultVersion, 1) == 1
}

// Reuse maps a call (toolcall.Key) to its stored result, so an identical
// call later is served from it; it keeps the latest maxReusable. Hashed
// maps keep a call's SHA-256 (24 bytes of hex) instead of its name and
// whole arguments, which may be long: 256 calls then cost at most about
// 25 KiB of state, whatever the model sends.
type Reuse struct {
	Keys   map[string]string `json:"keys,omitempty"`
	Order  []string          `json:"order,omitempty"`
	Hashed bool              `json:"hashed,omitempty"`
}

// hashed is a call key as a hashed map keeps it.
func hashed(call string) string {
	sum := sha256.Sum256([]byte(call))
	return hex.EncodeToString(sum[:12])
}

// hash makes the map a hashed one, converting what it holds (a map carried
// from a run recorded before the storesContext gate).
func (u *Reuse) hash() {
	if u.Hashed {
		return
	}
	u.Hashed = true
	keys := make(map[string]string, len(u.Keys))
	for i, call := range u.Order {
		u.Order[i] = hashed(call)
		keys[u.Order[i]] = u.Keys[call]
	}
	u.Keys = keys
}

// get returns the stored result of an identical earlier call.
func (u *Reuse) get(call string) (string, bool) {
	if u.Hashed {
		call = hashed(call)
	}
	ref, ok := u.Keys[call]
	return ref, ok
}

// put records a call's stored result, forgetting the oldest past the bound.
func (u *Reuse) put(call, ref string) {
	if u.Keys == nil {
		u.Keys = map[string]string{}
	}
	if u.Hashed {
		call = hashed(call)
	}
	if _, seen := u.Keys[call]; !seen {
		u.Order = append(u.Order, call)
	}
	u.Keys[call] = ref
	for len(u.Order) > maxReusable {
		delete(u.Keys, u.Order[0])
		u.Order = u.Order[1:]
	}
}

// boundedConclusion keeps a conclusion within maxConclusion, marking a cut.
func boundedConclusion(md string) string { return clip.String(md, maxConclusion) }

func textBytes(ss []string) int {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	return n
}

// pageBytes bounds a page of events by its encoded size: at least one
// event, then as many as fit maxPageBytes.
func pageBytes(events []investigation.Event) []investigation.Event {
	size := 0
	for i, e := range events {
		raw, _ := json.Marshal(e)
		size += len(raw)
		if size > maxPageBytes && i > 0 {
			return events[:i]
		}
	}
	return events
}
