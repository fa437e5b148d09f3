package progress

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/investigation"
)

// fakeStore records each Put; gate, when set, holds every Put until it is
// closed, and fail fails the first fail Puts.
type fakeStore struct {
	mu    sync.Mutex
	puts  [][]int // the event numbers of each Put
	st    []int   // the status's LastSeq of each Put (0: none)
	gate  chan struct{}
	fail  int
	calls int
}

func (f *fakeStore) Put(ctx context.Context, _ string, events []investigation.Event, st *investigation.Status) error {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.fail {
		return errors.New("store unavailable")
	}
	var seqs []int
	for _, e := range events {
		seqs = append(seqs, e.Seq)
	}
	f.puts = append(f.puts, seqs)
	n := 0
	if st != nil {
		n = st.LastSeq
	}
	f.st = append(f.st, n)
	return nil
}

func (f *fakeStore) written() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]int(nil), f.puts...)
}

func evs(from, to int) []investigation.Event {
	var out []investigation.Event
	for s := from; s <= to; s++ {
		out = append(out, investigation.Event{Seq: s, Kind: investigation.EventStep})
	}
	return out
}

func stat(last int) *investigation.Status { return &investigation.Status{LastSeq: last} }

// TestEnqueueDoesNotWaitForTheStore: a queued write returns while the store
// is still held; a waiting Put returns only after it and every write queued
// before it are committed, in order, merged into one write where they
// queued up together, with the latest status.
func TestEnqueueDoesNotWaitForTheStore(t *testing.T) {
	f := &fakeStore{gate: make(chan struct{})}
	b := NewBehind(f, nil)
	// The store holds every write until the gate opens below: were
	// Enqueue to wait for it, the test would not get past these lines.
	b.Enqueue("s", evs(1, 2), stat(2))
	b.Enqueue("s", evs(3, 3), stat(3))
	b.Enqueue("s", evs(4, 5), stat(5))
	require.Empty(t, f.written())

	done := make(chan error, 1)
	go func() { done <- b.Put(context.Background(), "s", evs(6, 6), stat(6)) }()
	select {
	case err := <-done:
		t.Fatalf("a waiting Put returned before the store committed (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(f.gate)
	require.NoError(t, <-done)
	var all []int
	for _, p := range f.written() {
		all = append(all, p...)
	}
	require.Equal(t, []int{1, 2, 3, 4, 5, 6}, all, "every event once, in order")
	require.LessOrEqual(t, len(f.written()), 3, "writes that queued up together are merged")
	require.Equal(t, 6, f.st[len(f.st)-1], "the latest status is written last")
}

// TestWaitingPutSkipsWhatWasCommitted: the workflow sends again, in a
// waiting write, the events it wrote behind since its last one; what this
// worker committed is not written twice.
func TestWaitingPutSkipsWhatWasCommitted(t *testing.T) {
	f := &fakeStore{}
	b := NewBehind(f, nil)
	b.Enqueue("s", evs(1, 3), stat(3))
	b.Close(context.Background()) // committed
	require.NoError(t, b.Put(context.Background(), "s", evs(1, 5), stat(5)))
	w := f.written()
	require.Equal(t, []int{4, 5}, w[len(w)-1], "only what was not committed yet")

	// Another worker (no memory of the session) writes them all.
	g := &fakeStore{}
	require.NoError(t, NewBehind(g, nil).Put(context.Background(), "s", evs(1, 5), stat(5)))
	require.Equal(t, [][]int{{1, 2, 3, 4, 5}}, g.written())
}

// TestFailedWriteIsRetriedAndSentAgain: a queued write is retried; one that
// fails on every attempt is written by the next waiting Put, which sends
// its events again.
func TestFailedWriteIsRetriedAndSentAgain(t *testing.T) {
	f := &fakeStore{fail: 2}
	b := NewBehind(f, nil)
	b.Enqueue("s", evs(1, 2), stat(2))
	b.Close(context.Background())
	require.Equal(t, [][]int{{1, 2}}, f.written(), "retried until it is stored")

	g := &fakeStore{fail: attempts}
	b = NewBehind(g, nil)
	b.Enqueue("s", evs(1, 2), stat(2))
	b.Close(context.Background())
	require.Empty(t, g.written(), "given up after every attempt")
	require.NoError(t, b.Put(context.Background(), "s", evs(1, 3), stat(3)))
	require.Equal(t, [][]int{{1, 2, 3}}, g.written(), "the waiting write stores what was lost")
}

// TestFailedWriteBelowACommittedOneIsSentAgain: writes commit out of
// order; a batch that failed on every attempt, below one that committed,
// is stored by the next waiting Put, and only what committed is skipped.
func TestFailedWriteBelowACommittedOneIsSentAgain(t *testing.T) {
	f := &fakeStore{fail: attempts}
	b := NewBehind(f, nil)
	b.Enqueue("s", evs(1, 3), stat(3)) // fails on every attempt
	b.Close(context.Background())
	b.Enqueue("s", evs(4, 5), stat(5)) // commits
	b.Close(context.Background())
	require.NoError(t, b.Put(context.Background(), "s", evs(1, 6), stat(6)))
	require.Equal(t, [][]int{{4, 5}, {1, 2, 3, 6}}, f.written())
}

// TestSessionsDoNotWaitForEachOther: a session whose store write hangs
// does not hold up another session's waiting write.
func TestSessionsDoNotWaitForEachOther(t *testing.T) {
	slow := make(chan struct{})
	defer close(slow)
	s := &sessionStore{slow: slow, fast: &fakeStore{}}
	b := NewBehind(s, nil)
	b.Enqueue("slow", evs(1, 1), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, b.Put(ctx, "fast", evs(1, 1), nil))
}

type sessionStore struct {
	slow chan struct{}
	fast *fakeStore
}

func (s *sessionStore) Put(ctx context.Context, session string, events []investigation.Event, st *investigation.Status) error {
	if session == "slow" {
		select {
		case <-s.slow:
		case <-ctx.Done():
		}
		return nil
	}
	return s.fast.Put(ctx, session, events, st)
}

// TestCloseWaitsForQueuedWrites: a worker that stops writes what it queued
// first, and a Close whose context ends returns.
func TestCloseWaitsForQueuedWrites(t *testing.T) {
	f := &fakeStore{gate: make(chan struct{})}
	b := NewBehind(f, nil)
	b.Enqueue("s", evs(1, 1), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	b.Close(ctx)
	require.Empty(t, f.written(), "Close gave up at its deadline")
	close(f.gate)
	b.Close(context.Background())
	require.Equal(t, [][]int{{1}}, f.written())
}
