package agentclient

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/secops-agent/investigator/investigation"
)

// ProgressStore is where investigations keep their progress events and
// latest status beside the transcript (progress.Store): a follower waits
// on it instead of asking Temporal every 400 ms, and reads it when the
// run's workers are gone.
type ProgressStore interface {
	After(ctx context.Context, session string, after, limit int) ([]investigation.Event, error)
	Watch(ctx context.Context, session string, after int, got func([]investigation.Event)) error
	Status(ctx context.Context, session string) (investigation.Status, time.Time, bool, error)
}

// Waits between a follower's looks at Temporal while nothing new arrives:
// from quietFirst, doubling, up to quietMax (tests shorten them). New
// events from the store wake the follower at once.
var (
	quietFirst = 200 * time.Millisecond
	quietMax   = 5 * time.Second
	// childQuietMax bounds the wait between polls of a sub-agent's run
	// that has nothing new (its events come from its query, not the store).
	childQuietMax = 2 * time.Second
)

// storeWatch holds the events one Firestore listener delivered and wakes
// the follower when some arrive.
type storeWatch struct {
	mu     sync.Mutex
	events map[int]investigation.Event
	failed bool // the listener ended: read Temporal as before
	seen   bool // the store delivered an event
	wake   chan struct{}
	stop   context.CancelFunc
}

// watchStore starts listening for the events of session after seq.
func watchStore(ctx context.Context, store ProgressStore, session string, after int) *storeWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &storeWatch{events: map[int]investigation.Event{}, wake: make(chan struct{}, 1), stop: cancel}
	go func() {
		err := store.Watch(ctx, session, after, func(batch []investigation.Event) {
			w.mu.Lock()
			for _, e := range batch {
				w.events[e.Seq] = e
			}
			w.seen = w.seen || len(batch) > 0
			w.mu.Unlock()
			w.signal()
		})
		if err != nil && ctx.Err() == nil {
			w.mu.Lock()
			w.failed = true
			w.mu.Unlock()
			w.signal()
		}
	}()
	return w
}

func (w *storeWatch) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// add keeps events read from the store directly.
func (w *storeWatch) add(events []investigation.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range events {
		w.events[e.Seq] = e
	}
}

// after returns the held events numbered above seq, in order, and forgets
// those at or below it; ok is false once the listener failed.
func (w *storeWatch) after(seq int) (events []investigation.Event, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for n, e := range w.events {
		if n <= seq {
			delete(w.events, n)
			continue
		}
		events = append(events, e)
	}
	sort.Slice(events, func(i, j int) bool { return events[i].Seq < events[j].Seq })
	return events, !w.failed
}

// wait blocks until the store has news, d passes or ctx ends; it says
// whether ctx is still alive.
func (w *storeWatch) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-w.wake:
	case <-t.C:
	}
	return true
}

// runWatched follows with the store: events arrive through one Firestore
// listener; Temporal is asked only after a quiet wait (growing from
// quietFirst to quietMax), to learn that the run closed, or when the store
// cannot say (a run from before progress was stored, events it no longer
// holds, a listener that failed). A child stream is asked every interval
// while it has news, less often (up to childQuietMax) while it has none.
func (f *follower) runWatched(ctx context.Context) (followEnd, error) {
	f.watch = watchStore(ctx, f.store, f.session, f.seq)
	defer f.watch.stop()
	quiet := quietFirst
	for {
		end, done, news, err := f.stepWatched(ctx)
		if done || err != nil {
			return end, err
		}
		wait := quiet
		if news {
			wait, quiet = quietFirst, quietFirst
		} else {
			quiet = min(quiet*2, quietMax)
		}
		if f.openChildren() {
			wait = min(wait, max(f.childWait, f.interval))
		}
		if !f.watch.wait(ctx, wait) {
			return followEnd{how: endInterrupted}, nil
		}
	}
}

// stepWatched prints what the store delivered; with nothing new it asks
// Temporal whether the run closed or moved on, and then reads the store.
// It reports whether it printed anything.
func (f *follower) stepWatched(ctx context.Context) (followEnd, bool, bool, error) {
	if ctx.Err() != nil {
		return followEnd{how: endInterrupted}, true, false, nil
	}
	events, ok := f.watch.after(f.seq)
	if !ok {
		end, done, err := f.step(ctx) // the listener failed: Temporal as before
		return end, done, false, err
	}
	if len(events) > 0 {
		// A child's last events come before the parent's result of it.
		f.pollChildren(ctx)
	}
	printed, gapTo, stop := f.take(events)
	if stop {
		f.pollChildren(ctx)
		return followEnd{how: endUntil}, true, true, nil
	}
	if printed > 0 {
		return followEnd{}, false, true, nil
	}
	if gapTo > 0 || !f.watch.seenAny() {
		end, done, err := f.step(ctx)
		return end, done, false, err
	}
	d, end, done, err := f.describe(ctx)
	if done || err != nil {
		return end, done, false, err
	}
	f.extend(ctx, d.runID)
	f.pollChildren(ctx)
	moved := d.historyLength != f.history
	f.history = d.historyLength
	if !d.closed() && !moved {
		return followEnd{}, false, false, nil
	}
	// The run closed (it stores its events first) or recorded something
	// while the listener said nothing: read what the listener has not
	// delivered. A listener can miss a write, and an open run may wait
	// for its next question for hours.
	var more []investigation.Event
	err = f.storeCall(ctx, func(ctx context.Context) (err error) {
		more, err = f.store.After(ctx, f.session, f.seq, investigation.MaxProgressEvents)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return followEnd{how: endInterrupted}, true, false, nil
		}
		// Temporal has the events too: read them there this time.
		if IsUnavailable(err) && !f.storeWarned {
			f.storeWarned = true
			f.r.Notice("", fmt.Sprintf("(%s; reading the events from Temporal)", err))
		}
		end, done, err := f.step(ctx)
		return end, done, false, err
	}
	f.watch.add(more)
	events, _ = f.watch.after(f.seq)
	printed, gapTo, stop = f.take(events)
	switch {
	case stop:
		return followEnd{how: endUntil}, true, true, nil
	case printed > 0:
		return followEnd{}, false, true, nil
	case gapTo > 0:
		end, done, err := f.step(ctx)
		return end, done, false, err
	case !d.closed():
		return followEnd{}, false, false, nil
	}
	f.pollChildren(ctx)
	return followEnd{how: endClosed, runID: d.runID, status: d.status}, true, false, nil
}

// seenAny says the store delivered an event of this investigation.
func (w *storeWatch) seenAny() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// openChildren says a child stream is still being read.
func (f *follower) openChildren() bool {
	for _, ch := range f.children {
		if !ch.done {
			return true
		}
	}
	return false
}
