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

// Catalog asks a worker for its tools and model through the ToolCatalog
// workflow, waiting at most the call timeout for the round trip (a worker
// answers at once). A worker from before the model was reported answers
// with the tools only (a JSON list); its Model is then empty.
func (c *Client) Catalog(ctx context.Context) (investigation.Catalog, error) {
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	run, err := c.tc.ExecuteWorkflow(cctx, client.StartWorkflowOptions{
		ID:                       "tool-catalog-" + time.Now().UTC().Format("20060102-150405.000000"),
		TaskQueue:                c.cfg.TaskQueue,
		WorkflowExecutionTimeout: time.Minute,
		StaticSummary:            "list the worker's tools",
	}, investigation.CatalogWorkflowName)
	if err != nil {
		if ctx.Err() == nil && cctx.Err() != nil {
			return investigation.Catalog{}, &UnavailableError{c.unreachable()}
		}
		return investigation.Catalog{}, fmt.Errorf("ask the worker for its tools: %w", err)
	}
	var raw json.RawMessage
	if err := run.Get(cctx, &raw); err != nil {
		if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			return investigation.Catalog{}, fmt.Errorf("no worker answered on task queue %q within %s: is the worker running?", c.cfg.TaskQueue, c.timeout)
		}
		return investigation.Catalog{}, fmt.Errorf("list tools: %s", FailureMessage(err))
	}
	return decodeCatalog(raw)
}

// decodeCatalog reads the ToolCatalog workflow's result.
func decodeCatalog(raw json.RawMessage) (investigation.Catalog, error) {
	var err error
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
