package plan

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// UpdateType names the kind of change a reflection proposes.
type UpdateType string

// The plan update kinds.
const (
	AddStep    UpdateType = "add_step"
	UpdateStep UpdateType = "update_step"
	CancelStep UpdateType = "cancel_step"
)

// Update is one change to the plan proposed by reflection.
type Update struct {
	Type UpdateType `json:"type"`
	// Step carries the new step (add_step) or the new fields (update_step).
	Step *Step `json:"step,omitempty"`
	// StepID names the step to update or cancel.
	StepID string `json:"step_id,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Outcome says what Apply did with one update.
type Outcome struct {
	Update  Update `json:"update"`
	Applied bool   `json:"applied"`
	// StepID is the step the update touched (for add_step, the new step's ID).
	StepID string `json:"step_id,omitempty"`
	// Why explains a dropped update.
	Why string `json:"why,omitempty"`
	// Duplicate is the step an add_step was dropped as a duplicate of: a
	// step that depended on the one dropped can depend on it instead.
	Duplicate string `json:"duplicate,omitempty"`
}

// Limits bound what updates may do.
type Limits struct {
	// MaxSteps caps the number of steps a plan may ever hold, cancelled ones
	// included, so add/cancel cycles cannot grow it without end.
	MaxSteps int
	// Tools are the tool names a step may use.
	Tools []string
	// Bound clips the text an update writes to the plan's bounds (Bounded).
	// The workflow sets it behind a gate: the plan rides in the stored
	// context, whose size decides a command (design/versioning.md).
	Bound bool
}

// UpdatesWithinBounds reports whether no update writes text over the
// plan's bounds, so that Bound would change nothing.
func UpdatesWithinBounds(us []Update) bool {
	for _, u := range us {
		if len(strings.TrimSpace(u.Reason)) > MaxNoteBytes {
			return false
		}
		if s := u.Step; s != nil && !(Plan{Steps: []Step{{Description: strings.TrimSpace(s.Description), Expected: strings.TrimSpace(s.Expected)}}}).WithinBounds() {
			return false
		}
	}
	return true
}

// Apply applies reflection updates to a plan, in order, and returns the new
// plan (the input is not modified) with one outcome per update. It drops
// updates that are malformed, target unknown or finished steps, duplicate a
// completed or pending step, name only unknown tools, or would exceed the step
// cap. Added steps are appended after the existing ones.
func Apply(p Plan, updates []Update, lim Limits) (Plan, []Outcome) {
	p = p.Clone()
	outcomes := make([]Outcome, 0, len(updates))
	for _, u := range updates {
		o := Outcome{Update: u}
		var err error
		switch u.Type {
		case AddStep:
			o.StepID, o.Duplicate, err = add(&p, u, lim)
		case UpdateStep:
			o.StepID, err = update(&p, u, lim)
		case CancelStep:
			o.StepID, err = cancel(&p, u, lim)
		default:
			err = fmt.Errorf("unknown update type %q", u.Type)
		}
		if err != nil {
			o.Why = err.Error()
		} else {
			o.Applied = true
		}
		outcomes = append(outcomes, o)
	}
	return p, outcomes
}

func add(p *Plan, u Update, lim Limits) (id, duplicate string, err error) {
	if u.Step == nil || strings.TrimSpace(u.Step.Description) == "" {
		return "", "", fmt.Errorf("add_step without a step description")
	}
	if lim.MaxSteps > 0 && len(p.Steps) >= lim.MaxSteps {
		return "", "", fmt.Errorf("step cap of %d reached", lim.MaxSteps)
	}
	if dup := duplicateOf(*p, u.Step.Description, ""); dup != "" {
		return "", dup, fmt.Errorf("duplicates %s", dup)
	}
	tools, err := checkTools(u.Step.Tools, lim.Tools)
	if err != nil {
		return "", "", err
	}
	id = nextID(*p)
	existing := map[string]string{}
	for _, s := range p.Steps {
		existing[s.ID] = s.ID
	}
	deps, _ := renameDeps(u.Step.DependsOn, existing, nil) // unknown ones cannot hold it back
	// Clipped (with Bound) after the duplicate check, which reads the text
	// as written: a later check against a clipped description differs only
	// where Bound was set, behind the workflow's gate (Limits.Bound).
	p.Steps = append(p.Steps, Step{
		ID:          id,
		Description: strings.TrimSpace(u.Step.Description),
		Tools:       tools,
		Expected:    strings.TrimSpace(u.Step.Expected),
		DependsOn:   deps,
		Status:      Pending,
		Note:        strings.TrimSpace(u.Reason),
	}.boundedIf(lim.Bound))
	return id, "", nil
}

func update(p *Plan, u Update, lim Limits) (string, error) {
	i, err := pendingStep(*p, u.StepID)
	if err != nil {
		return "", err
	}
	if u.Step == nil {
		return "", fmt.Errorf("update_step for %s without new step fields", u.StepID)
	}
	s := p.Steps[i]
	if d := strings.TrimSpace(u.Step.Description); d != "" {
		if dup := duplicateOf(*p, d, s.ID); dup != "" {
			return "", fmt.Errorf("duplicates %s", dup)
		}
		s.Description = d
	}
	if len(u.Step.Tools) > 0 {
		tools, err := checkTools(u.Step.Tools, lim.Tools)
		if err != nil {
			return "", err
		}
		s.Tools = tools
	}
	if e := strings.TrimSpace(u.Step.Expected); e != "" {
		s.Expected = e
	}
	s.Note = strings.TrimSpace(u.Reason)
	p.Steps[i] = s.boundedIf(lim.Bound) // as add: after the duplicate check
	return s.ID, nil
}

func cancel(p *Plan, u Update, lim Limits) (string, error) {
	i, err := pendingStep(*p, u.StepID)
	if err != nil {
		return "", err
	}
	p.Steps[i].Status = Cancelled
	p.Steps[i].Note = strings.TrimSpace(u.Reason)
	p.Steps[i] = p.Steps[i].boundedIf(lim.Bound)
	return p.Steps[i].ID, nil
}

func pendingStep(p Plan, id string) (int, error) {
	i := p.Index(id)
	switch {
	case id == "":
		return -1, fmt.Errorf("no step_id given")
	case i < 0:
		return -1, fmt.Errorf("unknown step %q", id)
	case p.Steps[i].Status != Pending:
		return -1, fmt.Errorf("step %s is %s, only pending steps can change", id, p.Steps[i].Status)
	}
	return i, nil
}

// checkTools quotes the unknown names (named): they are the model's.
func checkTools(asked, known []string) ([]string, error) {
	tools, unknown := splitTools(asked, known)
	if len(unknown) > 0 && len(tools) == 0 {
		return nil, fmt.Errorf("names only unknown tools %s", names(unknown))
	}
	return tools, nil
}

// nextID returns step_N with N one more than the highest numbered step.
func nextID(p Plan) string {
	highest := len(p.Steps)
	for _, s := range p.Steps {
		if n, err := strconv.Atoi(strings.TrimPrefix(s.ID, "step_")); err == nil && n > highest {
			highest = n
		}
	}
	return "step_" + strconv.Itoa(highest+1)
}

// duplicateOf returns the ID of a completed, running or pending step (other
// than except) whose description says the same thing, or "".
func duplicateOf(p Plan, description, except string) string {
	words := wordSet(description)
	for _, s := range p.Steps {
		if s.ID == except || s.Status == Cancelled || s.Status == Skipped {
			continue
		}
		if similar(words, wordSet(s.Description)) {
			return s.ID
		}
	}
	return ""
}

// similar reports whether two word sets overlap enough (Jaccard >= 0.8) to
// count as the same step; it catches rephrasings such as a changed article
// or word order.
func similar(a, b map[string]bool) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	inter := 0
	for w := range a {
		if b[w] {
			inter++
		}
	}
	union := len(a) + len(b) - inter
	return float64(inter)/float64(union) >= 0.8
}

func wordSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.' && r != ':'
	}) {
		w = strings.Trim(w, ".:")
		switch w {
		case "", "the", "a", "an", "of", "for", "to", "and", "on", "in", "with":
		default:
			set[w] = true
		}
	}
	return set
}
