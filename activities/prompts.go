package activities

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	"google.golang.org/genai"
)

//go:embed prompts
var promptFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"join": func(s []string) string {
		if len(s) == 0 {
			return "(none)"
		}
		return strings.Join(s, ", ")
	},
}).ParseFS(promptFS, "prompts/*.md"))

// render fills the named prompt template.
func render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name+".md", data); err != nil {
		return "", fmt.Errorf("render %s prompt: %w", name, err)
	}
	return b.String(), nil
}

// schema loads the response schema stored beside a prompt.
func schema(name string) *genai.Schema {
	raw, err := promptFS.ReadFile("prompts/" + name + ".schema.json")
	if err != nil {
		panic(err) // embedded at build time: a missing file is a build defect
	}
	var s genai.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		panic(fmt.Sprintf("prompts/%s.schema.json: %v", name, err))
	}
	return &s
}

var (
	planSchema    = schema("plan")
	reflectSchema = schema("reflect")
	planExample   = mustRead("prompts/plan.example.json")
)

func mustRead(name string) string {
	b, err := promptFS.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return strings.TrimSpace(string(b))
}
