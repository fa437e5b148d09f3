package agentclient

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/investigation"
)

// heldStore is a progress store that delivers its events once and then
// has nothing new.
type heldStore struct{ events []investigation.Event }

func (s *heldStore) After(context.Context, string, int, int) ([]investigation.Event, error) {
	return nil, nil
}

func (s *heldStore) Watch(ctx context.Context, _ string, _ int, got func([]investigation.Event)) error {
	got(s.events)
	<-ctx.Done()
	return ctx.Err()
}

func (s *heldStore) Status(context.Context, string) (investigation.Status, time.Time, bool, error) {
	return investigation.Status{}, time.Time{}, false, nil
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
	c.progress = &heldStore{events: events}

	ctx, cancel := context.WithTimeout(testCtx(t), 1200*time.Millisecond)
	defer cancel()
	var out strings.Builder
	require.NoError(t, c.watch(ctx, &out, "inv", 1))
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
