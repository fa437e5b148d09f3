package pricing

import (
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
