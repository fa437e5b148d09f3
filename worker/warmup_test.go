package main

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/testenv"
)

// searches records the alert searches it is asked for and answers err.
type searches struct {
	asked []alerts.Query
	err   error
}

func (s *searches) Search(_ context.Context, q alerts.Query) ([]alerts.Alert, error) {
	s.asked = append(s.asked, q)
	return nil, s.err
}

// TestWarmUpFirestore: against a store that answers, the start-up read
// finds no document, the alert search (search_alerts' query, on the real
// store) finds nothing, and it reports nothing; a search the store refuses
// is reported; against a store that does not answer, it gives up within its
// bound and says why.
func TestWarmUpFirestore(t *testing.T) {
	testenv.Firestore(t)
	fs, err := firestore.NewClient(context.Background(), testenv.Project)
	require.NoError(t, err)
	defer fs.Close()
	require.NoError(t, warmUpFirestore(context.Background(), fs, alerts.NewStore(fs), warmUpTimeout))
	rec := &searches{}
	require.NoError(t, warmUpFirestore(context.Background(), fs, rec, warmUpTimeout))
	require.Equal(t, []alerts.Query{{Indicators: []string{warmUpKey}, Limit: 1}}, rec.asked, "one search by indicator, as search_alerts sends")
	refused := &searches{err: errors.New("rpc error: code = PermissionDenied")}
	require.ErrorContains(t, warmUpFirestore(context.Background(), fs, refused, warmUpTimeout), "PermissionDenied")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())
	t.Setenv("FIRESTORE_EMULATOR_HOST", dead)
	down, err := firestore.NewClient(context.Background(), testenv.Project)
	require.NoError(t, err)
	defer down.Close()
	began := time.Now()
	require.Error(t, warmUpFirestore(context.Background(), down, alerts.NewStore(down), 500*time.Millisecond))
	require.Less(t, time.Since(began), 5*time.Second, "the read is bounded")
}
