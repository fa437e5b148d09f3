package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/gemini/standin"
	"github.com/secops-agent/investigator/internal/testenv"
)

// TestEncryptedInvestigationReadsTheLogs: with a payload key file, the
// BigQuery sub-agent's answer reaches its step. The child's result is
// bound to the child's workflow ID, so the parent must decode it as the
// child's: decoded as the parent's, it was refused "for another workflow"
// and the example concluded undetermined.
func TestEncryptedInvestigationReadsTheLogs(t *testing.T) {
	s := startEncStack(t)
	require.NoError(t, testenv.ResetFirestore(fsHost, testenv.Project))
	model.use(t, standin.Handler())
	res := starterEnv(t, s.env, nil, "investigate", "--alert", exampleAlert)
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Contains(t, res.stdout, "-> bigquery_agent")
	require.NotContains(t, res.stdout, "untrusted Temporal payload", "the sub-agent's own result is refused by its parent")
	require.Contains(t, res.stdout, "VERDICT  true_positive (high confidence)")
}
