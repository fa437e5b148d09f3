package source

import (
	"sync"
	"time"
)

// failStreak doubles a wait while failures go on, up to a minute.
type failStreak struct {
	mu   sync.Mutex
	wait time.Duration
}

func (f *failStreak) next(base time.Duration) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if base <= 0 {
		base = time.Second
	}
	if f.wait < base {
		f.wait = base
	} else {
		f.wait = min(2*f.wait, time.Minute)
	}
	return f.wait
}

func (f *failStreak) reset() {
	f.mu.Lock()
	f.wait = 0
	f.mu.Unlock()
}
