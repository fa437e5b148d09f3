package main

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// barrier counts the workers whose Stop has begun; each Stop drains (waits)
// until every worker's Stop has begun, or gives up after patience: stops
// that overlap all return at once, one after another each waits it out.
type barrier struct {
	n, begun, late atomic.Int32
	all            chan struct{}
	once           sync.Once
	patience       time.Duration
}

func newBarrier(n int) *barrier {
	b := &barrier{all: make(chan struct{}), patience: 2 * time.Second}
	b.n.Store(int32(n))
	return b
}

func (b *barrier) stop() {
	if b.begun.Add(1) == b.n.Load() {
		b.once.Do(func() { close(b.all) })
	}
	select {
	case <-b.all:
	case <-time.After(b.patience):
		b.late.Add(1)
	}
}

// fakeWorker drains through the barrier: its Stop returns once every
// worker is stopping, as real workers' drains overlap when stopped together.
type fakeWorker struct {
	b       *barrier
	stopped atomic.Int32
	fail    error // Run returns it by itself (a fatal error)
}

func (f *fakeWorker) Stop() { f.stopped.Add(1); f.b.stop() }

func (f *fakeWorker) Run(interrupt <-chan any) error {
	if f.fail != nil {
		return f.fail
	}
	<-interrupt
	f.Stop()
	return nil
}

// TestSIGTERMStopsEveryWorkerAtOnce: on SIGTERM the provider and admission
// workers kept polling while the investigation worker drained, then each
// drained in turn, so a stop could take three stop timeouts or more. Every
// worker now stops when the signal arrives: no drain waits for another's.
func TestSIGTERMStopsEveryWorkerAtOnce(t *testing.T) {
	b := newBarrier(4)
	main := &fakeWorker{b: b}
	others := []*fakeWorker{{b: b}, {b: b}, {b: b}}
	interrupt := make(chan any, 1)
	done := make(chan error, 1)
	go func() { done <- runWorkers(interrupt, main, []stopper{others[0], others[1], others[2]}) }()

	time.Sleep(50 * time.Millisecond)
	if n := b.begun.Load(); n != 0 {
		t.Fatalf("%d workers stopped before the signal", n)
	}
	start := time.Now()
	interrupt <- "terminated"
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("runWorkers did not return")
	}
	if late := b.late.Load(); late > 0 {
		t.Errorf("%d of 4 workers drained alone, waiting for another's stop (took %s); all must stop at once", late, time.Since(start).Round(time.Millisecond))
	}
	for i, w := range append([]*fakeWorker{main}, others...) {
		if w.stopped.Load() == 0 {
			t.Errorf("worker %d was not stopped", i)
		}
	}
}

// TestAFailedWorkerStopsTheOthers: when the investigation worker stops by
// itself (a fatal error), the others stop too and its error is returned.
func TestAFailedWorkerStopsTheOthers(t *testing.T) {
	b := newBarrier(1) // only the other stops
	other := &fakeWorker{b: b}
	fatal := errors.New("namespace not found")
	err := runWorkers(make(chan any), &fakeWorker{b: b, fail: fatal}, []stopper{other})
	if !errors.Is(err, fatal) {
		t.Errorf("runWorkers returned %v, want the worker's own error", err)
	}
	if other.stopped.Load() != 1 {
		t.Errorf("the other worker stopped %d times, want once", other.stopped.Load())
	}
}
