package bqtools

import (
	"context"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/tools"
)

// runbookTool is bigquery_runbook: the vetted SQL files.
type runbookTool struct{ runbooks []Runbook }

func (runbookTool) Purpose() string {
	return "List or read ready-made SQL runbooks for common log questions."
}

func (runbookTool) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: "bigquery_runbook",
		Description: "Vetted SQL runbooks for common investigations. Without name, lists them: {runbooks:[{name, title, description}]}. " +
			"With name, returns {name, title, description, sql}; run the sql with bigquery_query, after filling in any parameters its description names. " +
			"Example: name \"failed_ssh_by_ip\".",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"name": {Type: genai.TypeString, Description: "The runbook's name from the list; omit it to list the runbooks."},
			},
		},
	}
}

func (t runbookTool) Call(ctx context.Context, args map[string]any) (any, error) {
	name, err := tools.StringArg(args, "name", false, 200)
	if err != nil {
		return nil, err
	}
	if name == "" {
		type entry struct {
			Name        string `json:"name"`
			Title       string `json:"title"`
			Description string `json:"description,omitempty"`
		}
		out := struct {
			Runbooks []entry `json:"runbooks"`
		}{Runbooks: make([]entry, 0, len(t.runbooks))}
		for _, rb := range t.runbooks {
			out.Runbooks = append(out.Runbooks, entry{rb.Name, rb.Title, rb.Description})
		}
		return out, nil
	}
	name = strings.TrimSuffix(name, ".sql")
	for _, rb := range t.runbooks {
		if rb.Name == name {
			return rb, nil
		}
	}
	names := make([]string, len(t.runbooks))
	for i, rb := range t.runbooks {
		names[i] = rb.Name
	}
	return nil, tools.Reject("no runbook named %q; the runbooks are: %s", name, strings.Join(names, ", "))
}
