package workflows

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/investigation"
)

// TestReplayRecordedHistories replays every history recorded from real runs
// (the e2e tests write them with UPDATE_TESTDATA=1) against the current
// workflow code: a change that breaks determinism fails here, and needs
// workflow.GetVersion. Each history replays under its original workflow ID,
// because child workflow IDs derive from it.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.history.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in testdata")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			file, err := os.Open(f)
			require.NoError(t, err)
			defer file.Close()
			hist, err := client.HistoryFromJSON(file, client.HistoryJSONOptions{})
			require.NoError(t, err)
			started := hist.Events[0].GetWorkflowExecutionStartedEventAttributes()
			require.NotNil(t, started)

			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Investigation, workflow.RegisterOptions{Name: investigation.WorkflowName})
			r.RegisterWorkflowWithOptions(BigQueryAgent, workflow.RegisterOptions{Name: investigation.BigQueryWorkflowName})
			logger := tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
			require.NoError(t, r.ReplayWorkflowHistoryWithOptions(logger, hist, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: started.GetWorkflowId(), RunID: started.GetOriginalExecutionRunId()},
			}))
		})
	}
}
