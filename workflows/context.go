package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
)

// storesContext is the change ID of the gate under which the run keeps what
// grows with it (the conversation, hints, earlier insights, the steps that
// ran, the standing verdict) in the store and activity inputs name it by
// key, and writes its progress events beside the transcript (progress.go).
// Histories recorded before it carry the context inline.
const storesContext = "store-context-and-progress"

// inlineContext is the most an input carries inline of the context: a
// smaller one costs less than the store write's marker and the key (a
// first exchange's context is that small), a larger one goes by key.
const inlineContext = 2 << 10

// contextAttempt bounds one attempt of a store write run as a local
// activity: Firestore answers in milliseconds, and a longer attempt would
// hold the workflow task.
const contextAttempt = 10 * time.Second

// storeOptions for a local activity: a write of the product's own store.
func localStoreOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: toolRetryBudget,
		StartToCloseTimeout:    contextAttempt,
		Summary:                summary,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
	})
}

// context returns the key of the stored Context as the state has it now,
// storing it first if this run has not (a local activity: its input, up to
// the bounds of bounds.go, never enters history; only a marker does). ""
// means the caller carries the context inline: a history recorded before
// the gate, a context of at most inlineContext bytes, or a store that
// failed for the whole retry budget.
func (r *run) context(ctx workflow.Context) string {
	if !r.storesContext {
		return ""
	}
	current, earlier := r.splitInsights()
	c := activities.Context{History: r.History, Hints: r.Steering.Hints, Earlier: earlier, Ran: r.Ran, Standing: r.Verdict,
		Insights: current, Plan: planWithoutResults(&r.Plan), ActivePlan: planWithoutResults(r.ActivePlan)}
	if r.requestInContext {
		c.Request = r.Request
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return ""
	}
	if len(raw) <= inlineContext {
		return ""
	}
	sum := sha256.Sum256(raw)
	key := "context-" + hex.EncodeToString(sum[:12])
	if r.contextWrites == nil {
		r.contextWrites = map[string]workflow.Future{}
	}
	f, ok := r.contextWrites[key]
	if !ok {
		// Parallel steps asking at once share one write; it takes the
		// progress events not yet stored along, unless the progress writer
		// is busy (events are written in order).
		in := activities.ContextInput{Session: r.session, Key: key, Context: c}
		took := !r.writing && len(r.unstored) > 0 && !waitsAfter(r.unstored)
		if took {
			st, _ := r.status()
			raw, _ := json.Marshal(st)
			in.Progress = activities.ProgressInput{Session: r.session, Events: r.unstored, Status: &st}
			r.unstored, r.writing, r.statusStored = nil, true, sha256.Sum256(raw)
		}
		f = workflow.ExecuteLocalActivity(localStoreOptions(ctx, "store the context"), a.StoreContext, in)
		r.contextWrites = map[string]workflow.Future{key: f} // only the latest is asked for again
		if took {
			defer func() { r.writing = false }()
		}
	}
	if err := f.Get(ctx, nil); err != nil {
		delete(r.contextWrites, key)
		return ""
	}
	return key
}

// startProgressWriter writes the run's progress events, and its status
// after them, into the store as they are emitted: one local activity per
// workflow task that emitted any (its input, the events' text included,
// never enters history). It runs in a disconnected context, so the events
// of a cancelled run are written too. Histories recorded before the
// storesContext gate write nothing.
func (r *run) startProgressWriter(ctx workflow.Context) {
	if !r.storesContext {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(dctx, func(ctx workflow.Context) {
		for {
			// A context write may carry events too (run.context): one at a time.
			if err := workflow.Await(ctx, func() bool { return !r.writing && (len(r.unstored) > 0 || r.flushing) }); err != nil {
				return
			}
			batch, final := r.unstored, r.flushing
			st, _ := r.status()
			raw, _ := json.Marshal(st)
			sum := sha256.Sum256(raw)
			if len(batch) == 0 && sum == r.statusStored {
				r.flushing = false // nothing new since the last write
				continue
			}
			r.unstored, r.writing, r.statusStored = nil, true, sum
			in := activities.ProgressInput{Session: r.session, Events: batch, Status: &st}
			if final || waitsAfter(batch) {
				// The run stops here: everything since the last such
				// write goes again (the worker skips what it committed),
				// in case a worker died before writing what it held.
				in.Wait, in.Events = true, r.eventsAfterSeq(r.synced)
			}
			err := workflow.ExecuteLocalActivity(localStoreOptions(ctx, "store progress"), a.StoreProgress, in).Get(ctx, nil)
			r.writing = false
			if err != nil {
				// The events stay in the run, where the progress query reads them.
				workflow.GetLogger(ctx).Warn("progress events not stored", "events", len(in.Events), "error", err)
			} else if in.Wait && len(in.Events) > 0 {
				r.synced = in.Events[len(in.Events)-1].Seq
			}
			if final && len(r.unstored) == 0 {
				r.flushing = false
			}
		}
	})
}

// withoutRequest is "" where an input that names the stored context
// (key) would carry request, if the context holds it: only the run's
// current request is stored there.
func (r *run) withoutRequest(key, request string) string {
	if key != "" && r.requestInContext && request == r.Request {
		return ""
	}
	return request
}

// waitsAfter says the run waits for a person after these events (a
// question, a plan or an action to approve, follow-ups): they are written
// before the workflow task ends, not behind it.
func waitsAfter(events []investigation.Event) bool {
	for _, e := range events {
		switch e.Kind {
		case investigation.EventQuestion, investigation.EventApproval, investigation.EventApprovalRequested, investigation.EventIdle:
			return true
		}
	}
	return false
}

// eventsAfterSeq are the events this run still holds numbered above seq.
func (r *run) eventsAfterSeq(seq int) []investigation.Event {
	i := max(seq-r.LastSeq-r.dropped, 0)
	if i >= len(r.events) {
		return nil
	}
	return r.events[i:]
}

// flushProgress waits until every event and the latest status are stored,
// before the run closes or continues as new; once only (noteHandedBack
// reopens the run for one more).
func (r *run) flushProgress(ctx workflow.Context) {
	if !r.storesContext || r.closed {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	// The run has said its last: what other coroutines do while it waits
	// (a cancelled call noting it was cut short) is not news any more.
	r.closed = true
	r.flushing = true
	_ = workflow.Await(dctx, func() bool { return !r.flushing && !r.writing })
}
