package agentclient

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/secops-agent/investigator/investigation"
)

func TestStatusCommand(t *testing.T) {
	f := newFakeStream("inv", &fakeRun{id: "A", status: running})
	f.st = investigation.Status{Phase: investigation.PhaseExecuting, Turn: 1, Request: "r", LastSeq: 3}
	var out strings.Builder
	require.NoError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", true))
	require.Contains(t, out.String(), `"phase": "executing"`)
	require.Contains(t, out.String(), `"last_seq": 3`)

	out.Reset()
	require.NoError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false))
	require.Contains(t, out.String(), "  phase:    executing\n")

	f.stErr = serviceerror.NewNotFound("workflow not found")
	require.EqualError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false), "no investigation with ID inv")
	f.stErr = serviceerror.NewQueryFailed("unknown queryType status. KnownQueryTypes=[progress]")
	require.EqualError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false), "investigation inv does not answer status queries: it runs an older version of the workflow")
}
