// Package plan holds an investigation plan and the pure functions that check
// it and apply updates to it. Everything here is deterministic, so workflow
// code may call it.
package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/secops-agent/investigator/internal/clip"
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
	// DependsOn names the earlier steps whose results this step needs: it
	// starts once they are finished, alongside other ready steps. nil (no
	// depends_on given) means every earlier step, i.e. in plan order; an
	// empty list means none. Not omitempty: the two must survive JSON.
	DependsOn []string `json:"depends_on"`
	Status    Status   `json:"status,omitempty"`
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

// Bounds on the model-written text a plan holds (clip.String): the
// objective and a step ride in every model turn of the step, and the plan
// in every reflection and conclusion input, so text copied from a huge
// alert field must not make each of them that large.
const (
	MaxObjectiveBytes   = 1000
	MaxDescriptionBytes = 1000
	MaxExpectedBytes    = 500
	MaxNoteBytes        = 500
)

// Bounded is the plan with its objective and its steps' descriptions,
// expected outcomes and notes clipped to their bounds.
func (p Plan) Bounded() Plan {
	p = p.Clone()
	p.Objective = clip.String(p.Objective, MaxObjectiveBytes)
	for i := range p.Steps {
		p.Steps[i] = p.Steps[i].bounded()
	}
	return p
}

// WithinBounds reports whether Bounded would change nothing.
func (p Plan) WithinBounds() bool {
	if len(p.Objective) > MaxObjectiveBytes {
		return false
	}
	for _, s := range p.Steps {
		if len(s.Description) > MaxDescriptionBytes || len(s.Expected) > MaxExpectedBytes || len(s.Note) > MaxNoteBytes {
			return false
		}
	}
	return true
}

func (s Step) boundedIf(bound bool) Step {
	if !bound {
		return s
	}
	return s.bounded()
}

func (s Step) bounded() Step {
	s.Description = clip.String(s.Description, MaxDescriptionBytes)
	s.Expected = clip.String(s.Expected, MaxExpectedBytes)
	s.Note = clip.String(s.Note, MaxNoteBytes)
	return s
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

// Finished says a step will not run (again): done, cancelled or skipped.
func (s Status) Finished() bool { return s == Done || s == Cancelled || s == Skipped }

// Ready returns the indexes of the pending steps that may start now, in
// plan order: those whose dependencies are finished (a step without
// depends_on waits for every earlier step). A dependency that names no
// step of the plan does not hold a step back.
func (p Plan) Ready() []int {
	var ready []int
	for i, s := range p.Steps {
		if s.Status != Pending {
			continue
		}
		ok := true
		if s.DependsOn == nil {
			for _, e := range p.Steps[:i] {
				ok = ok && e.Status.Finished()
			}
		}
		for _, id := range s.DependsOn {
			if j := p.Index(id); j >= 0 && !p.Steps[j].Status.Finished() {
				ok = false
			}
		}
		if ok {
			ready = append(ready, i)
		}
	}
	return ready
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
		s.DependsOn = slices.Clone(s.DependsOn) // keeps nil apart from empty
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
	return RepairAfter(p, nil, known, maxSteps)
}

// RepairAfter is Repair for steps that continue a plan whose steps are
// earlier (their IDs): the new steps are numbered after them (After), so
// no ID is taken twice, and a new step's depends_on may also name an earlier
// step, kept as written. A dependency naming one of the new steps' own IDs
// means that new step.
func RepairAfter(p Plan, earlier []string, known []string, maxSteps int) (Plan, []string, error) {
	first := After(earlier)
	var notes []string
	out := Plan{Objective: strings.TrimSpace(p.Objective)}
	if out.Objective == "" {
		return Plan{}, nil, fmt.Errorf("the plan has no objective")
	}
	renamed := map[string]string{} // the model's step IDs -> the kept steps' new ones
	for i, s := range p.Steps {
		label := named(s.ID)
		if s.ID == "" {
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
				notes = append(notes, fmt.Sprintf("dropped step %s: it names only unknown tools %s", label, names(unknown)))
				continue
			}
			notes = append(notes, fmt.Sprintf("step %s: removed unknown tools %s", label, names(unknown)))
		}
		if maxSteps > 0 && len(out.Steps) == maxSteps {
			notes = append(notes, fmt.Sprintf("dropped step %s and later ones: the plan is capped at %d steps", label, maxSteps))
			break
		}
		id := "step_" + strconv.Itoa(first+len(out.Steps))
		deps, dropped := renameDeps(s.DependsOn, renamed, earlier)
		if len(dropped) > 0 {
			notes = append(notes, fmt.Sprintf("step %s: dropped dependencies on %s (only earlier steps of the plan count)", label, names(dropped)))
		}
		out.Steps = append(out.Steps, Step{
			ID:          id,
			Description: s.Description,
			Tools:       tools,
			Expected:    strings.TrimSpace(s.Expected),
			DependsOn:   deps,
			Status:      Pending,
		})
		if _, seen := renamed[s.ID]; s.ID != "" && !seen {
			renamed[s.ID] = id
		}
	}
	notes = BoundNotes(notes)
	if len(out.Steps) == 0 {
		return Plan{}, notes, fmt.Errorf("the plan has no executable steps (%s)", strings.Join(notes, "; "))
	}
	return out.Bounded(), notes, nil
}

// MaxNotes bounds the notes of one plan: a plan of thousands of steps that
// name unknown tools would otherwise carry a note for each into the plan's
// output, its event and the re-ask.
const MaxNotes = 20

// BoundNotes is notes with at most MaxNotes of them, each clipped to
// MaxNoteBytes; the ones past the bound become one note that counts them.
func BoundNotes(notes []string) []string {
	if len(notes) <= MaxNotes && !slices.ContainsFunc(notes, func(n string) bool { return len(n) > MaxNoteBytes }) {
		return notes
	}
	out := make([]string, 0, MaxNotes)
	for _, n := range notes[:min(len(notes), MaxNotes-1)] {
		out = append(out, clip.String(n, MaxNoteBytes))
	}
	switch rest := len(notes) - len(out); {
	case rest == 1:
		out = append(out, clip.String(notes[len(notes)-1], MaxNoteBytes))
	case rest > 1:
		out = append(out, fmt.Sprintf("and %d more changes of the same kinds", rest))
	}
	return out
}

// renameDeps maps a step's dependencies through renamed (the earlier kept
// steps' IDs) or keeps those naming a step of an earlier plan (earlier),
// deduplicated, and returns the ones that name neither. nil stays nil: the
// step keeps running after every earlier one.
func renameDeps(deps []string, renamed map[string]string, earlier []string) (kept, dropped []string) {
	if deps == nil {
		return nil, nil
	}
	kept = []string{}
	for _, d := range deps {
		d = strings.TrimSpace(d)
		id, ok := renamed[d]
		if !ok && slices.Contains(earlier, d) {
			id, ok = d, true
		}
		switch {
		case ok && !slices.Contains(kept, id):
			kept = append(kept, id)
		case !ok && d != "":
			dropped = append(dropped, d)
		}
	}
	return kept, dropped
}

// After is the number of the first step after steps with these IDs:
// one more than the highest step_N, or than their count (as Apply numbers
// an added step).
func After(ids []string) int {
	highest := len(ids)
	for _, id := range ids {
		if n, err := strconv.Atoi(strings.TrimPrefix(id, "step_")); err == nil && n > highest {
			highest = n
		}
	}
	return highest + 1
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

// maxNamed is how much of a model-written name a note quotes.
const maxNamed = 80

// named writes a step ID or tool name the model wrote for a note, which
// reaches the model again (a plan's re-ask) and the analyst: a plain name
// as it is, anything else quoted and clipped, so it cannot break its line.
func named(s string) string {
	if s != "" && len(s) <= 64 && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	}) {
		return s
	}
	return fmt.Sprintf("%q", clip.String(s, maxNamed))
}

// maxNames is how many model-written names one note lists.
const maxNames = 5

// names writes model-written names for a note, each as named does, at most
// maxNames of them and then how many more there are: a step may name
// thousands of tools.
func names(items []string) string {
	out := make([]string, 0, min(len(items), maxNames)+1)
	for _, s := range items[:min(len(items), maxNames)] {
		out = append(out, named(s))
	}
	if len(items) > maxNames {
		out = append(out, fmt.Sprintf("and %d more", len(items)-maxNames))
	}
	return strings.Join(out, ", ")
}
