package activities

import (
	"context"

	"github.com/secops-agent/investigator/investigation"
)

// DescribeTools lists the worker's tools, enabled or not, with the reason a
// tool is off, and the model endpoint, so `starter tools` and `starter eval`
// show the worker's real configuration.
func (a *Activities) DescribeTools(context.Context) (investigation.Catalog, error) {
	cat := investigation.Catalog{Tools: a.Tools.Statuses(), Model: a.Endpoint}
	if a.MCP != nil {
		cat.MCP = a.MCP.Statuses()
	}
	return cat, nil
}
