package activities

import (
	"context"

	"github.com/secops-agent/investigator/investigation"
)

// DescribeTools lists the worker's tools, enabled or not, with the reason a
// tool is off, the model endpoint and the Firestore database, so `starter
// tools` and `starter eval` show the worker's real configuration.
func (a *Activities) DescribeTools(context.Context) (investigation.Catalog, error) {
	cat := investigation.Catalog{Tools: a.Tools.Statuses(), Model: a.Endpoint, Store: a.Store}
	if a.MCP != nil {
		cat.MCP = a.MCP.Statuses()
	}
	return cat, nil
}
