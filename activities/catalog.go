package activities

import (
	"context"

	"github.com/secops-agent/investigator/tools"
)

// DescribeTools lists the worker's tools, enabled or not, with the reason a
// tool is off, so `starter tools` shows the worker's real configuration.
func (a *Activities) DescribeTools(context.Context) ([]tools.Status, error) {
	return a.Tools.Statuses(), nil
}
