package source

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// DefaultDecodedInFlight is each source's budget of decoded alert bytes in
// flight when none is set: the count limits alone let 100 alerts of up to
// 8 MiB decoded each hold about 800 MiB.
const DefaultDecodedInFlight = 128 << 20

// errOverBudget is an alert refused for now because its source holds too
// many decoded bytes; it is sent again later (429, nack), never dead-lettered.
var errOverBudget = errors.New("too many alert bytes in flight: send it again after Retry-After")

// budget bounds the decoded bytes (alerts.ParseWeighed's estimate) of one
// source's alerts in flight. An alert heavier than the whole budget takes
// all of it, so it is still taken, alone, and never waits for ever.
type budget struct {
	size int64
	sem  *semaphore.Weighted
}

// newBudget is a budget of size bytes (DefaultDecodedInFlight when 0).
func newBudget(size int64) *budget {
	if size <= 0 {
		size = DefaultDecodedInFlight
	}
	return &budget{size: size, sem: semaphore.NewWeighted(size)}
}

// acquire takes weight bytes of the budget: at once when wait is 0, else
// waiting up to wait (or until ctx ends); errOverBudget if it cannot. The
// release it returns may be called any number of times and gives the bytes
// back once.
func (b *budget) acquire(ctx context.Context, weight int, wait time.Duration) (release func(), err error) {
	w := min(max(int64(weight), 1), b.size)
	if wait <= 0 {
		if !b.sem.TryAcquire(w) {
			return nil, errOverBudget
		}
	} else {
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		if b.sem.Acquire(ctx, w) != nil {
			return nil, errOverBudget
		}
	}
	return sync.OnceFunc(func() { b.sem.Release(w) }), nil
}
