package alerts

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStoreCreateOnce: many deliveries of one alert at once store it once,
// none fails, the first import time stays, and its indicator keys are set.
func TestStoreCreateOnce(t *testing.T) {
	s := newTestStore(t)
	a := parseExample(t, "scc-cryptominer.json")
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for range 20 {
		wg.Go(func() {
			ok, err := s.Create(t.Context(), a)
			require.NoError(t, err)
			if ok {
				mu.Lock()
				created++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, created)
	got, err := s.Get(t.Context(), a.ID)
	require.NoError(t, err)
	require.NotEmpty(t, got.Indicators)
	first := got.ImportedAt
	time.Sleep(5 * time.Millisecond)
	ok, err := s.Create(t.Context(), a)
	require.NoError(t, err)
	require.False(t, ok)
	got, err = s.Get(t.Context(), a.ID)
	require.NoError(t, err)
	require.True(t, first.Equal(got.ImportedAt))
	_, err = s.Create(t.Context(), Alert{ID: "a/b"})
	require.Error(t, err)
}
