package bigquery

import (
	"embed"

	"github.com/secops-agent/investigator/internal/prompt"
)

// The sub-agent's prompts: prompts/subagent.md (its model turns) and
// prompts/introspect.md with its response schema and example.
//
//go:embed prompts
var promptFS embed.FS

var (
	prompts           = prompt.Load(promptFS, "prompts")
	introspectSchema  = prompts.Schema(prompt.PhaseIntrospect)
	introspectExample = prompts.Example(prompt.PhaseIntrospect)
)

// render fills "<name>/system" and "<name>/user" with the same data; the
// two parts of the prompt share one random block tag.
func render(name string, data any) (system, user string, err error) {
	tag := prompt.NewTag()
	if system, err = prompts.Render(name+"/system", tag, data); err != nil {
		return "", "", err
	}
	user, err = prompts.Render(name+"/user", tag, data)
	return system, user, err
}
