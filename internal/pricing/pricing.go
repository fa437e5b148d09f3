// Package pricing estimates what model usage cost from a price table per
// model (prices.yaml, or a table of the same format the user gives).
package pricing

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/secops-agent/investigator/internal/smallfile"
	"github.com/secops-agent/investigator/internal/yamltext"
	"github.com/secops-agent/investigator/investigation"
)

//go:embed prices.yaml
var defaultTable []byte

// Price is a model's price per million tokens.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// Table holds the prices per model name.
type Table struct {
	Currency string           `yaml:"currency"`
	Source   string           `yaml:"source"`
	Models   map[string]Price `yaml:"models"`
}

// Default is the table shipped with the investigator (prices.yaml).
func Default() Table {
	t, err := parse(defaultTable)
	if err != nil {
		panic("pricing: the embedded prices.yaml is invalid: " + err.Error()) // caught by the package's tests
	}
	return t
}

// Load reads a table from a file in prices.yaml's format.
func Load(file string) (Table, error) {
	b, err := smallfile.Read(file, smallfile.DefaultMax)
	if err != nil {
		return Table{}, fmt.Errorf("cannot read the price table %s: %w", file, err)
	}
	t, err := parse(b)
	if err != nil {
		return Table{}, fmt.Errorf("price table %s: %w", file, err)
	}
	return t, nil
}

func parse(b []byte) (Table, error) {
	var t Table
	if err := yaml.Unmarshal(b, &t); err != nil {
		return Table{}, fmt.Errorf("not valid YAML: %s", yamltext.Error(err))
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return Table{}, errors.New(yamltext.Empty)
	}
	if t.Currency == "" {
		return Table{}, fmt.Errorf("it names no currency")
	}
	if len(t.Models) == 0 {
		return Table{}, fmt.Errorf("it lists no models")
	}
	for name, p := range t.Models {
		if !valid(p.Input) || !valid(p.Output) {
			return Table{}, fmt.Errorf("model %s: prices must be finite and not negative", name)
		}
	}
	return t, nil
}

func valid(f float64) bool { return f >= 0 && !math.IsInf(f, 0) && !math.IsNaN(f) }

// Lookup finds a model's price: its exact name, else the longest entry
// that prefixes it. A resource path ("models/gemini-2.5-flash",
// "publishers/google/models/...") is matched by its last element.
func (t Table) Lookup(model string) (Price, bool) {
	model = path.Base(strings.TrimSpace(model))
	if p, ok := t.Models[model]; ok {
		return p, true
	}
	best := ""
	for name := range t.Models {
		if strings.HasPrefix(model, name) && len(name) > len(best) {
			best = name
		}
	}
	p, ok := t.Models[best]
	return p, ok && best != ""
}

// Estimate is what usage cost, each model's part (Usage.PerModel) at its
// model's price, thinking tokens billed as output; ok is false when the
// table has no price for one of its models (their part is left out).
func (t Table) Estimate(u investigation.Usage) (cost float64, ok bool) {
	cost, unpriced := t.Estimates([]investigation.PhaseUsage{{Usage: u}})
	return cost, len(unpriced) == 0
}

// Estimates sums the cost of each phase's usage, each model's part at its
// own price, and names the models the table has no price for: a part
// recorded without its model, "(model not recorded)"; a sum recorded
// without its split, investigation.MixedModels; the part a split had no
// room for, investigation.OtherModels.
func (t Table) Estimates(phases []investigation.PhaseUsage) (cost float64, unpriced []string) {
	for _, ph := range phases {
		for _, u := range ph.Usage.PerModel() {
			c, ok := t.estimate(u)
			cost += c
			if model := cmp.Or(u.Model, noModel); !ok && !slices.Contains(unpriced, model) {
				unpriced = append(unpriced, model)
			}
		}
	}
	return cost, unpriced
}

// estimate prices usage of one model.
func (t Table) estimate(u investigation.Usage) (cost float64, ok bool) {
	if u.Tokens() == 0 {
		return 0, true
	}
	p, ok := t.Lookup(u.Model)
	if !ok {
		return 0, false
	}
	return (float64(u.PromptTokens)*p.Input + float64(u.OutputTokens+u.ThoughtTokens)*p.Output) / 1e6, true
}

// noModel stands for usage recorded without its model (by an older worker).
const noModel = "(model not recorded)"
