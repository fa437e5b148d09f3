package agentclient

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
)

// Node is a workflow of a run tree.
type Node struct {
	Type, ID string
	// Status is the workflow's status as the Web UI names it ("Running").
	Status string
	// Request is what the parent asked of a child (a BigQuery sub-agent's
	// request), decoded from its start input; "" for the root.
	Request string
	// Runs are the workflow's runs, oldest first (more than one when it
	// continued as new); the last one is the latest.
	Runs []Run
}

// Run is one run of a workflow and the child workflows it started.
type Run struct {
	ID       string
	Children []Node
}

// Tree reads a workflow and, below it, every child workflow that any of
// its runs started, from their histories; each call to Temporal is bounded
// by the call timeout.
func (c *Client) Tree(ctx context.Context, id string) (Node, error) {
	return c.tree(ctx, id, "", true)
}

// tree reads the workflow id and its children; root is the workflow the
// user named, whose absence is said as every command says it.
func (c *Client) tree(ctx context.Context, id, request string, root bool) (Node, error) {
	var desc *workflowservice.DescribeWorkflowExecutionResponse
	err := c.call(ctx, func(ctx context.Context) (err error) {
		desc, err = c.tc.DescribeWorkflowExecution(ctx, id, "")
		return err
	})
	if IsUnavailable(err) {
		return Node{}, err
	}
	if root && IsNotFound(err) {
		return Node{}, fmt.Errorf("no investigation with ID %s", id)
	}
	if err != nil {
		return Node{}, fmt.Errorf("describe workflow %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	latest := info.GetExecution().GetRunId()
	first := info.GetFirstRunId()
	if first == "" {
		first = latest
	}
	runs, err := extendRuns(ctx, c.src, id, []string{first}, latest)
	if err != nil {
		// A reset ends the run it resets (terminated, no next run) and
		// starts one holding that run's history up to the reset point:
		// walk back from the latest run instead, which skips it.
		back, berr := c.runsBefore(ctx, id, latest)
		if berr != nil {
			return Node{}, fmt.Errorf("find the runs of %s: %w", id, err)
		}
		runs = back
	}
	n := Node{Type: info.GetType().GetName(), ID: id, Request: request,
		Status: strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")}
	for _, run := range runs {
		r := Run{ID: run}
		var started []child
		if err := c.call(ctx, func(ctx context.Context) (err error) {
			started, err = c.childrenOf(ctx, id, run)
			return err
		}); err != nil {
			return Node{}, err
		}
		for _, ch := range started {
			cn, err := c.tree(ctx, ch.id, ch.request, false)
			if err != nil {
				return Node{}, err
			}
			r.Children = append(r.Children, cn)
		}
		n.Runs = append(n.Runs, r)
	}
	return n, nil
}

// runsBefore returns the runs that led to latest, oldest first, from the
// run each one's start event says it continued from. A run a reset made
// starts with its base run's start event, so the chain it gives leaves out
// the run the reset ended.
func (c *Client) runsBefore(ctx context.Context, id, latest string) ([]string, error) {
	runs := []string{latest}
	for run := latest; ; {
		var prev string
		if err := c.call(ctx, func(ctx context.Context) (err error) {
			prev, err = c.continuedFrom(ctx, id, run)
			return err
		}); err != nil {
			return nil, err
		}
		if prev == "" {
			break
		}
		if len(runs) > 10000 {
			return nil, fmt.Errorf("%s has more than 10000 runs", id)
		}
		runs, run = append(runs, prev), prev
	}
	slices.Reverse(runs)
	return runs, nil
}

// continuedFrom returns the run that runID continued from, as its first
// history event (the start) says, or "" for a first run.
func (c *Client) continuedFrom(ctx context.Context, id, runID string) (string, error) {
	it := c.tc.GetWorkflowHistory(ctx, id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return "", fmt.Errorf("run %s of %s has no history", runID, id)
	}
	e, err := it.Next()
	if err != nil {
		return "", err
	}
	start := e.GetWorkflowExecutionStartedEventAttributes()
	if start == nil {
		return "", fmt.Errorf("the history of run %s of %s does not begin with its start", runID, id)
	}
	return start.GetContinuedExecutionRunId(), nil
}

// child is one child workflow started by a run, as its history records it.
type child struct {
	id, request string
}

// childrenOf reads the child workflows a run started from its history. The
// request is decoded with the client's data converter, so it reads the same
// from a history whose payloads are encrypted (given the key).
func (c *Client) childrenOf(ctx context.Context, id, runID string) ([]child, error) {
	it := c.tc.GetWorkflowHistory(ctx, id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []child
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history of %s (run %s): %w", id, runID, err)
		}
		if at := e.GetStartChildWorkflowExecutionInitiatedEventAttributes(); at != nil {
			ch := child{id: at.GetWorkflowId()}
			var req struct {
				Request string `json:"request"`
			}
			if p := at.GetInput().GetPayloads(); len(p) > 0 && c.dc.FromPayload(p[0], &req) == nil {
				ch.request = req.Request
			}
			out = append(out, ch)
		}
	}
	return out, nil
}
