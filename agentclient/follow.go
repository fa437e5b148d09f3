package agentclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/payloadcodec"
)

// pollInterval is how often a follower asks for new events (tests shorten it).
var pollInterval = 400 * time.Millisecond

// oldRunPatience is how many failed queries in a row a closed (continued as
// new) run, or a child run, gets before the follower gives up on its
// remaining events.
const oldRunPatience = 25

// closedPatience is how many failed queries in a row the closed latest run
// gets (or the call timeout, if that passes first) before the follower
// gives up on its remaining events: no new ones will come, and only a
// worker replaying the run can answer.
const closedPatience = 5

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
	// unread, when not nil, is why the closed run's remaining events
	// could not be read (endClosed): no worker answered its queries.
	unread error
}

// follower renders an investigation's progress events in order, each once.
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
// (one run, page after page) in the same tick, rendered as the child's
// events until the child closes; a child never holds up the parent's events.
//
// What it reads goes to a Renderer (text or JSON lines); the follower
// itself never prints.
type follower struct {
	src      stream
	id       string
	session  string // where its progress is stored (execution.session)
	r        Renderer
	queue    string
	interval time.Duration
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
	childWait  time.Duration // before the children are polled again (pollChildren)
	seen       map[string]bool
	// patience is how long Temporal may fail to describe the workflow, in a
	// row, before following gives up with the sentence unreachable returns.
	patience    time.Duration
	unreachable func() string
	downSince   time.Time
	// unreadSince is when queries of the closed latest run began to fail
	// in a row (closedPatience).
	unreadSince time.Time
	// store, when set, delivers the events (watch.go); watch listens to it.
	store ProgressStore
	watch *storeWatch
	// storeCall bounds one read of the store by the call timeout
	// (Client.storeCall); storeWarned says the follower said it timed out.
	storeCall   func(context.Context, func(context.Context) error) error
	storeWarned bool
	// history is the run's history length at the last quiet look
	// (stepWatched): when it moved and the listener said nothing, the
	// follower reads the store.
	history int64
}

// newFollower is a follower of investigation id that gives up when
// Temporal stays unreachable for the call timeout.
func (c *Client) newFollower(id string, r Renderer) *follower {
	return &follower{src: c.src, id: id, r: r, queue: c.cfg.TaskQueue, interval: pollInterval, seen: map[string]bool{},
		patience: c.timeout, unreachable: c.unreachable, store: c.progress, storeCall: c.storeCall}
}

// start finds the chain of runs and where to begin: the first run (watch), or
// the latest one (a new investigation, or a follow-up just asked).
func (f *follower) start(ctx context.Context, atLatest bool) error {
	d, err := f.src.describe(ctx, f.id, "")
	if err != nil {
		if IsNotFound(err) {
			return fmt.Errorf("no investigation with ID %s", f.id)
		}
		return fmt.Errorf("look up investigation %s: %w", f.id, err)
	}
	f.session = d.session(f.id)
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

// interrupted is the error of following stopped by Ctrl-C or SIGTERM: the
// investigation goes on, and it names where to resume.
func (f *follower) interrupted() error {
	at := fmt.Sprintf("after event %d", f.seq)
	if !f.printedAny {
		at = "before any new event"
	}
	flags := ""
	if _, ok := f.r.(*jsonRenderer); ok {
		flags = " --json"
	}
	return &InterruptedError{fmt.Sprintf("stopped watching %s; the investigation goes on (resume with: starter watch %s --from %d%s)", at, f.id, f.seq+1, flags)}
}

// run follows until the workflow closes, until is met, or ctx ends.
func (f *follower) run(ctx context.Context) (followEnd, error) {
	if f.store != nil {
		return f.runWatched(ctx)
	}
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
	d, end, done, err := f.describe(ctx)
	if done || err != nil || d.runID == "" {
		return end, done, err
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
			if latest && d.closed() {
				if f.unreadSince.IsZero() {
					f.unreadSince = time.Now()
				}
				if f.failures >= closedPatience || time.Since(f.unreadSince) >= f.patience {
					f.pollChildren(ctx)
					return followEnd{how: endClosed, runID: d.runID, status: d.status, unread: err}, true, nil
				}
			}
			if !latest && (f.failures >= oldRunPatience || IsNotFound(err)) {
				f.r.Notice("", fmt.Sprintf("(could not read the remaining events of run %s: %v; going on with the next run)", cur, err))
				f.failures, f.idx, f.drained = 0, f.idx+1, true
				continue
			}
			if !f.warned && !f.printedAny && f.failures >= 5 {
				f.warned = true
				f.r.Notice("", fmt.Sprintf("(waiting for a worker on task queue %q...)", f.queue))
			}
			break
		}
		f.failures, f.unreadSince = 0, time.Time{}
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
			f.r.Notice("", fmt.Sprintf("(events %d to %d are no longer available)", f.seq+1, gapTo-1))
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

// describe asks Temporal for the latest run. A failure is transient (an
// empty execution, not done) until Temporal stays unreachable for the
// follower's patience.
func (f *follower) describe(ctx context.Context) (execution, followEnd, bool, error) {
	d, err := f.src.describe(ctx, f.id, "")
	if err != nil {
		if ctx.Err() != nil {
			return d, followEnd{how: endInterrupted}, true, nil
		}
		if IsNotFound(err) {
			return d, followEnd{}, true, fmt.Errorf("investigation %s is gone (no workflow with this ID any more)", f.id)
		}
		if f.downSince.IsZero() {
			f.downSince = time.Now()
		}
		if f.patience > 0 && time.Since(f.downSince) >= f.patience {
			return d, followEnd{}, true, errors.New(f.unreachable())
		}
		return execution{}, followEnd{}, false, nil // transient: try again next tick
	}
	f.downSince = time.Time{}
	return d, followEnd{}, false, nil
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
		f.r.Event(e)
		f.track(e)
		if f.until != nil && f.until(e) {
			return printed, 0, true
		}
	}
	return printed, 0, false
}

// keyProblem turns a payload that cannot be decrypted or was refused (wrong
// or missing payload key, here or in the worker) into the error that ends
// following: retrying cannot help. A closed run that answers no query (its
// input was refused, so it never ran) is explained by its failure; an open
// one whose workflow tasks fail on a payload (the server then refuses
// queries) by the last task failure, which carries the sentence in clear.
func (f *follower) keyProblem(ctx context.Context, err error, runID string, closed bool) error {
	if closed {
		if _, oerr := f.src.outcome(ctx, f.id, runID); oerr != nil {
			if msg, ok := payloadcodec.Explain(oerr); ok {
				return fmt.Errorf("investigation %s failed: %s", f.id, msg)
			}
		}
	}
	if msg, ok := payloadcodec.Explain(err); ok {
		return fmt.Errorf("cannot follow investigation %s: %s", f.id, msg)
	}
	if nr := (*serviceerror.WorkflowNotReady)(nil); errors.As(err, &nr) {
		if failed, ferr := f.src.taskFailure(ctx, f.id, runID); ferr == nil {
			if msg, ok := payloadcodec.Explain(errors.New(failed)); ok {
				return fmt.Errorf("cannot follow investigation %s: %s", f.id, msg)
			}
		}
	}
	return nil
}
