package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/investigation"
)

// CatalogTimeout bounds the ToolCatalog round trip: a worker answers it at once.
const CatalogTimeout = 20 * time.Second

// Catalog asks a worker for its tools and model through the ToolCatalog
// workflow. A worker from before the model was reported answers with the
// tools only (a JSON list); its Model is then empty.
func (c *Client) Catalog(ctx context.Context) (investigation.Catalog, error) {
	ctx, cancel := context.WithTimeout(ctx, CatalogTimeout)
	defer cancel()
	run, err := c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       "tool-catalog-" + time.Now().UTC().Format("20060102-150405.000000"),
		TaskQueue:                c.cfg.TaskQueue,
		WorkflowExecutionTimeout: time.Minute,
		StaticSummary:            "list the worker's tools",
	}, investigation.CatalogWorkflowName)
	if err != nil {
		return investigation.Catalog{}, fmt.Errorf("ask the worker for its tools: %w", err)
	}
	var raw json.RawMessage
	if err := run.Get(ctx, &raw); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return investigation.Catalog{}, fmt.Errorf("no worker answered on task queue %q within %s: is the worker running?", c.cfg.TaskQueue, CatalogTimeout)
		}
		return investigation.Catalog{}, fmt.Errorf("list tools: %s", FailureMessage(err))
	}
	var cat investigation.Catalog
	if len(raw) > 0 && raw[0] == '[' {
		err = json.Unmarshal(raw, &cat.Tools)
	} else {
		err = json.Unmarshal(raw, &cat)
	}
	if err != nil {
		return investigation.Catalog{}, fmt.Errorf("the worker's tool catalog could not be read: %v", err)
	}
	return cat, nil
}
