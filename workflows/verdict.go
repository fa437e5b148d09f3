package workflows

import (
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// answerStepID is the step ID of the tool loop that answers a follow-up
// directly.
const answerStepID = "answer"

// setVerdict records the conclusion's verdict and, when the Verdict search
// attribute was registered when the investigation started, sets it so the
// Web UI can filter on it.
func (r *run) setVerdict(ctx workflow.Context, v *investigation.Verdict) {
	if v == nil {
		return
	}
	r.verdict = v
	if !slices.Contains(r.in.SearchAttributes, investigation.VerdictAttribute) {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		temporal.NewSearchAttributeKeyKeyword(investigation.VerdictAttribute).ValueSet(v.Verdict)); err != nil {
		workflow.GetLogger(ctx).Warn("could not set the Verdict search attribute", "error", err)
	}
}

// splitInsights returns the insights of the current exchange and those
// carried from earlier ones.
func (r *run) splitInsights() (current, earlier []investigation.Insight) {
	for _, in := range r.insights {
		if in.Turn == r.turn {
			current = append(current, in)
		} else {
			earlier = append(earlier, in)
		}
	}
	return current, earlier
}

// withoutResults returns copies of steps without their inline results:
// activities read the whole answers from the transcript store by
// ResultKey, so inputs stay small.
func withoutResults(steps []plan.Step) []plan.Step {
	out := make([]plan.Step, len(steps))
	for i, s := range steps {
		s.Result = ""
		out[i] = s
	}
	return out
}

func planWithoutResults(p *plan.Plan) *plan.Plan {
	if p == nil {
		return nil
	}
	c := plan.Plan{Objective: p.Objective, Steps: withoutResults(p.Steps)}
	return &c
}
