package transcript

import (
	"context"
	"os"
	"testing"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/testenv"
)

// TestAgainstEmulator runs the store and the cache in front of it on one
// Firestore emulator.
func TestAgainstEmulator(t *testing.T) {
	testenv.Firestore(t)
	fs, err := firestore.NewClient(context.Background(), testenv.Project)
	require.NoError(t, err)
	defer fs.Close()
	require.NotEmpty(t, os.Getenv("FIRESTORE_EMULATOR_HOST"))
	s := NewStore(fs)
	t.Run("store", func(t *testing.T) { testStore(t, s) })
	t.Run("cache", func(t *testing.T) { testCache(t, s) })
}

func testStore(t *testing.T, s *Store) {
	ctx := context.Background()
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

	fresh := put("wf-1", "t1-step_1-i2", Entry{Kind: KindModel, Text: "timed"})
	read, err := s.GetAll(ctx, "wf-1", []string{"t1-step_1-i2"})
	require.NoError(t, err)
	require.Equal(t, fresh, read[0], "Put returns exactly what a read returns, creation time included")

	_, err = s.GetAll(ctx, "wf-1", []string{"t1-step_1-i1", "missing"})
	var missing *MissingError
	require.ErrorAs(t, err, &missing)
	require.Equal(t, "missing", missing.Key)

	// A ref to a result the workflow kept inline has no key: Firestore
	// would answer InvalidArgument naming the document path (which a retry
	// never mends), so the store refuses it before asking.
	for _, bad := range []string{"", "a/b", ".", ".."} {
		_, err = s.GetAll(ctx, "wf-1", []string{"t1-step_1-i1", bad})
		var key *KeyError
		require.ErrorAs(t, err, &key, "key %q", bad)
		require.NotContains(t, err.Error(), "wf-1", "no store path in the error")
		_, err = s.Put(ctx, "wf-1", bad, Entry{Kind: KindTool})
		require.ErrorAs(t, err, &key, "key %q", bad)
	}

	none, err := s.GetAll(ctx, "wf-1", nil)
	require.NoError(t, err)
	require.Empty(t, none)
}
