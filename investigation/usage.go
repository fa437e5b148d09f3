package investigation

import (
	"encoding/json"
	"slices"
	"strings"
)

// Usage counts model calls and their tokens.
type Usage struct {
	Calls        int `json:"calls"`
	PromptTokens int `json:"prompt_tokens"`
	OutputTokens int `json:"output_tokens"`
	// ThoughtTokens are the model's thinking tokens, billed as output.
	ThoughtTokens int `json:"thought_tokens,omitempty"`
	// Model is the model the calls went to (MixedModels for more than one),
	// for pricing.
	Model string `json:"model,omitempty"`
	// ByModel splits a sum over calls to several models by model, so each
	// part is priced at its own model's price; zero (and left out of the
	// JSON) when the calls went to one model. A sum recorded before it was
	// kept has Model MixedModels and no split: it stays unpriced.
	ByModel ModelSplit `json:"by_model,omitzero"`
}

// MixedModels is Usage.Model of a sum over calls to different models.
const MixedModels = "(several models)"

// MaxModels bounds a usage's split by model: an investigation calls two or
// three models. Calls to further models count in the totals only, and
// PerModel names them OtherModels, which the shipped table does not price.
const MaxModels = 4

// OtherModels names the part of a usage its split has no room for.
const OtherModels = "(other models)"

// ModelUsage is the part of a usage that went to one model.
type ModelUsage struct {
	Model         string `json:"model"`
	Calls         int    `json:"calls"`
	PromptTokens  int    `json:"prompt_tokens"`
	OutputTokens  int    `json:"output_tokens"`
	ThoughtTokens int    `json:"thought_tokens,omitempty"`
}

// ModelSplit holds up to MaxModels parts, from the first, each of its own
// model. An array, not a slice: bounded by its type, and Usage stays a
// value that compares with ==.
type ModelSplit [MaxModels]ModelUsage

// MarshalJSON writes the parts as a list, without the empty slots.
func (s ModelSplit) MarshalJSON() ([]byte, error) {
	parts := make([]ModelUsage, 0, MaxModels)
	for _, m := range s {
		if m != (ModelUsage{}) {
			parts = append(parts, m)
		}
	}
	return json.Marshal(parts)
}

// UnmarshalJSON reads a list of parts: the first MaxModels that are not
// empty are kept, and what a longer list held counts as OtherModels
// (PerModel: the totals minus the parts kept).
func (s *ModelSplit) UnmarshalJSON(b []byte) error {
	var parts []ModelUsage
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	*s = ModelSplit{}
	i := 0
	for _, m := range parts {
		if i == MaxModels {
			break
		}
		if m != (ModelUsage{}) {
			s[i], i = m, i+1
		}
	}
	return nil
}

func (m ModelUsage) usage() Usage {
	return Usage{Calls: m.Calls, PromptTokens: m.PromptTokens, OutputTokens: m.OutputTokens, ThoughtTokens: m.ThoughtTokens, Model: m.Model}
}

func (u Usage) part() ModelUsage {
	return ModelUsage{Model: u.Model, Calls: u.Calls, PromptTokens: u.PromptTokens, OutputTokens: u.OutputTokens, ThoughtTokens: u.ThoughtTokens}
}

func (m ModelUsage) add(o ModelUsage) ModelUsage {
	m.Calls += o.Calls
	m.PromptTokens += o.PromptTokens
	m.OutputTokens += o.OutputTokens
	m.ThoughtTokens += o.ThoughtTokens
	return m
}

// PerModel splits the usage into one usage per model, each to be priced
// at its model's price: the usage itself when it went to one model (or
// was recorded as MixedModels, without its split), else the parts of
// ByModel and, when the totals hold more than the parts, the rest as
// OtherModels.
func (u Usage) PerModel() []Usage {
	if u.ByModel == (ModelSplit{}) {
		return []Usage{u}
	}
	var out []Usage
	rest := ModelUsage{Model: OtherModels, Calls: u.Calls, PromptTokens: u.PromptTokens, OutputTokens: u.OutputTokens, ThoughtTokens: u.ThoughtTokens}
	for _, m := range u.ByModel {
		if m != (ModelUsage{}) {
			out = append(out, m.usage())
			rest.Calls -= m.Calls
			rest.PromptTokens -= m.PromptTokens
			rest.OutputTokens -= m.OutputTokens
			rest.ThoughtTokens -= m.ThoughtTokens
		}
	}
	// Parts that claim more than the totals (a forged payload) leave no
	// negative rest.
	rest.Calls, rest.PromptTokens, rest.OutputTokens, rest.ThoughtTokens =
		max(rest.Calls, 0), max(rest.PromptTokens, 0), max(rest.OutputTokens, 0), max(rest.ThoughtTokens, 0)
	if rest != (ModelUsage{Model: OtherModels}) {
		out = append(out, rest.usage())
	}
	return out
}

// Add returns the sum of two usages, split by model when they went to
// different models: the split holds the first MaxModels by name. Usage
// that names no model (recorded by an older worker) counts with the first
// of them, as it counted with the one model before the split.
func (u Usage) Add(o Usage) Usage {
	sum := Usage{
		Calls:         u.Calls + o.Calls,
		PromptTokens:  u.PromptTokens + o.PromptTokens,
		OutputTokens:  u.OutputTokens + o.OutputTokens,
		ThoughtTokens: u.ThoughtTokens + o.ThoughtTokens,
	}
	// At most 2×(MaxModels+1) parts: the merge below is small.
	var named []ModelUsage
	var unnamed ModelUsage
	other := false
	for _, p := range append(u.parts(), o.parts()...) {
		switch {
		case p.Model == "":
			unnamed = unnamed.add(p)
		case p.Model == OtherModels:
			other = true // the totals keep it; the split has no slot for it
		default:
			i := 0
			for i < len(named) && named[i].Model != p.Model {
				i++
			}
			if i == len(named) {
				named = append(named, ModelUsage{Model: p.Model})
			}
			named[i] = named[i].add(p)
		}
	}
	switch {
	case len(named) == 0:
		if other {
			sum.Model = OtherModels
		}
		return sum
	case len(named) == 1 && !other:
		sum.Model = named[0].Model
		return sum
	}
	// In the order of their names: a sum is the same whatever order its
	// usages were added in (the total and the sum of the phases agree).
	slices.SortFunc(named, func(a, b ModelUsage) int { return strings.Compare(a.Model, b.Model) })
	named[0] = named[0].add(unnamed)
	sum.Model = MixedModels
	copy(sum.ByModel[:], named) // past MaxModels: the rest, OtherModels
	return sum
}

// parts are the usage's parts by model: its split, the rest of its totals
// as OtherModels, or the whole usage as one part (none for no usage).
func (u Usage) parts() []ModelUsage {
	if u == (Usage{}) {
		return nil
	}
	var ps []ModelUsage
	for _, p := range u.PerModel() {
		ps = append(ps, p.part())
	}
	return ps
}

// Tokens is every token the calls were billed for.
func (u Usage) Tokens() int { return u.PromptTokens + u.OutputTokens + u.ThoughtTokens }

// UsageByPhase splits an investigation's usage by what the model was asked
// to do. Plan includes follow-ups' mode decisions; Steps includes direct
// answers; SubAgent is every model call of the BigQuery sub-agent's runs
// (their tool loops and introspection).
type UsageByPhase struct {
	Plan       Usage `json:"plan"`
	Steps      Usage `json:"steps"`
	Reflection Usage `json:"reflection"`
	Conclusion Usage `json:"conclusion"`
	SubAgent   Usage `json:"sub_agent"`
}

// Phases lists the phases with their names as people read them, in the
// order an investigation goes through them.
func (p UsageByPhase) Phases() []PhaseUsage {
	return []PhaseUsage{{"plan", p.Plan}, {"steps", p.Steps}, {"reflection", p.Reflection}, {"conclusion", p.Conclusion}, {"sub-agent", p.SubAgent}}
}

// PhaseUsage is one phase's usage, named.
type PhaseUsage struct {
	Name  string
	Usage Usage
}

// Total sums the phases.
func (p UsageByPhase) Total() Usage {
	var t Usage
	for _, ph := range p.Phases() {
		t = t.Add(ph.Usage)
	}
	return t
}

// Spend is what an investigation used so far: model calls and tokens, tool
// calls, BigQuery bytes. Status and Result embed it (its JSON fields are
// theirs).
type Spend struct {
	// Usage is the total of ByPhase.
	Usage     Usage        `json:"usage"`
	ByPhase   UsageByPhase `json:"usage_by_phase"`
	ToolCalls int          `json:"tool_calls"`
	// ScannedBytes is what the investigation's BigQuery queries scanned.
	ScannedBytes int64 `json:"scanned_bytes,omitempty"`
}
