package lru

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEvictsLeastRecentlyUsedPastTheBudget(t *testing.T) {
	c := New[string, string](10)
	c.Add("a", "A", 4)
	c.Add("b", "B", 4)
	_, ok := c.Get("a") // a is now more recent than b
	require.True(t, ok)
	c.Add("c", "C", 4) // 12 > 10: b goes
	_, ok = c.Get("b")
	require.False(t, ok, "the least recently used value is dropped")
	for _, k := range []string{"a", "c"} {
		v, ok := c.Get(k)
		require.True(t, ok, k)
		require.Equal(t, string(rune(k[0]-'a'+'A')), v)
	}
	require.Equal(t, 2, c.Len())
	require.Equal(t, int64(8), c.Bytes())

	c.Add("a", "A2", 6) // replacing counts the new size only: 6 + 4
	v, _ := c.Get("a")
	require.Equal(t, "A2", v)
	require.Equal(t, int64(10), c.Bytes())
	require.Equal(t, 2, c.Len())
}

func TestValueOverTheBudgetIsNotKept(t *testing.T) {
	c := New[string, int](10)
	c.Add("small", 1, 3)
	c.Add("huge", 2, 11)
	_, ok := c.Get("huge")
	require.False(t, ok)
	_, ok = c.Get("small")
	require.True(t, ok, "an oversized value evicts nothing")

	off := New[string, int](0)
	off.Add("x", 1, 0)
	off.Add("y", 1, 1)
	_, ok = off.Get("y")
	require.False(t, ok, "a zero budget keeps nothing that has a size")
}

func TestConcurrentUseStaysWithinTheBudget(t *testing.T) {
	c := New[string, int](100)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := fmt.Sprint(g, "-", i%40)
				if v, ok := c.Get(k); ok {
					assert.Equal(t, i%40, v)
				}
				c.Add(k, i%40, 7)
				assert.LessOrEqual(t, c.Bytes(), int64(100))
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, c.Bytes(), int64(100))
	require.Equal(t, int64(c.Len())*7, c.Bytes(), "the byte count matches what is kept")
}
