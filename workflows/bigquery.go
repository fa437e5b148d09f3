package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// Sub-agent limits.
const (
	bigQueryMaxIterations = 10
	bigQueryTimeout       = 30 * time.Minute
)

// startBigQueryAgent starts the BigQuery sub-agent for one bigquery_agent
// call as a child workflow. Its ID is derived from the parent's ID and the
// call's transcript key, so two calls never collide and a replayed or retried
// parent never starts a second child for the same call. The parent-close
// policy is REQUEST_CANCEL: the child's answer is only useful to this parent,
// and cancellation (unlike termination) lets it stop between activities.
func (r *run) startBigQueryAgent(ctx workflow.Context, key string, c toolcall.Call) workflow.Future {
	request, _ := c.Args["request"].(string)
	request = strings.TrimSpace(request)
	if request == "" {
		f, s := workflow.NewFuture(ctx)
		s.SetError(temporal.NewNonRetryableApplicationError(`bigquery_agent needs a "request": a concrete log question`, "BadArguments", nil))
		return f
	}
	opts := workflow.ChildWorkflowOptions{
		WorkflowID:               childID(r.session, key),
		StaticSummary:            clip.String("BigQuery: "+request, 200),
		ParentClosePolicy:        enums.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WorkflowExecutionTimeout: bigQueryTimeout,
	}
	if slices.Contains(r.in.SearchAttributes, investigation.SearchAttribute) {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(investigation.SearchAttribute).ValueSet(r.in.AlertID))
	}
	ctx = workflow.WithChildOptions(ctx, opts)
	return workflow.ExecuteChildWorkflow(ctx, investigation.BigQueryWorkflowName, investigation.BigQueryRequest{
		Request:        request,
		ParentSession:  r.session,
		ResultKey:      key,
		CallID:         c.ID,
		MaxIterations:  bigQueryMaxIterations,
		MaxResultBytes: r.in.Limits.MaxToolResultBytes,
	})
}

// childID is the workflow ID of the sub-agent run for one call: the
// parent's ID and the call's transcript key.
func childID(parent, key string) string { return parent + "-bq-" + key }

// BigQueryAgent answers one log question: it recalls memories relevant to the
// request, runs its own tool loop over BigQuery, introspects over the whole
// session to learn (best effort: a failure never fails the sub-agent), and
// stores its answer as the parent's tool result, linked to this run.
func BigQueryAgent(ctx workflow.Context, in investigation.BigQueryRequest) (investigation.ToolOutput, error) {
	info := workflow.GetInfo(ctx)
	session := info.WorkflowExecution.ID
	var events []investigation.Event
	emit := func(e investigation.Event) {
		e.Seq = len(events) + 1
		events = append(events, e)
	}
	if err := workflow.SetQueryHandler(ctx, investigation.ProgressQuery, func(after int) ([]investigation.Event, error) {
		return page(events, after), nil
	}); err != nil {
		return investigation.ToolOutput{}, err
	}
	if in.MaxIterations <= 0 {
		in.MaxIterations = bigQueryMaxIterations
	}
	if in.MaxResultBytes <= 0 {
		in.MaxResultBytes = investigation.DefaultMaxToolResultBytes
	}

	var rec investigation.Recall
	if err := workflow.ExecuteActivity(llmOptions(ctx, "recall memories"), a.RecallMemories, investigation.RecallInput{Request: in.Request}).Get(ctx, &rec); err != nil {
		emit(investigation.Event{Kind: investigation.EventNote, Text: "Memory recall failed, continuing without memories: " + message(err)})
	}
	ids := make([]string, len(rec.Memories))
	for i, m := range rec.Memories {
		ids[i] = m.ID
	}
	emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("Recalled %d memories", len(ids)), Items: ids})

	l := &toolLoop{
		session:  session,
		prefix:   "bq",
		label:    "bigquery",
		toolset:  investigation.ToolsetBigQuery,
		maxIter:  in.MaxIterations,
		maxBytes: in.MaxResultBytes,
		pipeline: true,
		guarded:  workflow.GetVersion(ctx, "guarded-runs", workflow.DefaultVersion, 1) >= 1,
		results:  map[string]string{},
		emit:     emit,
		turn: func(ctx workflow.Context, iter int, key string, transcript []investigation.Ref, final bool) (investigation.TurnOutput, error) {
			var out investigation.TurnOutput
			err := workflow.ExecuteActivity(llmOptions(ctx, fmt.Sprintf("bigquery turn %d", iter)), a.SubAgentTurn, investigation.SubAgentTurnInput{
				Session:    session,
				Key:        key,
				Request:    in.Request,
				Memories:   rec.Memories,
				Transcript: transcript,
				Final:      final,
			}).Get(ctx, &out)
			return out, err
		},
	}
	answer, _, err := l.run(ctx)
	if err != nil {
		return investigation.ToolOutput{}, failure("the BigQuery sub-agent failed", err)
	}

	var intro investigation.Introspection
	err = workflow.ExecuteActivity(llmOptions(ctx, "introspect"), a.Introspect, investigation.IntrospectInput{
		Session: session, Request: in.Request, Memories: rec.Memories, Transcript: l.transcript, Answer: answer,
	}).Get(ctx, &intro)
	if err != nil {
		emit(investigation.Event{Kind: investigation.EventNote, Text: "Introspection failed; nothing learned this time: " + message(err)})
	} else {
		var changes investigation.MemoryChanges
		if err := workflow.ExecuteActivity(storeOptions(ctx, "update memories"), a.UpdateMemories, investigation.MemoryUpdate{
			Session: session, Request: in.Request, Claims: intro.Claims, Helpful: intro.Helpful, Harmful: intro.Harmful,
		}).Get(ctx, &changes); err != nil {
			emit(investigation.Event{Kind: investigation.EventNote, Text: "Saving memories failed: " + message(err)})
		} else {
			emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("Learned %d claims; %d helpful, %d harmful memories; %d pruned",
				len(changes.Saved), len(intro.Helpful), len(intro.Harmful), len(changes.Deleted))})
		}
	}

	var out investigation.ToolOutput
	err = workflow.ExecuteActivity(storeOptions(ctx, "deliver answer"), a.DeliverAnswer, investigation.DeliverInput{
		ParentSession:  in.ParentSession,
		ResultKey:      in.ResultKey,
		CallID:         in.CallID,
		Tool:           toolcall.BigQueryAgent,
		Answer:         answer,
		Link:           investigation.ChildLink{WorkflowID: session, RunID: info.WorkflowExecution.RunID},
		MaxResultBytes: in.MaxResultBytes,
	}).Get(ctx, &out)
	return out, err
}

// storeOptions are the activity options of a Firestore write.
func storeOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		Summary:             summary,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 5},
	})
}
