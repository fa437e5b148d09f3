package agentclient

import (
	"context"
	"time"

	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
)

func TestStatusCommand(t *testing.T) {
	f := newFakeStream("inv", &fakeRun{id: "A", status: running})
	f.st = investigation.Status{Phase: investigation.PhaseExecuting, Turn: 1, Request: "r", LastSeq: 3}
	f.st.Usage = investigation.Usage{Calls: 2, PromptTokens: 1_000_000, Model: "gemini-2.5-flash"}
	f.st.ByPhase.Plan = f.st.Usage
	var out strings.Builder
	c := testClient(f)
	c.prices = pricing.Default()
	require.NoError(t, c.ShowStatus(testCtx(t), &out, "inv", true))
	require.Contains(t, out.String(), `"phase": "executing"`)
	require.Contains(t, out.String(), `"last_seq": 3`)
	require.Regexp(t, `"cost": \{\s*"amount": 0.3,\s*"currency": "USD"`, out.String(), "the status carries its cost estimate: 1M prompt tokens at 0.30 USD")

	out.Reset()
	require.NoError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false))
	require.Contains(t, out.String(), "  phase:    executing\n")

	// The verdict and how it came to be, in text and JSON.
	f.st.Verdict = &investigation.Verdict{Verdict: "benign", Confidence: "medium", Reason: "approved pentest"}
	f.st.VerdictHistory = []investigation.VerdictChange{{Turn: 1, Verdict: "true_positive", Confidence: "high", Reason: "login after failures"},
		{Turn: 3, Verdict: "benign", Confidence: "medium", Reason: "approved pentest"}}
	out.Reset()
	require.NoError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false))
	require.Contains(t, out.String(), "VERDICT  benign (medium confidence)\n  why: approved pentest\n")
	require.Contains(t, out.String(), "Verdict history:\n  - turn 1: true_positive (high): login after failures\n  - turn 3: benign (medium): approved pentest\n")
	out.Reset()
	require.NoError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", true))
	require.Contains(t, out.String(), `"verdict_history": [`)

	f.stErr = serviceerror.NewNotFound("workflow not found")
	require.EqualError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false), "no investigation with ID inv")
	f.stErr = serviceerror.NewQueryFailed("unknown queryType status. KnownQueryTypes=[progress]")
	require.EqualError(t, testClient(f).ShowStatus(testCtx(t), &out, "inv", false), "investigation inv does not answer status queries: it runs an older version of the workflow")
}

// storedOnly is a progress store holding only a stored status.
type storedOnly struct{ st investigation.Status }

func (s storedOnly) After(context.Context, string, int, int) ([]investigation.Event, error) {
	return nil, nil
}

func (s storedOnly) Watch(ctx context.Context, _ string, _ int, _ func([]investigation.Event)) error {
	<-ctx.Done()
	return nil
}

func (s storedOnly) Status(context.Context, string) (investigation.Status, time.Time, bool, error) {
	return s.st, time.Now(), true, nil
}

// A followed turn ends with the status its run stored with the conclusion
// when that is recent and idle (no query, which needs a worker); a stale or
// busy stored status leaves the answer to the query.
func TestTurnStatusPrefersTheStoredIdleStatus(t *testing.T) {
	f := newFakeStream("inv", &fakeRun{id: "A", status: running})
	f.st = investigation.Status{Phase: investigation.PhaseExecuting, LastSeq: 9, Request: "from the query"}
	c := testClient(f)
	for _, tc := range []struct {
		name   string
		stored investigation.Status
		want   string
	}{
		{"idle, with the conclusion", investigation.Status{Phase: investigation.PhaseIdle, LastSeq: 7, Request: "stored"}, "stored"},
		{"idle, stored before the conclusion", investigation.Status{Phase: investigation.PhaseIdle, LastSeq: 6, Request: "stored"}, "from the query"},
		{"busy", investigation.Status{Phase: investigation.PhaseConcluding, LastSeq: 7, Request: "stored"}, "from the query"},
	} {
		c.progress = storedOnly{tc.stored}
		st, err := c.turnStatus(testCtx(t), "inv", "inv", 7)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, st.Request, tc.name)
	}
}
