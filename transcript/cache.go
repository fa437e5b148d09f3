package transcript

import (
	"context"
	"fmt"

	"github.com/secops-agent/investigator/internal/lru"
)

// Durable is the store a Cache stands in front of (*Store): Put writes a key
// once and returns the entry the store holds; GetAll reads keys in order and
// fails with *MissingError for a key it does not hold, *KeyError for one
// no entry can have.
type Durable interface {
	Put(ctx context.Context, session, key string, e Entry) (Entry, error)
	GetAll(ctx context.Context, session string, keys []string) ([]Entry, error)
}

// entryOverhead approximates what one kept entry costs beyond its strings
// (the entry, its list element and map slot).
const entryOverhead = 256

// Cache keeps the entries a worker recently stored or read, so that the model
// turns of a tool loop do not read back from Firestore what the previous
// activity just wrote there. Firestore stays the durable store: every Put
// goes to it, and only an entry it confirmed holding is kept. Since a key is
// written once and never changed, a kept entry is always the stored one;
// another worker, or this one after a restart, reads through to Firestore.
type Cache struct {
	store   Durable
	entries *lru.Cache[cacheKey, Entry]
}

type cacheKey struct{ session, key string }

// NewCache puts a cache of at most maxBytes of entries in front of store.
func NewCache(store Durable, maxBytes int64) *Cache {
	return &Cache{store: store, entries: lru.New[cacheKey, Entry](maxBytes)}
}

// Put stores e under session/key unless the key is written already, and
// returns the stored entry, which an earlier attempt may have written. A key
// kept here is known to be written, so its entry is returned without asking
// the store again: that is what the store's Put would return.
func (c *Cache) Put(ctx context.Context, session, key string, e Entry) (Entry, error) {
	k := cacheKey{session, key}
	if stored, ok := c.entries.Get(k); ok {
		return stored, nil
	}
	stored, err := c.store.Put(ctx, session, key, e)
	if err != nil {
		return Entry{}, err
	}
	c.keep(k, stored)
	return stored, nil
}

// GetAll returns the entries of keys in order: those kept here from memory,
// the rest from the store in one call.
func (c *Cache) GetAll(ctx context.Context, session string, keys []string) ([]Entry, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	out := make([]Entry, len(keys))
	var missing []string
	var at []int
	for i, key := range keys {
		if e, ok := c.entries.Get(cacheKey{session, key}); ok {
			out[i] = e
			continue
		}
		missing = append(missing, key)
		at = append(at, i)
	}
	if len(missing) == 0 {
		return out, nil
	}
	read, err := c.store.GetAll(ctx, session, missing)
	if err != nil {
		return nil, err
	}
	if len(read) != len(missing) {
		return nil, fmt.Errorf("read transcript of %s: the store returned %d entries for %d keys", session, len(read), len(missing))
	}
	for j, e := range read {
		out[at[j]] = e
		c.keep(cacheKey{session, missing[j]}, e)
	}
	return out, nil
}

func (c *Cache) keep(k cacheKey, e Entry) {
	size := len(k.session) + len(k.key) + len(e.Kind) + len(e.Content) + len(e.Text) + len(e.CallID) + len(e.Tool) + len(e.Response)
	c.entries.Add(k, e, int64(size+entryOverhead))
}
