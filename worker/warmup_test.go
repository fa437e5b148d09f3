package main

import (
	"context"
	"net"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/testenv"
)

// TestWarmUpFirestore: against a store that answers, the start-up read
// finds no document and reports nothing; against one that does not, it
// gives up within its bound and says why.
func TestWarmUpFirestore(t *testing.T) {
	testenv.Firestore(t)
	fs, err := firestore.NewClient(context.Background(), testenv.Project)
	require.NoError(t, err)
	defer fs.Close()
	require.NoError(t, warmUpFirestore(context.Background(), fs, warmUpTimeout))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())
	t.Setenv("FIRESTORE_EMULATOR_HOST", dead)
	down, err := firestore.NewClient(context.Background(), testenv.Project)
	require.NoError(t, err)
	defer down.Close()
	began := time.Now()
	require.Error(t, warmUpFirestore(context.Background(), down, 500*time.Millisecond))
	require.Less(t, time.Since(began), 5*time.Second, "the read is bounded")
}
