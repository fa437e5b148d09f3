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

	require.NoError(t, s.Put(ctx, "wf-1", "t1-step_1-i1", Entry{Kind: KindModel, Content: `{"role":"model"}`, Text: "first"}))
	require.NoError(t, s.Put(ctx, "wf-1", "t1-step_1-i1-c1", Entry{Kind: KindTool, CallID: "c1", Tool: "get_alert", Response: `{"id":"a"}`}))
	// A retried activity writes the same key again: the entry is replaced.
	require.NoError(t, s.Put(ctx, "wf-1", "t1-step_1-i1", Entry{Kind: KindModel, Content: `{"role":"model"}`, Text: "second"}))
	require.NoError(t, s.Put(ctx, "wf-2", "t1-step_1-i1", Entry{Kind: KindModel, Text: "other session"}))

	got, err := s.GetAll(ctx, "wf-1", []string{"t1-step_1-i1-c1", "t1-step_1-i1"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "c1", got[0].CallID, "entries come back in the order of the keys")
	require.Equal(t, "second", got[1].Text)
	require.False(t, got[1].CreatedAt.IsZero())

	_, err = s.GetAll(ctx, "wf-1", []string{"t1-step_1-i1", "missing"})
	require.ErrorContains(t, err, "transcript entry wf-1/missing is missing")

	none, err := s.GetAll(ctx, "wf-1", nil)
	require.NoError(t, err)
	require.Empty(t, none)
}
