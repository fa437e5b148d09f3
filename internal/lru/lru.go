// Package lru is a least-recently-used map bounded by the total size of its
// values, safe for concurrent use: the worker's in-memory caches in front of
// Firestore (alerts, transcript entries) are built on it.
package lru

import (
	"container/list"
	"sync"
)

// Cache keeps values of K up to a budget of bytes; adding past the budget
// drops the least recently used values first. The zero budget keeps nothing.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int64
	used  int64
	order *list.List // front: most recently used; elements hold *item[K, V]
	items map[K]*list.Element
}

type item[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

// New returns a cache that keeps at most maxBytes of values, as sized by
// the caller in Add.
func New[K comparable, V any](maxBytes int64) *Cache[K, V] {
	return &Cache[K, V]{max: max(maxBytes, 0), order: list.New(), items: map[K]*list.Element{}}
}

// Get returns the value under k and marks it used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*item[K, V]).val, true
}

// Add keeps v under k (replacing what was there), counting size bytes
// against the budget, and drops least recently used values until the cache
// fits. A value larger than the whole budget is not kept.
func (c *Cache[K, V]) Add(k K, v V, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.remove(el)
	}
	size = max(size, 0)
	if size > c.max {
		return
	}
	c.items[k] = c.order.PushFront(&item[K, V]{key: k, val: v, size: size})
	c.used += size
	for c.used > c.max {
		c.remove(c.order.Back())
	}
}

func (c *Cache[K, V]) remove(el *list.Element) {
	it := c.order.Remove(el).(*item[K, V])
	delete(c.items, it.key)
	c.used -= it.size
}

// Len is the number of values kept.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// Bytes is the total size of the values kept.
func (c *Cache[K, V]) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
