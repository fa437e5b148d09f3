package progress

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/investigation"
)

// emulatorStore is a Store on a Firestore emulator started for the test
// (internal/testenv) and a session of its own, named
// prefix-<nanoseconds>; the client closes with the test.
func emulatorStore(t *testing.T, prefix string) (*Store, string) {
	t.Helper()
	testenv.Firestore(t)
	fs, err := firestore.NewClient(context.Background(), testenv.Project)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fs.Close() })
	return NewStore(fs), fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// TestAgainstEmulator: events are read back in order after a number,
// delivered to a listener as they are written, bounded to the latest
// MaxStored, and the status is the one written last.
func TestAgainstEmulator(t *testing.T) {
	ctx := context.Background()
	s, session := emulatorStore(t, "wf-progress")

	_, _, found, err := s.Status(ctx, session)
	require.NoError(t, err)
	require.False(t, found, "nothing stored yet")

	events := func(from, to int) []investigation.Event {
		var out []investigation.Event
		for seq := from; seq <= to; seq++ {
			out = append(out, investigation.Event{Seq: seq, Kind: investigation.EventNote, Text: fmt.Sprintf("note %d", seq)})
		}
		return out
	}
	require.NoError(t, s.Put(ctx, session, events(1, 3), &investigation.Status{Phase: "executing", LastSeq: 3}))

	got := make(chan []investigation.Event, 10)
	wctx, stop := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() { watched <- s.Watch(wctx, session, 1, func(b []investigation.Event) { got <- b }) }()
	require.Equal(t, events(2, 3), <-got, "the listener starts with what is stored after its number")
	require.NoError(t, s.Put(ctx, session, events(4, 5), &investigation.Status{Phase: "idle", LastSeq: 5}))
	var next []investigation.Event
	for len(next) < 2 {
		next = append(next, <-got...)
	}
	require.Equal(t, events(4, 5), next, "then gets each write as it happens")
	stop()
	require.ErrorIs(t, <-watched, context.Canceled)

	after, err := s.After(ctx, session, 2, 2)
	require.NoError(t, err)
	require.Equal(t, events(3, 4), after, "in order, after the number, at most the limit")
	st, at, found, err := s.Status(ctx, session)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "idle", st.Phase)
	require.False(t, at.IsZero())

	// A write past MaxStored deletes the events that many numbers older.
	require.NoError(t, s.Put(ctx, session, events(MaxStored+2, MaxStored+3), nil))
	all, err := s.After(ctx, session, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []int{1, 4, 5, MaxStored + 2, MaxStored + 3}, seqs(all), "events 2 and 3 are gone")
}

func seqs(evs []investigation.Event) []int {
	out := make([]int, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}
