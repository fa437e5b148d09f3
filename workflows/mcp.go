package workflows

import (
	"slices"

	"github.com/secops-agent/investigator/toolcall"
)

// declared are the outside (MCP) tools a step's turns may call, as the
// plan recorded them (State.Tools): those the step names, or every one for
// a direct answer. A server that changed since gives the same turn input.
func (s *State) declared(step []string, direct bool) []toolcall.Tool {
	var out []toolcall.Tool
	for _, t := range s.Tools {
		if t.Declared != nil && (direct || slices.Contains(step, t.Name)) {
			out = append(out, t)
		}
	}
	return out
}
