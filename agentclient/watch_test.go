package agentclient

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/investigation"
)

// lossyStore is a progress store whose listener delivers the first
// delivered events and then nothing new, as a listener that missed a
// write does; After reads every stored event.
type lossyStore struct {
	mu        sync.Mutex
	events    []investigation.Event
	delivered int
	afters    int // After calls
}

func (s *lossyStore) put(events ...investigation.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, events...)
}

func (s *lossyStore) After(_ context.Context, _ string, after, limit int) ([]investigation.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afters++
	var out []investigation.Event
	for _, e := range s.events {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *lossyStore) Watch(ctx context.Context, _ string, _ int, got func([]investigation.Event)) error {
	s.mu.Lock()
	first := slices.Clone(s.events[:s.delivered])
	s.mu.Unlock()
	got(first)
	<-ctx.Done()
	return ctx.Err()
}

func (s *lossyStore) Status(context.Context, string) (investigation.Status, time.Time, bool, error) {
	return investigation.Status{}, time.Time{}, false, nil
}

func (s *lossyStore) afterCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.afters
}

// TestQuietChildIsPolledLessOften: a follower with the store asks a
// sub-agent's run for news at the poll interval only while it has some;
// a child with nothing new is asked less and less often (up to
// childQuietMax), where it was asked at every interval.
func TestQuietChildIsPolledLessOften(t *testing.T) {
	oldPoll, oldChild, oldFirst := pollInterval, childQuietMax, quietFirst
	pollInterval, childQuietMax, quietFirst = 10*time.Millisecond, 200*time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() { pollInterval, childQuietMax, quietFirst = oldPoll, oldChild, oldFirst })

	events := []investigation.Event{
		{Seq: 1, Kind: investigation.EventNote, Text: "e1"},
		{Seq: 2, Kind: investigation.EventToolCall, Text: "bigquery_agent logins", Child: "inv/bq-1"},
	}
	f := newFakeStream("inv", &fakeRun{id: "P", status: running, events: events})
	f.add("inv/bq-1", &fakeRun{id: "K", status: running, events: []investigation.Event{{Seq: 1, Kind: investigation.EventNote, Text: "c1"}}})
	c := testClient(f)
	c.progress = &lossyStore{events: events, delivered: len(events)}

	ctx, cancel := context.WithTimeout(testCtx(t), 1200*time.Millisecond)
	defer cancel()
	var out strings.Builder
	require.ErrorAs(t, c.watch(ctx, &out, "inv", 1), new(*InterruptedError))
	require.Contains(t, out.String(), "[bigquery]   note: c1")
	child := 0
	for _, q := range f.queries {
		if strings.HasPrefix(q, "inv/bq-1/") {
			child++
		}
	}
	// Every 10 ms would be about 120 queries; doubling up to 200 ms is
	// about 10.
	require.Less(t, child, 20, "queries of the quiet child in 1.2 s: %v", f.queries)
	require.Positive(t, child)
}

// TestFollowerReadsWhatTheListenerMissed: the answer to a follow-up is
// stored, the run stays open (idle, waiting for the next question), and
// the listener never delivers the conclusion. The follower sees the run's
// history move on without news and reads the store itself; it used to
// wait for the run to close (30 minutes idle), as `starter ask` did in a
// CI run after a stack restart.
func TestFollowerReadsWhatTheListenerMissed(t *testing.T) {
	oldFirst, oldMax := quietFirst, quietMax
	quietFirst, quietMax = 10*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { quietFirst, quietMax = oldFirst, oldMax })

	question := "What should we check next?"
	asked := []investigation.Event{
		{Seq: 1, Kind: investigation.EventNote, Text: "question recorded"},
		{Seq: 2, Kind: investigation.EventTurn, Text: question},
	}
	answered := []investigation.Event{
		{Seq: 3, Kind: investigation.EventConclusion, Text: "the answer"},
		{Seq: 4, Kind: investigation.EventIdle},
	}
	run := &fakeRun{id: "R", status: running, history: 40}
	f := newFakeStream("inv", run)
	store := &lossyStore{events: slices.Clone(asked), delivered: len(asked)}
	var stillFrom, stillTo int
	f.onDescribe = func(n int) {
		switch n {
		case 4: // quiet looks while the history stands still read nothing
			stillFrom = store.afterCalls()
		case 8:
			stillTo = store.afterCalls()
		case 9: // the answer is stored, and its waited write is in the history
			store.put(answered...)
			run.history = 52
		}
	}
	c := testClient(f)
	c.progress = store

	var out strings.Builder
	require.NoError(t, c.followText(testCtx(t), &out, "inv", 0, turnConclusion(question, 0)))
	require.Contains(t, out.String(), "the answer", "the conclusion the listener missed")
	require.Zero(t, stillTo-stillFrom, "store reads while the history stood still")
}
