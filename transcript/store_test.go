package transcript

import (
	"context"
	"os"
	"testing"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/testenv"
)

func TestStoreAgainstEmulator(t *testing.T) {
	testenv.Firestore(t)
	ctx := context.Background()
	fs, err := firestore.NewClient(ctx, testenv.Project)
	require.NoError(t, err)
	defer fs.Close()
	require.NotEmpty(t, os.Getenv("FIRESTORE_EMULATOR_HOST"))
	s := NewStore(fs)

	put := func(session, key string, e Entry) Entry {
		stored, err := s.Put(ctx, session, key, e)
		require.NoError(t, err)
		return stored
	}
	require.Equal(t, "first", put("wf-1", "t1-step_1-i1", Entry{Kind: KindModel, Content: `{"role":"model"}`, Text: "first"}).Text)
	put("wf-1", "t1-step_1-i1-c1", Entry{Kind: KindTool, CallID: "c1", Tool: "get_alert", Response: `{"id":"a"}`})
	// A stale attempt (or a retry) writes the same key again: the first
	// write stays, and the writer gets it back.
	require.Equal(t, "first", put("wf-1", "t1-step_1-i1", Entry{Kind: KindModel, Content: `{"role":"model","late":true}`, Text: "second"}).Text)
	put("wf-2", "t1-step_1-i1", Entry{Kind: KindModel, Text: "other session"})

	got, err := s.GetAll(ctx, "wf-1", []string{"t1-step_1-i1-c1", "t1-step_1-i1"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "c1", got[0].CallID, "entries come back in the order of the keys")
	require.Equal(t, "first", got[1].Text, "the late write did not replace the entry")
	require.False(t, got[1].CreatedAt.IsZero())

	_, err = s.GetAll(ctx, "wf-1", []string{"t1-step_1-i1", "missing"})
	var missing *MissingError
	require.ErrorAs(t, err, &missing)
	require.Equal(t, "missing", missing.Key)

	none, err := s.GetAll(ctx, "wf-1", nil)
	require.NoError(t, err)
	require.Empty(t, none)
}
