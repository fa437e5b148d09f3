package alerts

import (
	"context"
	"errors"
	"sync"

	"github.com/secops-agent/investigator/internal/lru"
)

// Getter reads one alert by ID (*Store).
type Getter interface {
	Get(ctx context.Context, id string) (Alert, error)
}

// A decoded alert takes about 4 to 5 times its compact JSON in memory
// (measured on the example alerts); a kept alert is counted as 5 times.
const (
	decodedPerJSONByte = 5
	alertOverhead      = 512
)

// Cache keeps the alerts a worker has read, so that the activities of an
// investigation, which all show its alert, read it from Firestore once. An
// alert's ID is the hash of its data (Parse), so whatever is stored under
// that ID later has the same data: only an alert whose stored data hashes to
// its ID is kept, and any other (one written under an ID of someone's
// choosing) is read from the store every time. Callers must not modify a
// returned alert's Data: it is shared.
type Cache struct {
	store  Getter
	alerts *lru.Cache[string, Alert]

	mu      sync.Mutex
	loading map[string]*load // reads in flight, which concurrent misses wait for
}

type load struct {
	done chan struct{}
	al   Alert
	err  error
}

// NewCache puts a cache of at most about maxBytes of alerts in front of
// store.
func NewCache(store Getter, maxBytes int64) *Cache {
	return &Cache{store: store, alerts: lru.New[string, Alert](maxBytes), loading: map[string]*load{}}
}

// Get returns the alert with the given ID, from memory when it was read
// before; concurrent misses of one ID share one read.
func (c *Cache) Get(ctx context.Context, id string) (Alert, error) {
	for {
		if al, ok := c.alerts.Get(id); ok {
			return al, nil
		}
		c.mu.Lock()
		l, waiting := c.loading[id]
		if !waiting {
			l = &load{done: make(chan struct{})}
			c.loading[id] = l
		}
		c.mu.Unlock()
		if !waiting {
			return c.fill(ctx, id, l)
		}
		select {
		case <-l.done:
		case <-ctx.Done():
			return Alert{}, ctx.Err()
		}
		// The reader's own deadline or cancellation is not this caller's:
		// try again rather than fail with it.
		if ctx.Err() == nil && (errors.Is(l.err, context.Canceled) || errors.Is(l.err, context.DeadlineExceeded)) {
			continue
		}
		return l.al, l.err
	}
}

// fill reads id from the store for every caller waiting on l.
func (c *Cache) fill(ctx context.Context, id string, l *load) (Alert, error) {
	l.al, l.err = c.store.Get(ctx, id)
	if l.err == nil {
		if cid, canonical, err := contentID(l.al.Source, l.al.Data); err == nil && cid == l.al.ID && id == l.al.ID {
			size := decodedPerJSONByte*len(canonical) + len(l.al.ID) + len(l.al.Type) + len(l.al.Title) + alertOverhead
			c.alerts.Add(id, l.al, int64(size))
		}
	}
	c.mu.Lock()
	delete(c.loading, id)
	c.mu.Unlock()
	close(l.done)
	return l.al, l.err
}
