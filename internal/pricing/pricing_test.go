package pricing

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/investigation"
)

func TestDefaultTable(t *testing.T) {
	tab := Default()
	assert.Equal(t, "USD", tab.Currency)
	p, ok := tab.Lookup("gemini-2.5-flash")
	require.True(t, ok)
	assert.Equal(t, Price{Input: 0.30, Output: 2.50}, p)
}

func TestLookup(t *testing.T) {
	tab := Table{Currency: "USD", Models: map[string]Price{"gemini-2.5-flash": {1, 2}, "gemini-2.5-flash-lite": {3, 4}, "gemini-2.5-pro": {5, 6}}}
	for model, want := range map[string]Price{
		"gemini-2.5-flash":                          {1, 2},
		"gemini-2.5-flash-002":                      {1, 2},
		"gemini-2.5-flash-lite-preview-06-17":       {3, 4}, // the longest prefix
		"models/gemini-2.5-pro":                     {5, 6},
		"publishers/google/models/gemini-2.5-flash": {1, 2},
	} {
		got, ok := tab.Lookup(model)
		assert.True(t, ok, model)
		assert.Equal(t, want, got, model)
	}
	for _, model := range []string{"", "gemini-2.0-flash", "gemini", investigation.MixedModels} {
		_, ok := tab.Lookup(model)
		assert.False(t, ok, "%q", model)
	}
}

func TestEstimates(t *testing.T) {
	tab := Table{Currency: "USD", Models: map[string]Price{"m": {Input: 0.30, Output: 2.50}}}
	cost, ok := tab.Estimate(investigation.Usage{PromptTokens: 1_000_000, OutputTokens: 100_000, ThoughtTokens: 100_000, Model: "m"})
	require.True(t, ok)
	assert.InDelta(t, 0.30+0.50, cost, 1e-9, "thinking is billed as output")

	cost, unpriced := tab.Estimates(investigation.UsageByPhase{
		Plan:     investigation.Usage{PromptTokens: 2_000_000, Model: "m"},
		Steps:    investigation.Usage{PromptTokens: 10, Model: "other"},
		SubAgent: investigation.Usage{OutputTokens: 10},
	}.Phases())
	assert.InDelta(t, 0.60, cost, 1e-9)
	assert.Equal(t, []string{"other", "(model not recorded)"}, unpriced)
}

// The BigQuery sub-agent's phase sums its model turns and its memory
// embeddings: each model's part is priced at its own price (the shipped
// table prices the default embedding model), so the quick start's cost is
// no longer "over" with "(several models)" unpriced.
func TestSubAgentPhasePriced(t *testing.T) {
	var sub investigation.Usage
	sub = sub.Add(investigation.Usage{Calls: 1, PromptTokens: 40000, OutputTokens: 1200, Model: "gemini-2.5-flash"})
	sub = sub.Add(investigation.Usage{Calls: 1, PromptTokens: 30, Model: "gemini-embedding-001"})
	cost, unpriced := Default().Estimates(investigation.UsageByPhase{SubAgent: sub}.Phases())
	if len(unpriced) > 0 || cost == 0 {
		t.Fatalf("sub-agent phase left unpriced: cost %.4f, unpriced %v", cost, unpriced)
	}
	assert.InDelta(t, (40000*0.30+1200*2.50+30*0.15)/1e6, cost, 1e-12)
	c, ok := Default().Estimate(sub)
	assert.True(t, ok)
	assert.InDelta(t, cost, c, 1e-12)
}

// What cannot be priced is named: a phase recorded as one mixed sum by an
// older worker, and the models past a split's bound.
func TestUnpricedPartsAreNamed(t *testing.T) {
	tab := Table{Currency: "USD", Models: map[string]Price{"m0": {Input: 1}}}
	old := investigation.Usage{Calls: 2, PromptTokens: 1_000_000, Model: investigation.MixedModels}
	var many investigation.Usage
	for i := range investigation.MaxModels + 1 {
		many = many.Add(investigation.Usage{Calls: 1, PromptTokens: 1_000_000, Model: fmt.Sprintf("m%d", i)})
	}
	cost, unpriced := tab.Estimates(investigation.UsageByPhase{Steps: old, SubAgent: many}.Phases())
	assert.InDelta(t, 1.0, cost, 1e-9, "m0's part is priced")
	assert.Equal(t, []string{investigation.MixedModels, "m1", "m2", "m3", investigation.OtherModels}, unpriced)
	_, ok := tab.Estimate(many)
	assert.False(t, ok)
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		f := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(f, []byte(text), 0o600))
		return f
	}
	tab, err := Load(write("ok.yaml", "currency: EUR\nmodels:\n  my-model: {input: 1, output: 2}\n"))
	require.NoError(t, err)
	assert.Equal(t, "EUR", tab.Currency)

	for name, text := range map[string]string{
		"nocurrency.yaml": "models:\n  m: {input: 1, output: 2}\n",
		"nomodels.yaml":   "currency: USD\n",
		"negative.yaml":   "currency: USD\nmodels:\n  m: {input: -1, output: 2}\n",
		"inf.yaml":        "currency: USD\nmodels:\n  m: {input: .inf, output: 2}\n",
		"bad.yaml":        "currency: [",
	} {
		_, err := Load(write(name, text))
		assert.Error(t, err, name)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	assert.ErrorContains(t, err, "read the price table")

	// One line, the value (maybe the start of a pasted secret) not quoted;
	// an empty file said so.
	for name, want := range map[string]string{
		"secret.yaml": "not valid YAML: line 4: a !!str value where float64 belongs; line 5: a !!str value where float64 belongs",
		"empty.yaml":  "the file is empty (or holds only comments)",
	} {
		f := write(name, map[string]string{
			"secret.yaml": "currency: USD\nmodels:\n  m:\n    input: sk-live-0123456789\n    output: sk-live-9876543210\n",
			"empty.yaml":  "\n",
		}[name])
		_, err := Load(f)
		assert.EqualError(t, err, "price table "+f+": "+want)
	}
}
