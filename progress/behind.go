package progress

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/secops-agent/investigator/investigation"
)

// Putter writes events and a status in one go (Store).
type Putter interface {
	Put(ctx context.Context, session string, events []investigation.Event, st *investigation.Status) error
}

// Behind writes progress behind the workflow that emits it. Enqueue returns
// at once and one goroutine per session commits that session's writes in
// order, merged, so a workflow task does not wait for a store round trip
// between two model calls (each wait was 7–38 ms on the critical path).
// Put waits for its own write and for every write queued before it: the
// workflow writes that way where it stops for a person or closes, and sends
// again there every event it wrote behind since, so writes that a dying
// worker held are not lost for good (design/durability.md).
type Behind struct {
	store Putter
	log   *slog.Logger

	mu       sync.Mutex
	sessions map[string]*queue
	idle     *sync.Cond // signalled whenever a queue empties (Close)
}

// queue is one session's pending writes and what it has committed.
type queue struct {
	jobs      []job
	running   bool      // a goroutine drains jobs
	committed spans     // the event numbers committed from here
	used      time.Time // last enqueue (forgetting idle sessions)
}

// job is one write; done, when not nil, receives its outcome.
type job struct {
	events []investigation.Event
	st     *investigation.Status
	done   chan error
}

// Write-behind attempts: each has a deadline, and a failed one is retried
// with backoff before the write is given up (a waiting Put then fails).
const (
	attemptTimeout = 10 * time.Second
	attempts       = 4
	// keptSessions is how many idle sessions keep their committed numbers
	// (which spares writing events twice) before the oldest idle for
	// forgetAfter are forgotten.
	keptSessions = 512
	forgetAfter  = time.Hour
)

// NewBehind returns a write-behind queue in front of store.
func NewBehind(store Putter, log *slog.Logger) *Behind {
	if log == nil {
		log = slog.Default()
	}
	b := &Behind{store: store, log: log, sessions: map[string]*queue{}}
	b.idle = sync.NewCond(&b.mu)
	return b
}

// Enqueue queues a write and returns at once; a write that fails on every
// attempt is logged, and the next waiting Put sends its events again.
func (b *Behind) Enqueue(session string, events []investigation.Event, st *investigation.Status) {
	b.add(session, job{events: events, st: st})
}

// Put writes events and st after every write queued before it for the
// session and returns when they are committed (or ctx ends: the write
// still happens).
func (b *Behind) Put(ctx context.Context, session string, events []investigation.Event, st *investigation.Status) error {
	done := make(chan error, 1)
	b.add(session, job{events: events, st: st, done: done})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close waits until every queued write is done, or ctx ends.
func (b *Behind) Close(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.idle.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for ctx.Err() == nil && b.busy() {
		b.idle.Wait()
	}
}

// busy says some session has writes queued or in flight (mu held).
func (b *Behind) busy() bool {
	for _, q := range b.sessions {
		if q.running {
			return true
		}
	}
	return false
}

func (b *Behind) add(session string, j job) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.sessions[session]
	if q == nil {
		b.forget()
		q = &queue{}
		b.sessions[session] = q
	}
	q.jobs, q.used = append(q.jobs, j), time.Now()
	if !q.running {
		q.running = true
		go b.drain(session, q)
	}
}

// forget drops the sessions idle for forgetAfter once more than
// keptSessions are kept (mu held): their next waiting write then sends
// its events again, which is harmless.
func (b *Behind) forget() {
	if len(b.sessions) < keptSessions {
		return
	}
	for s, q := range b.sessions {
		if !q.running && time.Since(q.used) > forgetAfter {
			delete(b.sessions, s)
		}
	}
}

// drain commits q's jobs, merged, until none is left.
func (b *Behind) drain(session string, q *queue) {
	for {
		b.mu.Lock()
		jobs := q.jobs
		q.jobs = nil
		if len(jobs) == 0 {
			q.running = false
			b.idle.Broadcast()
			b.mu.Unlock()
			return
		}
		events, st := merge(jobs, q.committed)
		b.mu.Unlock()

		err := b.put(session, events, st)

		b.mu.Lock()
		if err == nil {
			q.committed = q.committed.add(events)
		}
		b.mu.Unlock()
		if err != nil {
			b.log.Warn("progress events not stored", "session", session, "events", len(events), "error", err)
		}
		for _, j := range jobs {
			if j.done != nil {
				j.done <- err
			}
		}
	}
}

// merge is the jobs' events not committed, each number once and in order,
// and the latest status.
func merge(jobs []job, committed spans) ([]investigation.Event, *investigation.Status) {
	var events []investigation.Event
	var st *investigation.Status
	for _, j := range jobs {
		for _, e := range j.events {
			if !committed.has(e.Seq) {
				events = append(events, e)
			}
		}
		if j.st != nil {
			st = j.st
		}
	}
	slices.SortStableFunc(events, func(x, y investigation.Event) int { return x.Seq - y.Seq })
	events = slices.CompactFunc(events, func(x, y investigation.Event) bool { return x.Seq == y.Seq })
	return events, st
}

// spans are the event numbers a queue committed, as disjoint ranges in
// order. Writes commit out of order (one that failed on every attempt
// leaves a hole below a later one that committed), so a high-water mark
// would skip the failed events when a waiting write sends them again.
type spans []span

type span struct{ lo, hi int }

// maxSpans bounds the ranges kept; forgetting the lowest ones only makes a
// later waiting write send those events again.
const maxSpans = 64

func (s spans) has(n int) bool {
	for _, r := range s {
		if r.lo <= n && n <= r.hi {
			return true
		}
	}
	return false
}

// add returns s with the numbers of events (in order, each once), merged
// into the ranges they touch.
func (s spans) add(events []investigation.Event) spans {
	for _, e := range events {
		s = append(s, span{e.Seq, e.Seq})
	}
	slices.SortFunc(s, func(x, y span) int { return x.lo - y.lo })
	var out spans
	for _, r := range s {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	if len(out) > maxSpans {
		out = out[len(out)-maxSpans:]
	}
	return out
}

// put makes a few attempts at one write, each with its own deadline.
func (b *Behind) put(session string, events []investigation.Event, st *investigation.Status) error {
	var err error
	wait := 100 * time.Millisecond
	for i := range attempts {
		if i > 0 {
			time.Sleep(wait)
			wait *= 2
		}
		ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
		err = b.store.Put(ctx, session, events, st)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}
