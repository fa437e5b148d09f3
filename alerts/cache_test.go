package alerts

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countedGets passes reads to the real store and counts them.
type countedGets struct {
	Getter
	n atomic.Int64
}

func (c *countedGets) Get(ctx context.Context, id string) (Alert, error) {
	c.n.Add(1)
	return c.Getter.Get(ctx, id)
}

func TestCacheKeepsEveryImportedAlertAfterOneRead(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	byFile := importExamples(t, s)
	// Empty lists and objects, nulls and exact numbers must hash the same
	// after a trip through Firestore, or such alerts would never be kept.
	odd, err := Parse([]byte(`{"empty":[],"obj":{},"nil":null,"big":123456789012345678901234567890,"n":[1,2.5,{"x":[]}]}`))
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, odd))
	byFile["odd"] = odd

	store := &countedGets{Getter: s}
	c := NewCache(store, 8<<20)
	for name, a := range byFile {
		want, err := s.Get(ctx, a.ID)
		require.NoError(t, err)
		before := store.n.Load()
		for range 3 {
			got, err := c.Get(ctx, a.ID)
			require.NoError(t, err, name)
			require.Equal(t, want, got, name)
		}
		require.Equal(t, before+1, store.n.Load(), "%s is read from Firestore once", name)
	}
	require.Equal(t, len(byFile), c.alerts.Len())
}

func TestCacheDoesNotKeepAlertsItCannotVouchFor(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	store := &countedGets{Getter: s}
	c := NewCache(store, 8<<20)

	// Not found: an import made after the miss is seen.
	a := parseExample(t, "guardduty-ssh-bruteforce.json")
	_, err := c.Get(ctx, a.ID)
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, s.Put(ctx, a))
	got, err := c.Get(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, a.Title, got.Title)

	// An alert written under an ID that does not name its data can be
	// rewritten with other data: it is read every time.
	custom := Alert{ID: "generic-chosen", Source: SourceGeneric, Type: "t", Title: "first", Severity: SeverityLow, Data: map[string]any{"v": int64(1)}}
	require.NoError(t, s.Put(ctx, custom))
	got, err = c.Get(ctx, custom.ID)
	require.NoError(t, err)
	require.Equal(t, "first", got.Title)
	custom.Title, custom.Data = "second", map[string]any{"v": int64(2)}
	_, err = s.col.Doc(custom.ID).Set(ctx, custom) // Put refuses other content under a stored ID
	require.NoError(t, err)
	got, err = c.Get(ctx, custom.ID)
	require.NoError(t, err)
	require.Equal(t, "second", got.Title)
	require.Equal(t, int64(2), got.Data["v"])
	require.Equal(t, int64(4), store.n.Load(), "the miss, the import after it, and both reads of the chosen ID")

	// A document whose id field names another alert is not kept under the
	// ID asked for.
	other := parseExample(t, "scc-cryptominer.json")
	_, err = s.col.Doc("generic-alias").Set(ctx, other)
	require.NoError(t, err)
	for range 2 {
		got, err = c.Get(ctx, "generic-alias")
		require.NoError(t, err)
		require.Equal(t, other.ID, got.ID)
	}
	require.Equal(t, int64(6), store.n.Load())
}

func TestCacheBudgetEvictsLeastRecentlyUsed(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	byFile := importExamples(t, s)
	a, b := byFile["guardduty-ssh-bruteforce.json"], byFile["scc-cryptominer.json"]
	sizeOf := func(al Alert) int64 {
		c := NewCache(s, 8<<20)
		_, err := c.Get(ctx, al.ID)
		require.NoError(t, err)
		return c.alerts.Bytes()
	}
	sa, sb := sizeOf(a), sizeOf(b)
	require.Positive(t, sa)

	reads := func(budget int64) int64 {
		store := &countedGets{Getter: s}
		c := NewCache(store, budget)
		for _, al := range []Alert{a, b, a} {
			got, err := c.Get(ctx, al.ID)
			require.NoError(t, err)
			require.Equal(t, al.ID, got.ID)
		}
		require.LessOrEqual(t, c.alerts.Bytes(), budget)
		return store.n.Load()
	}
	require.Equal(t, int64(2), reads(sa+sb), "both fit: the second read of a is from memory")
	require.Equal(t, int64(3), reads(max(sa, sb)), "one fits: b evicted a")
	require.Equal(t, int64(3), reads(0), "no budget: every read goes to Firestore")
}

func TestCacheConcurrentMissesShareOneRead(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	a := importExamples(t, s)["scc-cryptominer.json"]
	store := &countedGets{Getter: s}
	c := NewCache(store, 8<<20)
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Get(ctx, a.ID)
			if assert.NoError(t, err) {
				assert.Equal(t, a.ID, got.ID)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(1), store.n.Load())
}

// gated holds every read until its context ends or the gate opens.
type gated struct {
	Getter
	entered chan struct{}
	open    chan struct{}
}

func (g *gated) Get(ctx context.Context, id string) (Alert, error) {
	g.entered <- struct{}{}
	select {
	case <-ctx.Done():
		return Alert{}, ctx.Err()
	case <-g.open:
	}
	return g.Getter.Get(ctx, id)
}

func TestCacheReaderCancelledIsNotTheWaitersError(t *testing.T) {
	s := newTestStore(t)
	a := importExamples(t, s)["scc-cryptominer.json"]
	g := &gated{Getter: s, entered: make(chan struct{}, 4), open: make(chan struct{})}
	c := NewCache(g, 8<<20)

	first, cancel := context.WithCancel(t.Context())
	firstErr := make(chan error, 1)
	go func() {
		_, err := c.Get(first, a.ID)
		firstErr <- err
	}()
	<-g.entered // the first caller is reading
	second := make(chan error, 1)
	go func() {
		got, err := c.Get(t.Context(), a.ID)
		if err == nil && got.ID != a.ID {
			err = assert.AnError
		}
		second <- err
	}()
	cancel()
	require.ErrorIs(t, <-firstErr, context.Canceled)
	close(g.open)
	require.NoError(t, <-second, "the second caller reads again instead of failing with the first one's cancellation")
}
