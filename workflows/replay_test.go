package workflows

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/investigation"
)

// TestReplayRecordedHistories replays every history recorded from real runs
// (the e2e test writes one with UPDATE_TESTDATA=1) against the current
// workflow code: a change that breaks determinism fails here, and needs
// workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.history.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in testdata")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Investigation, workflow.RegisterOptions{Name: investigation.WorkflowName})
			logger := tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(logger, f))
		})
	}
}
