package workflows

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/activities/bigquery"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// bq only names the sub-agent's activity methods; the worker registers the
// real value.
var bq *bigquery.Activities

// Sub-agent limits.
const (
	bigQueryMaxIterations = 10
	bigQueryTimeout       = 30 * time.Minute
)

// startBigQueryAgent starts the BigQuery sub-agent for one bigquery_agent
// call as a child workflow. Its ID is derived from the parent's ID and the
// call's transcript key, so two calls never collide and a replayed or
// retried parent never starts a second child for the same call. The
// parent-close policy is REQUEST_CANCEL: the child's answer is only useful
// to this parent, and cancellation (unlike termination) lets it stop
// between activities.
func (r *run) startBigQueryAgent(ctx workflow.Context, key string, c toolcall.Call) workflow.Future {
	request, _ := c.Args["request"].(string)
	request = strings.TrimSpace(request)
	if request == "" {
		f, s := workflow.NewFuture(ctx)
		s.SetError(temporal.NewNonRetryableApplicationError(toolcall.BigQueryAgent+` needs a "request": a concrete log question`, "BadArguments", nil))
		return f
	}
	opts := workflow.ChildWorkflowOptions{
		WorkflowID:               childID(r.session, key),
		StaticSummary:            clip.String("BigQuery: "+request, 200),
		ParentClosePolicy:        enums.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WorkflowExecutionTimeout: bigQueryTimeout,
	}
	if slices.Contains(r.Input.SearchAttributes, investigation.SearchAttribute) {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(investigation.SearchAttribute).ValueSet(r.Input.AlertID))
	}
	return workflow.ExecuteChildWorkflow(workflow.WithChildOptions(ctx, opts), investigation.BigQueryWorkflowName, bigquery.Request{
		Request:        request,
		ParentSession:  r.session,
		ResultKey:      key,
		CallID:         c.ID,
		MaxIterations:  bigQueryMaxIterations,
		MaxResultBytes: r.Input.Limits.MaxToolResultBytes,
	})
}

// childID is the workflow ID of the sub-agent run for one call: the
// parent's ID and the call's transcript key.
func childID(parent, key string) string { return parent + "-bq-" + key }

// BigQueryAgent answers one log question: it recalls memories relevant to
// the request, runs its own tool loop over BigQuery, introspects over the
// whole session to learn (best effort: a failure never fails the
// sub-agent), and stores its answer as the parent's tool result, linked to
// this run.
func BigQueryAgent(ctx workflow.Context, in bigquery.Request) (activities.ToolOutput, error) {
	info := workflow.GetInfo(ctx)
	h := &subAgent{session: info.WorkflowExecution.ID, in: in}
	if err := workflow.SetQueryHandler(ctx, investigation.ProgressQuery, func(after int) ([]investigation.Event, error) {
		return page(h.events, after), nil
	}); err != nil {
		return activities.ToolOutput{}, err
	}
	if h.in.MaxIterations <= 0 {
		h.in.MaxIterations = bigQueryMaxIterations
	}
	if h.in.MaxResultBytes <= 0 {
		h.in.MaxResultBytes = investigation.DefaultMaxToolResultBytes
	}

	if err := workflow.ExecuteActivity(llmOptions(ctx, "recall memories"), bq.RecallMemories, bigquery.RecallInput{Request: in.Request}).Get(ctx, &h.recall); err != nil {
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: "Memory recall failed, continuing without memories: " + message(err)})
	}
	ids := make([]string, len(h.recall.Memories))
	for i, m := range h.recall.Memories {
		ids[i] = m.ID
	}
	h.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("Recalled %d memories", len(ids)), Notes: ids})

	l := &toolLoop{host: h, session: h.session, prefix: "bq", label: "bigquery", maxIter: h.in.MaxIterations, maxBytes: h.in.MaxResultBytes, results: map[string]string{}}
	res, err := l.run(ctx)
	if err != nil {
		return activities.ToolOutput{}, failure("the BigQuery sub-agent failed", err)
	}
	h.learn(ctx, res)

	var out activities.ToolOutput
	err = workflow.ExecuteActivity(storeOptions(ctx, "deliver answer"), bq.DeliverAnswer, bigquery.DeliverInput{
		ParentSession:  in.ParentSession,
		ResultKey:      in.ResultKey,
		CallID:         in.CallID,
		Tool:           toolcall.BigQueryAgent,
		Answer:         res.Text,
		Link:           activities.ChildLink{WorkflowID: h.session, RunID: info.WorkflowExecution.RunID},
		MaxResultBytes: in.MaxResultBytes,
	}).Get(ctx, &out)
	return out, err
}

// subAgent is the BigQuery sub-agent's run and its tool loop's host.
type subAgent struct {
	session string
	in      bigquery.Request
	recall  bigquery.Recall
	events  []investigation.Event
}

// learn introspects over the whole session and saves what it learned; both
// are best effort.
func (h *subAgent) learn(ctx workflow.Context, res loopResult) {
	var intro bigquery.Introspection
	if err := workflow.ExecuteActivity(llmOptions(ctx, "introspect"), bq.Introspect, bigquery.IntrospectInput{
		Session: h.session, Request: h.in.Request, Memories: h.recall.Memories, Transcript: res.Transcript, Answer: res.Text,
	}).Get(ctx, &intro); err != nil {
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: "Introspection failed; nothing learned this time: " + message(err)})
		return
	}
	var changes bigquery.MemoryChanges
	if err := workflow.ExecuteActivity(storeOptions(ctx, "update memories"), bq.UpdateMemories, bigquery.MemoryUpdate{
		Session: h.session, Request: h.in.Request, Claims: intro.Claims, Helpful: intro.Helpful, Harmful: intro.Harmful,
	}).Get(ctx, &changes); err != nil {
		h.emit(investigation.Event{Kind: investigation.EventNote, Text: "Saving memories failed: " + message(err)})
		return
	}
	h.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("Learned %d claims; %d helpful, %d harmful memories; %d pruned",
		len(changes.Saved), len(intro.Helpful), len(intro.Harmful), len(changes.Deleted))})
}

func (h *subAgent) modelTurn(ctx workflow.Context, iter int, key string, transcript []activities.Ref, final bool) (activities.TurnOutput, error) {
	var out activities.TurnOutput
	err := workflow.ExecuteActivity(llmOptions(ctx, fmt.Sprintf("bigquery turn %d", iter)), bq.SubAgentTurn, bigquery.SubAgentTurnInput{
		Session:    h.session,
		Key:        key,
		Request:    h.in.Request,
		Memories:   h.recall.Memories,
		Transcript: transcript,
		Final:      final,
	}).Get(ctx, &out)
	return out, err
}

func (h *subAgent) mustAnswer(workflow.Context, int) string { return "" }

func (h *subAgent) callsLeft(int) int { return math.MaxInt }

func (h *subAgent) emit(e investigation.Event) {
	e.Seq = len(h.events) + 1
	h.events = append(h.events, e)
}

func (h *subAgent) tool(name string) toolcall.Tool {
	return toolcall.Tool{Name: name, Kind: toolcall.Activity}
}

func (h *subAgent) toolset() string { return bigquery.Toolset }

func (h *subAgent) startSpecial(ctx workflow.Context, _ string, _ toolcall.Tool, c toolcall.Call) workflow.Future {
	f, settle := workflow.NewFuture(ctx)
	settle.SetError(temporal.NewNonRetryableApplicationError("the sub-agent cannot run "+c.Name, "UnknownTool", nil))
	return f
}
