package agentclient

import (
	"context"
	"fmt"
	"time"

	"github.com/secops-agent/investigator/investigation"
)

// childStream is a child run the follower reads beside the parent.
type childStream struct {
	id       string
	seq      int
	done     bool
	failures int
}

// track starts following the child run an event names.
func (f *follower) track(e investigation.Event) {
	if e.Child == "" || f.seen[e.Child] {
		return
	}
	f.seen[e.Child] = true
	f.children = append(f.children, &childStream{id: e.Child})
}

// pollChildren renders what is new in every open child run. The children
// are queried concurrently, with short timeouts, and rendered in the order
// they started. childWait, the wait before a follower with the store polls
// them again, starts at the poll interval and doubles, up to
// childQuietMax, while they have nothing new.
func (f *follower) pollChildren(ctx context.Context) {
	news := false
	defer func() {
		if news || f.childWait == 0 {
			f.childWait = f.interval
		} else {
			f.childWait = min(f.childWait*2, max(childQuietMax, f.interval))
		}
	}()
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
			if ch.failures >= oldRunPatience && !IsNotFound(r.err) {
				f.r.Notice(ch.id, fmt.Sprintf("(stopped following %s: %v)", ch.id, r.err))
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
			news = true
			f.r.ChildEvent(ch.id, e)
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
