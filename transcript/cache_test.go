package transcript

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counted passes every call to the real store and records what reached it.
type counted struct {
	Durable
	mu   sync.Mutex
	puts int
	gets [][]string // the keys of each GetAll
}

func (c *counted) Put(ctx context.Context, session, key string, e Entry) (Entry, error) {
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	return c.Durable.Put(ctx, session, key, e)
}

func (c *counted) GetAll(ctx context.Context, session string, keys []string) ([]Entry, error) {
	c.mu.Lock()
	c.gets = append(c.gets, keys)
	c.mu.Unlock()
	return c.Durable.GetAll(ctx, session, keys)
}

// calls returns the puts and reads so far and starts counting again.
func (c *counted) calls() (int, [][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, g := c.puts, c.gets
	c.puts, c.gets = 0, nil
	return p, g
}

// worker is one worker's cache over the shared Firestore store.
func worker(s *Store, maxBytes int64) (*Cache, *counted) {
	c := &counted{Durable: s}
	return NewCache(c, maxBytes), c
}

func testCache(t *testing.T, s *Store) {
	ctx := context.Background()
	const session = "wf-cache"

	t.Run("a warm worker reads back what it stored without the store", func(t *testing.T) {
		a, store := worker(s, 1<<20)
		m, err := a.Put(ctx, session, "i1", Entry{Kind: KindModel, Content: `{"role":"model"}`, Text: "looking"})
		require.NoError(t, err)
		tool, err := a.Put(ctx, session, "i1-c1", Entry{Kind: KindTool, CallID: "c1", Tool: "get_alert", Response: `{"id":"x"}`})
		require.NoError(t, err)
		puts, gets := store.calls()
		require.Equal(t, 2, puts, "every Put reaches Firestore")
		require.Empty(t, gets)

		got, err := a.GetAll(ctx, session, []string{"i1-c1", "i1"})
		require.NoError(t, err)
		require.Equal(t, []Entry{tool, m}, got, "in the order of the keys")
		_, gets = store.calls()
		require.Empty(t, gets, "both entries came from memory")

		// Another worker (or this one after a restart) reads through.
		b, bstore := worker(s, 1<<20)
		got, err = b.GetAll(ctx, session, []string{"i1", "i1-c1"})
		require.NoError(t, err)
		require.Equal(t, []Entry{m, tool}, got, "Firestore holds exactly what the first worker kept")
		_, gets = bstore.calls()
		require.Equal(t, [][]string{{"i1", "i1-c1"}}, gets, "the misses are read in one call")
		_, err = b.GetAll(ctx, session, []string{"i1", "i1-c1"})
		require.NoError(t, err)
		_, gets = bstore.calls()
		require.Empty(t, gets, "what was read is kept")

		// Only the keys not kept are read.
		_, err = b.Put(ctx, session, "i2", Entry{Kind: KindModel, Text: "written by b"})
		require.NoError(t, err)
		got, err = a.GetAll(ctx, session, []string{"i1", "i2", "i1-c1"})
		require.NoError(t, err)
		require.Equal(t, "written by b", got[1].Text)
		_, gets = store.calls()
		require.Equal(t, [][]string{{"i2"}}, gets)
	})

	t.Run("a missing key is an error from the store, not a cached blank", func(t *testing.T) {
		a, store := worker(s, 1<<20)
		_, err := a.Put(ctx, session, "m1", Entry{Kind: KindModel, Text: "here"})
		require.NoError(t, err)
		_, err = a.GetAll(ctx, session, []string{"m1", "never-written"})
		var missing *MissingError
		require.ErrorAs(t, err, &missing)
		require.Equal(t, "never-written", missing.Key)
		_, err = a.GetAll(ctx, session, []string{"never-written"})
		require.ErrorAs(t, err, &missing, "asked again, the store is asked again")
		_, gets := store.calls()
		require.Equal(t, [][]string{{"never-written"}, {"never-written"}}, gets)
	})

	t.Run("a failed Put is not kept", func(t *testing.T) {
		a, store := worker(s, 1<<20)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_, err := a.Put(cancelled, session, "f1", Entry{Kind: KindModel, Text: "never stored"})
		require.Error(t, err)
		_, err = a.GetAll(ctx, session, []string{"f1"})
		var missing *MissingError
		require.ErrorAs(t, err, &missing, "the cache does not serve what Firestore did not store")

		stored, err := a.Put(ctx, session, "f1", Entry{Kind: KindModel, Text: "stored on retry"})
		require.NoError(t, err)
		require.Equal(t, "stored on retry", stored.Text)
		puts, _ := store.calls()
		require.Equal(t, 2, puts, "the retry went to Firestore")
	})

	t.Run("the first write wins and is what the cache keeps", func(t *testing.T) {
		a, _ := worker(s, 1<<20)
		first, err := a.Put(ctx, session, "w1", Entry{Kind: KindModel, Content: `{"attempt":1}`, Text: "first"})
		require.NoError(t, err)

		// A retry on another worker writes the same key: it gets the first
		// attempt's entry back, and keeps that, not its own.
		b, bstore := worker(s, 1<<20)
		got, err := b.Put(ctx, session, "w1", Entry{Kind: KindModel, Content: `{"attempt":2}`, Text: "second"})
		require.NoError(t, err)
		require.Equal(t, first, got)
		read, err := b.GetAll(ctx, session, []string{"w1"})
		require.NoError(t, err)
		require.Equal(t, first, read[0])
		again, err := b.Put(ctx, session, "w1", Entry{Kind: KindModel, Text: "third"})
		require.NoError(t, err)
		require.Equal(t, first, again)
		puts, gets := bstore.calls()
		require.Equal(t, 1, puts, "a key known to be written is answered from memory, as Firestore would answer")
		require.Empty(t, gets)
	})

	t.Run("the budget evicts the least recently used entries, which read through", func(t *testing.T) {
		body := strings.Repeat("x", 1000)
		// Room for two entries of about 1.3 KB (body, overhead, names).
		a, store := worker(s, 2800)
		for _, k := range []string{"e1", "e2", "e3"} {
			_, err := a.Put(ctx, session, k, Entry{Kind: KindTool, CallID: k, Tool: "t", Response: body})
			require.NoError(t, err)
		}
		store.calls()
		got, err := a.GetAll(ctx, session, []string{"e1", "e2", "e3"})
		require.NoError(t, err)
		for i, k := range []string{"e1", "e2", "e3"} {
			require.Equal(t, k, got[i].CallID)
			require.Equal(t, body, got[i].Response)
		}
		_, gets := store.calls()
		require.Equal(t, [][]string{{"e1"}}, gets, "only the oldest entry was evicted")
	})

	t.Run("concurrent activities", func(t *testing.T) {
		a, store := worker(s, 16<<10) // less than one session's entries: some are evicted
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sess := fmt.Sprint("wf-conc-", g)
				var keys []string
				for i := range 12 {
					k := fmt.Sprint("i", i)
					want := Entry{Kind: KindTool, CallID: k, Tool: "t", Response: strings.Repeat("r", 2000) + k}
					stored, err := a.Put(ctx, sess, k, want)
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, want.Response, stored.Response)
					keys = append(keys, k)
					got, err := a.GetAll(ctx, sess, keys)
					if !assert.NoError(t, err) {
						return
					}
					for j, e := range got {
						assert.Equal(t, keys[j], e.CallID)
					}
				}
			}()
		}
		// Racing attempts of one turn: every one returns the same stored entry.
		results := make([]Entry, 6)
		for r := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := a.Put(ctx, "wf-conc-race", "turn", Entry{Kind: KindModel, Text: fmt.Sprint("attempt ", r)})
				assert.NoError(t, err)
				results[r] = e
			}()
		}
		wg.Wait()
		for _, e := range results[1:] {
			require.Equal(t, results[0], e)
		}
		held, err := NewCache(s, 0).GetAll(ctx, "wf-conc-race", []string{"turn"})
		require.NoError(t, err)
		require.Equal(t, results[0], held[0], "and it is the one Firestore holds")
		require.LessOrEqual(t, a.entries.Bytes(), int64(16<<10))
		_, gets := store.calls()
		require.NotEmpty(t, gets, "evicted entries were read back from Firestore")
	})
}
