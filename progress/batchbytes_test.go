package progress

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/investigation"
)

// A flush of a few large events (each under the 1 MiB document limit, far
// fewer than maxWrites) is more than one request may carry (Firestore's
// 10 MiB): Put splits its batches by bytes as well as by writes, and every
// event is stored.
func TestPutSplitsBatchesByBytes(t *testing.T) {
	ctx := context.Background()
	s, session := emulatorStore(t, "wf-progress-bytes")

	var events []investigation.Event
	for seq := 1; seq <= 12; seq++ {
		events = append(events, investigation.Event{Seq: seq, Kind: investigation.EventNote, Text: strings.Repeat(fmt.Sprint(seq%10), 900_000)})
	}
	// Before, the one commit was refused (and retried by the client) until
	// the deadline.
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, s.Put(pctx, session, events, &investigation.Status{Phase: "executing", LastSeq: 12}))
	got, err := s.After(ctx, session, 0, 100)
	require.NoError(t, err)
	require.Len(t, got, 12)
	require.Equal(t, events[11].Text, got[11].Text)
}
