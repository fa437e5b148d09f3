package activities

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/transcript"
)

// A key no transcript entry can have is refused the same way on every
// attempt: the activity fails at once instead of retrying for its whole
// time budget. An outage stays retryable.
func TestStoreErrorKeyIsNotRetried(t *testing.T) {
	err := storeError(fmt.Errorf("read transcript entry: %w", transcript.CheckKey("__x__")))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.True(t, app.NonRetryable())
	require.Equal(t, ErrTranscriptKey, app.Type())
	require.Equal(t, `"__x__" is not a transcript key`, app.Message())

	outage := errors.New("Firestore unavailable")
	require.Equal(t, outage, storeError(outage))
}
