// Package plan holds an investigation plan and the pure functions that check
// it and apply updates to it. Everything here is deterministic, so workflow
// code may call it.
package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Status is the lifecycle state of a step.
type Status string

// Step states.
const (
	Pending   Status = "pending"
	Running   Status = "running"
	Done      Status = "done"
	Cancelled Status = "cancelled"
	Skipped   Status = "skipped" // not run because the investigation ended first
)

// Step is one unit of work of a plan.
type Step struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Tools       []string `json:"tools"`
	Expected    string   `json:"expected"`
	Status      Status   `json:"status,omitempty"`
	// Result holds the step's findings once it is done (capped), for
	// progress and status; activities read the whole answer by ResultKey.
	Result string `json:"result,omitempty"`
	// ResultKey is the transcript key of the step's final answer.
	ResultKey string `json:"result_key,omitempty"`
	// Note says why the step was cancelled, skipped or changed.
	Note string `json:"note,omitempty"`
}

// Plan is the objective and the ordered steps of an investigation.
type Plan struct {
	Objective string `json:"objective"`
	Steps     []Step `json:"steps"`
}

// Next returns the index of the first pending step, or -1.
func (p Plan) Next() int {
	for i, s := range p.Steps {
		if s.Status == Pending {
			return i
		}
	}
	return -1
}

// Index returns the index of the step with this ID, or -1.
func (p Plan) Index(id string) int {
	for i, s := range p.Steps {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// WithStatus returns the steps whose status is one of the given ones, in plan order.
func (p Plan) WithStatus(st ...Status) []Step {
	var out []Step
	for _, s := range p.Steps {
		if slices.Contains(st, s.Status) {
			out = append(out, s)
		}
	}
	return out
}

// Count returns how many steps have one of the given statuses.
func (p Plan) Count(st ...Status) int { return len(p.WithStatus(st...)) }

// Clone returns a deep copy, so callers can change it without aliasing.
func (p Plan) Clone() Plan {
	c := Plan{Objective: p.Objective, Steps: make([]Step, len(p.Steps))}
	for i, s := range p.Steps {
		s.Tools = slices.Clone(s.Tools)
		c.Steps[i] = s
	}
	return c
}

// SkipPending marks every pending step skipped with the given note.
func (p *Plan) SkipPending(note string) {
	for i := range p.Steps {
		if p.Steps[i].Status == Pending {
			p.Steps[i].Status = Skipped
			p.Steps[i].Note = note
		}
	}
}

// IDs returns "step_1: description" lines for the given steps, for prompts and progress output.
func IDs(steps []Step) []string {
	out := make([]string, 0, len(steps))
	for _, s := range steps {
		out = append(out, s.ID+": "+s.Description)
	}
	return out
}

// Repair checks a plan produced by the model and makes it executable:
// it renumbers steps step_1..n, removes tools that are not in known (a step
// whose tools were all unknown is dropped, never executed blindly), drops
// steps without a description, and cuts the plan to maxSteps. Notes say what
// was changed. An error means nothing executable is left.
func Repair(p Plan, known []string, maxSteps int) (Plan, []string, error) {
	var notes []string
	out := Plan{Objective: strings.TrimSpace(p.Objective)}
	if out.Objective == "" {
		return Plan{}, nil, fmt.Errorf("the plan has no objective")
	}
	for i, s := range p.Steps {
		label := s.ID
		if label == "" {
			label = "#" + strconv.Itoa(i+1)
		}
		s.Description = strings.TrimSpace(s.Description)
		if s.Description == "" {
			notes = append(notes, fmt.Sprintf("dropped step %s: it has no description", label))
			continue
		}
		tools, unknown := splitTools(s.Tools, known)
		if len(unknown) > 0 {
			if len(tools) == 0 {
				notes = append(notes, fmt.Sprintf("dropped step %s: it names only unknown tools %s", label, strings.Join(unknown, ", ")))
				continue
			}
			notes = append(notes, fmt.Sprintf("step %s: removed unknown tools %s", label, strings.Join(unknown, ", ")))
		}
		if maxSteps > 0 && len(out.Steps) == maxSteps {
			notes = append(notes, fmt.Sprintf("dropped step %s and later ones: the plan is capped at %d steps", label, maxSteps))
			break
		}
		out.Steps = append(out.Steps, Step{
			ID:          "step_" + strconv.Itoa(len(out.Steps)+1),
			Description: s.Description,
			Tools:       tools,
			Expected:    strings.TrimSpace(s.Expected),
			Status:      Pending,
		})
	}
	if len(out.Steps) == 0 {
		return Plan{}, notes, fmt.Errorf("the plan has no executable steps (%s)", strings.Join(notes, "; "))
	}
	return out, notes, nil
}

// splitTools returns the known tools (deduplicated, in the given order) and the unknown ones.
func splitTools(names, known []string) (ok, unknown []string) {
	ok = []string{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "" || slices.Contains(ok, n) || slices.Contains(unknown, n):
		case slices.Contains(known, n):
			ok = append(ok, n)
		default:
			unknown = append(unknown, n)
		}
	}
	return ok, unknown
}
