package prompt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"text/template"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/clip"
)

// Set is the prompt templates of one package: name.md files that define
// "name/system" and "name/user" (or just "name"), with name.schema.json and
// name.example.json beside them.
type Set struct {
	fsys fs.FS
	t    *template.Template
}

// Funcs available in every template. data, json and rule depend on the
// prompt's tag: Render binds them (the ones here only let templates parse).
var funcs = template.FuncMap{
	// data renders a string as a data block: {{data "alert" .Text}}.
	"data": Tag("").Block,
	// json renders any value as a JSON data block.
	"json": Tag("").JSONBlock,
	// rule is the data rule naming the prompt's tag.
	"rule": Tag("").Rule,
	// quote writes a text from outside the product as one quoted line.
	"quote": Quote,
	// join lists strings, or "(none)".
	"join": func(s []string) string {
		if len(s) == 0 {
			return "(none)"
		}
		return strings.Join(s, ", ")
	},
	"clip": func(n int, s string) string { return clip.String(s, n) },
}

// Load parses every *.md under dir of fsys. It panics on a template that
// does not parse: the files are embedded, so that is a build defect.
func Load(fsys fs.FS, dir string) *Set {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return &Set{fsys: sub, t: template.Must(template.New("").Funcs(funcs).ParseFS(sub, "*.md"))}
}

// Render fills the named template ("plan/system", "reflect") with data,
// its blocks and data rule marked with tag. The parts of one prompt (its
// system instruction and user text) share one tag.
func (s *Set) Render(name string, tag Tag, data any) (string, error) {
	if tag == "" {
		return "", fmt.Errorf("render the %s prompt: no block tag", name)
	}
	t, err := s.t.Clone()
	if err != nil {
		return "", fmt.Errorf("render the %s prompt: %w", name, err)
	}
	t.Funcs(template.FuncMap{"data": tag.Block, "json": tag.JSONBlock, "rule": tag.Rule})
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("render the %s prompt: %w", name, err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}

// Phases of the agent whose answers are structured. Each response schema
// carries its phase as its title, so a Gemini-protocol server (the offline
// demo, tests) tells the phases apart without reading prompt text.
const (
	PhasePlan       = "plan"
	PhaseReflect    = "reflect"
	PhaseConclude   = "conclude"
	PhaseMode       = "mode"
	PhaseIntrospect = "introspect"
	// PhaseVerdict reviews the standing verdict after a direct answer.
	PhaseVerdict = "verdict"
)

// Labels of the lines the prompts give in the open, before any data block:
// a Gemini-protocol server (the offline demo) reads the alert's ID from the
// AlertIDLabel line and the step to execute after StepHeading.
const (
	AlertIDLabel = "Alert ID: "
	StepHeading  = "## Execute this step"
)

// Schema loads phase.schema.json as a response schema titled with the
// phase; it panics on a missing or invalid file (a build defect).
func (s *Set) Schema(phase string) *genai.Schema {
	var out genai.Schema
	if err := json.Unmarshal(s.file(phase+".schema.json"), &out); err != nil {
		panic(fmt.Sprintf("%s.schema.json: %v", phase, err))
	}
	out.Title = phase
	return &out
}

// Example returns name.example.json, trimmed.
func (s *Set) Example(name string) string {
	return strings.TrimSpace(string(s.file(name + ".example.json")))
}

func (s *Set) file(name string) []byte {
	b, err := fs.ReadFile(s.fsys, name)
	if err != nil {
		panic(err)
	}
	return b
}
