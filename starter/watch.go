package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/investigation"
)

// pollInterval is how often a follower asks for new events (tests shorten it).
var pollInterval = 400 * time.Millisecond

// oldRunPatience is how many failed queries in a row a closed (continued as
// new) run gets before the watcher gives up on its remaining events.
const oldRunPatience = 25

func (a *app) watchCommand() *cobra.Command {
	var from int
	cmd := &cobra.Command{
		Use:   "watch ID",
		Short: "Follow an investigation's progress live, from its first event, across follow-ups and runs",
		Long: `Prints an investigation's progress events from the first one (or --from N)
as they happen: plan, steps, tool calls, insights, questions, hints,
conclusions, follow-up turns, and the events of its BigQuery sub-agent runs
(indented, prefixed [bigquery]). Attach at any time, from any terminal, as
often as you like: nothing is missed or printed twice, also when the
investigation continues as new. Stops when the investigation closes; Ctrl-C
stops watching, not the investigation, and prints the --from N that resumes
after the last event shown.`,
		Example: `  starter watch investigation-guardduty-3f9a1c0d2b4e-20250101-120000.000
  starter watch investigation-guardduty-3f9a1c0d2b4e-20250101-120000.000 --from 42`,
		Args: idArgs("an investigation ID", 0, 0, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from < 1 {
				return fmt.Errorf("--from must be 1 or more (the first event is 1), not %d", from)
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			defer c.Close()
			return a.watch(cmd.Context(), temporalStream{c}, cmd.OutOrStdout(), args[0], from)
		},
	}
	cmd.Flags().IntVar(&from, "from", 1, "first event to print (event numbers continue across runs)")
	return cmd
}

func (a *app) watch(ctx context.Context, src stream, out io.Writer, id string, from int) error {
	f := newFollower(src, id, out, a.temporal.TaskQueue)
	f.seq = from - 1
	if err := f.start(ctx, false); err != nil {
		return err
	}
	fmt.Fprintf(out, "Watching investigation %s (Ctrl-C stops watching, not the investigation)\nWeb UI: %s\n\n", id, a.temporal.WorkflowURL(id))
	end, err := f.run(ctx)
	if err != nil {
		return err
	}
	switch end.how {
	case endInterrupted:
		f.stopped()
		return nil
	default:
		return closedLine(ctx, src, out, id, end)
	}
}

// closedLine prints the final status line of a closed investigation, or
// returns its failure as one sentence.
func closedLine(ctx context.Context, src stream, out io.Writer, id string, end followEnd) error {
	if end.status != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		_, err := src.outcome(ctx, id, end.runID)
		if err == nil {
			err = errors.New("it " + statusWord(end.status))
		}
		return fmt.Errorf("investigation %s failed: %s", id, failureMessage(err))
	}
	res, err := src.outcome(ctx, id, end.runID)
	if err != nil {
		fmt.Fprintf(out, "\ninvestigation %s completed\n", id)
		return nil
	}
	fmt.Fprintf(out, "\ninvestigation %s completed after %d tool calls and %d model calls (%d prompt + %d output tokens)\n",
		id, res.ToolCalls, res.Usage.Calls, res.Usage.PromptTokens, res.Usage.OutputTokens)
	return nil
}

// stream is what following an investigation needs from Temporal; the
// follower only talks to it, so tests give it a fake.
type stream interface {
	// describe returns a workflow's run: the latest one when runID is "".
	describe(ctx context.Context, workflowID, runID string) (execution, error)
	// events returns the progress events of one run after event number after.
	events(ctx context.Context, workflowID, runID string, after int) ([]investigation.Event, error)
	// nextRun returns the run that a closed run continued as.
	nextRun(ctx context.Context, workflowID, runID string) (string, error)
	// outcome returns a closed run's result or its failure.
	outcome(ctx context.Context, workflowID, runID string) (investigation.Result, error)
	// status queries the investigation's status (latest run).
	status(ctx context.Context, workflowID string) (investigation.Status, error)
}

// execution is a workflow run as DescribeWorkflowExecution reports it.
type execution struct {
	runID, firstRunID string
	status            enums.WorkflowExecutionStatus
}

// closed says the run ended for good: a run that continued as new lives on
// in its next run.
func (e execution) closed() bool {
	switch e.status {
	case enums.WORKFLOW_EXECUTION_STATUS_RUNNING, enums.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED, enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return false
	}
	return true
}

// temporalStream is the stream of a real Temporal client.
type temporalStream struct{ c client.Client }

func (t temporalStream) describe(ctx context.Context, id, runID string) (execution, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := t.c.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		return execution{}, err
	}
	info := resp.GetWorkflowExecutionInfo()
	return execution{runID: info.GetExecution().GetRunId(), firstRunID: info.GetFirstRunId(), status: info.GetStatus()}, nil
}

func (t temporalStream) events(ctx context.Context, id, runID string, after int) ([]investigation.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := t.c.QueryWorkflow(ctx, id, runID, investigation.ProgressQuery, after)
	if err != nil {
		return nil, err
	}
	var events []investigation.Event
	if err := v.Get(&events); err != nil {
		return nil, err
	}
	return events, nil
}

func (t temporalStream) nextRun(ctx context.Context, id, runID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	it := t.c.GetWorkflowHistory(ctx, id, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return "", err
		}
		if next := e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId(); next != "" {
			return next, nil
		}
	}
	return "", fmt.Errorf("run %s of %s did not continue as new", runID, id)
}

func (t temporalStream) outcome(ctx context.Context, id, runID string) (investigation.Result, error) {
	var res investigation.Result
	err := t.c.GetWorkflow(ctx, id, runID).Get(ctx, &res)
	return res, err
}

func (t temporalStream) status(ctx context.Context, id string) (investigation.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var st investigation.Status
	v, err := t.c.QueryWorkflow(ctx, id, "", investigation.StatusQuery)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// How following ended.
const (
	endClosed      = iota // the workflow closed and every event was printed
	endUntil              // the stop condition was met by a printed event
	endInterrupted        // the context was cancelled (Ctrl-C)
)

type followEnd struct {
	how    int
	runID  string                        // the last run (endClosed)
	status enums.WorkflowExecutionStatus // its status (endClosed)
}

// follower prints an investigation's progress events in order, each once.
//
// Event numbers (seq) run without gaps across the whole investigation, also
// across continue-as-new: a new run starts numbering where the old one
// stopped, but only holds its own events. The follower keeps the chain of
// runs of the workflow ID (oldest first) and reads one run at a time with the
// progress query, asking for the events after the last one printed and
// printing only the one numbered seq+1, then the next, and so on:
//   - A run that is no longer the latest one is closed, so its events are
//     final: once a query made after that was known returns nothing new, the
//     run is drained and the follower moves to the next run of the chain.
//   - If a run's first unseen event is numbered beyond seq+1, the missing
//     events are in an earlier run (the follower started at the latest run
//     but the event it wants was recorded before a continue-as-new): it steps
//     back one run. If there is none, or the earlier run was just drained,
//     the events are lost for good (retention): it says so and goes on.
//   - A query returns at most investigation.MaxProgressEvents events: after
//     a full page the follower asks again at once, not at the next tick.
//   - It stops when the latest run was closed before a successful query
//     that returned less than a full page, so that query returned every
//     remaining event.
//
// Events naming a child workflow start a child stream, read the same way
// (one run, page after page) in the same tick, printed with a [bigquery]
// prefix until the child closes; a child never holds up the parent's events.
type follower struct {
	src      stream
	id       string
	out      io.Writer
	queue    string
	interval time.Duration
	p        *printer
	// until, when set, ends following once it returns true for a printed event.
	until func(investigation.Event) bool

	seq        int      // the last event printed
	runs       []string // the runs of the workflow ID, oldest first
	idx        int      // the run being read
	drained    bool     // runs[idx-1] was just drained: a gap now is real
	failures   int      // failed queries in a row on the current run
	warned     bool
	printedAny bool
	children   []*childStream
	seen       map[string]bool
}

type childStream struct {
	id       string
	p        *printer
	seq      int
	done     bool
	failures int
}

func newFollower(src stream, id string, out io.Writer, queue string) *follower {
	return &follower{src: src, id: id, out: out, queue: queue, interval: pollInterval, p: &printer{out: out, id: id}, seen: map[string]bool{}}
}

// start finds the chain of runs and where to begin: the first run (watch), or
// the latest one (a new investigation, or a follow-up just asked).
func (f *follower) start(ctx context.Context, atLatest bool) error {
	d, err := f.src.describe(ctx, f.id, "")
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("no investigation with ID %s", f.id)
		}
		return fmt.Errorf("look up investigation %s: %w", f.id, err)
	}
	first := d.firstRunID
	if first == "" {
		first = d.runID
	}
	f.runs = []string{first}
	f.extend(ctx, d.runID)
	if atLatest {
		f.idx = len(f.runs) - 1
	}
	return nil
}

// extend appends the runs after the last known one, up to latest.
func (f *follower) extend(ctx context.Context, latest string) {
	f.runs, _ = extendRuns(ctx, f.src, f.id, f.runs, latest)
}

// extendRuns appends to runs (oldest first) the runs that the last of them
// continued as, up to latest. When a run's successor cannot be read, it
// appends latest right away and returns the error too.
func extendRuns(ctx context.Context, src stream, id string, runs []string, latest string) ([]string, error) {
	for i := 0; runs[len(runs)-1] != latest; i++ {
		last := runs[len(runs)-1]
		next, err := src.nextRun(ctx, id, last)
		switch {
		case err != nil:
		case next == "":
			err = fmt.Errorf("run %s of %s names no next run", last, id)
		case i > 10000:
			err = fmt.Errorf("%s has more than 10000 runs", id)
		}
		if err != nil {
			return append(runs, latest), err
		}
		runs = append(runs, next)
	}
	return runs, nil
}

// stopped says where following was interrupted and how to resume there.
func (f *follower) stopped() {
	at := fmt.Sprintf("after event %d", f.seq)
	if !f.printedAny {
		at = "before any new event"
	}
	fmt.Fprintf(f.out, "\nstopped watching %s; the investigation goes on. Resume with: starter watch %s --from %d\n", at, f.id, f.seq+1)
}

// run follows until the workflow closes, until is met, or ctx ends.
func (f *follower) run(ctx context.Context) (followEnd, error) {
	tick := time.NewTicker(max(f.interval, time.Millisecond))
	defer tick.Stop()
	for {
		end, done, err := f.step(ctx)
		if done || err != nil {
			return end, err
		}
		select {
		case <-ctx.Done():
			return followEnd{how: endInterrupted}, nil
		case <-tick.C:
		}
	}
}

// step reads once from the current run (moving through drained runs) and
// from every open child stream, and prints what is new.
func (f *follower) step(ctx context.Context) (followEnd, bool, error) {
	if ctx.Err() != nil {
		return followEnd{how: endInterrupted}, true, nil
	}
	d, err := f.src.describe(ctx, f.id, "")
	if err != nil {
		if ctx.Err() != nil {
			return followEnd{how: endInterrupted}, true, nil
		}
		if isNotFound(err) {
			return followEnd{}, true, fmt.Errorf("investigation %s is gone (no workflow with this ID any more)", f.id)
		}
		return followEnd{}, false, nil // transient: try again next tick
	}
	f.extend(ctx, d.runID)
	complete := false // the last query read the latest run to its end
	for {
		cur := f.runs[f.idx]
		latest := f.idx == len(f.runs)-1
		events, err := f.src.events(ctx, f.id, cur, f.seq)
		if err != nil {
			if ctx.Err() != nil {
				return followEnd{how: endInterrupted}, true, nil
			}
			if err := f.keyProblem(ctx, err, cur, latest && d.closed()); err != nil {
				return followEnd{}, true, err
			}
			f.failures++
			if !latest && (f.failures >= oldRunPatience || isNotFound(err)) {
				fmt.Fprintf(f.out, "(could not read the remaining events of run %s: %v; going on with the next run)\n", cur, err)
				f.failures, f.idx, f.drained = 0, f.idx+1, true
				continue
			}
			if !f.warned && !f.printedAny && f.failures >= 5 {
				f.warned = true
				fmt.Fprintf(f.out, "(waiting for a worker on task queue %q...)\n", f.queue)
			}
			break
		}
		f.failures = 0
		printed, gapTo, stop := f.take(events)
		if stop {
			f.pollChildren(ctx)
			return followEnd{how: endUntil}, true, nil
		}
		if gapTo > 0 {
			if f.idx > 0 && !f.drained {
				f.idx-- // the missing events were recorded by the run before
				continue
			}
			fmt.Fprintf(f.out, "(events %d to %d are no longer available)\n", f.seq+1, gapTo-1)
			f.seq = gapTo - 1
			f.drained = false
			continue
		}
		if printed > 0 {
			f.drained = false
		}
		if !latest && printed == 0 {
			f.idx++ // this run is closed and drained
			f.drained = true
			continue
		}
		if !latest || (printed > 0 && fullPage(events)) {
			continue // read the rest of the closed run, or the next page, now
		}
		complete = true
		break
	}
	f.pollChildren(ctx)
	if complete && f.runs[f.idx] == d.runID && d.closed() {
		// Closed before the query above, which returned its last page, so
		// every event was printed. Give open children a last chance, then
		// stop.
		f.pollChildren(ctx)
		return followEnd{how: endClosed, runID: d.runID, status: d.status}, true, nil
	}
	return followEnd{}, false, nil
}

// take prints the events that follow seq, in order. It returns how many it
// printed, the number of the first unseen event when it is beyond seq+1 (a
// gap) and whether until was met.
func (f *follower) take(events []investigation.Event) (printed, gapTo int, stop bool) {
	for _, e := range events {
		switch {
		case e.Seq <= f.seq:
			continue
		case e.Seq > f.seq+1:
			if printed == 0 {
				return 0, e.Seq, false
			}
			return printed, 0, false // the rest comes with the next query
		}
		f.seq = e.Seq
		printed++
		f.printedAny = true
		f.p.print(e)
		f.track(e)
		if f.until != nil && f.until(e) {
			return printed, 0, true
		}
	}
	return printed, 0, false
}

// track starts following the child run an event names.
func (f *follower) track(e investigation.Event) {
	if e.Child == "" || f.seen[e.Child] {
		return
	}
	f.seen[e.Child] = true
	f.children = append(f.children, &childStream{
		id: e.Child,
		p:  &printer{out: &prefixWriter{w: f.out, prefix: "    [bigquery] "}, id: e.Child},
	})
}

// pollChildren prints what is new in every open child run. The children are
// queried concurrently, with short timeouts, and printed in the order they
// started.
func (f *follower) pollChildren(ctx context.Context) {
	type read struct {
		closed bool
		events []investigation.Event
		err    error
	}
	var open []*childStream
	for _, ch := range f.children {
		if !ch.done {
			open = append(open, ch)
		}
	}
	if len(open) == 0 {
		return
	}
	reads := make([]chan read, len(open))
	for i, ch := range open {
		reads[i] = make(chan read, 1)
		go func(ch *childStream, seq int, out chan<- read) {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			var r read
			d, err := f.src.describe(cctx, ch.id, "")
			if err != nil {
				r.err = err
				out <- r
				return
			}
			r.closed = d.closed()
			for {
				events, err := f.src.events(cctx, ch.id, "", seq)
				if err != nil {
					// Print the pages read; the child is not done yet.
					r.closed = false
					if len(r.events) == 0 {
						r.err = err
					}
					break
				}
				r.events = append(r.events, events...)
				if !fullPage(events) || events[len(events)-1].Seq <= seq {
					break
				}
				seq = events[len(events)-1].Seq
			}
			out <- r
		}(ch, ch.seq, reads[i])
	}
	for i, ch := range open {
		r := <-reads[i]
		if r.err != nil {
			ch.failures++
			if ch.failures >= oldRunPatience && !isNotFound(r.err) {
				fmt.Fprintf(f.out, "    [bigquery] (stopped following %s: %v)\n", ch.id, r.err)
				ch.done = true
			}
			continue
		}
		ch.failures = 0
		for _, e := range r.events {
			if e.Seq != ch.seq+1 {
				continue
			}
			ch.seq = e.Seq
			ch.p.print(e)
		}
		if r.closed {
			ch.done = true
		}
	}
}

// fullPage says a progress query returned as many events as it may, so more
// may follow.
func fullPage(events []investigation.Event) bool {
	return len(events) >= investigation.MaxProgressEvents
}
