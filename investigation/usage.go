package investigation

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
}

// MixedModels is Usage.Model of a sum over calls to different models.
const MixedModels = "(several models)"

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	model := u.Model
	switch {
	case model == "":
		model = o.Model
	case o.Model != "" && o.Model != model:
		model = MixedModels
	}
	return Usage{
		Calls:         u.Calls + o.Calls,
		PromptTokens:  u.PromptTokens + o.PromptTokens,
		OutputTokens:  u.OutputTokens + o.OutputTokens,
		ThoughtTokens: u.ThoughtTokens + o.ThoughtTokens,
		Model:         model,
	}
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
