package activities

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/investigation"
)

// TestDeliverAnswerKeepsLinkWhenCut checks that a long answer is cut, not
// the result around it: the stored result keeps both IDs and fits the cap.
func TestDeliverAnswerKeepsLinkWhenCut(t *testing.T) {
	a, _, ts := newActivities(t)
	link := investigation.ChildLink{WorkflowID: "inv-1-bq-k7", RunID: "0191-run"}
	long := map[string]string{
		"ascii":   strings.Repeat("198.51.100.23 failed SSH 41 times\n", 400),
		"runes":   strings.Repeat("ログイン失敗 ✓ ", 2000),
		"escapes": strings.Repeat("\"\\\t\x01", 3000), // JSON makes these longer
	}
	for name, answer := range long {
		for _, limit := range []int{400, 1000, 4096} {
			in := investigation.DeliverInput{ParentSession: "inv-1", ResultKey: "r1", CallID: "c1", Tool: "bigquery_agent",
				Answer: answer, Link: link, MaxResultBytes: limit}
			out, err := a.DeliverAnswer(context.Background(), in)
			require.NoError(t, err, name)
			require.True(t, out.Truncated, name)
			require.Greater(t, out.Bytes, limit, name)
			require.Equal(t, &link, out.Link, name)

			stored := ts.m["inv-1/r1"].Response
			require.LessOrEqual(t, len(stored), limit, "%s: the stored result fits the cap", name)
			require.Greater(t, len(stored), limit-40, "%s: and uses most of it", name)
			var got map[string]any
			require.NoError(t, json.Unmarshal([]byte(stored), &got), name)
			require.Equal(t, link.WorkflowID, got["child_workflow_id"], name)
			require.Equal(t, link.RunID, got["child_run_id"], name)
			require.Equal(t, true, got["truncated"], name)
			require.Contains(t, got["note"], "was cut to fit", name)
			text := got["answer"].(string)
			require.True(t, utf8.ValidString(text), name)
			require.True(t, strings.HasSuffix(text, "…"), name)
			require.True(t, strings.HasPrefix(answer, strings.TrimSuffix(text, "…")), "%s: the answer's start is kept", name)
		}
	}
}

func TestDeliverAnswerShortIsWhole(t *testing.T) {
	a, _, ts := newActivities(t)
	link := investigation.ChildLink{WorkflowID: "inv-1-bq-k7", RunID: "0191-run"}
	out, err := a.DeliverAnswer(context.Background(), investigation.DeliverInput{ParentSession: "inv-1", ResultKey: "r1",
		Answer: "3 failed logins <from> 198.51.100.23", Link: link, MaxResultBytes: 4096})
	require.NoError(t, err)
	require.False(t, out.Truncated)
	require.Equal(t, len(ts.m["inv-1/r1"].Response), out.Bytes)
	require.JSONEq(t, `{"answer":"3 failed logins <from> 198.51.100.23","child_workflow_id":"inv-1-bq-k7","child_run_id":"0191-run"}`, ts.m["inv-1/r1"].Response)

	// A cap too small even for the IDs still keeps them.
	out, err = a.DeliverAnswer(context.Background(), investigation.DeliverInput{ParentSession: "inv-1", ResultKey: "r2",
		Answer: strings.Repeat("x", 500), Link: link, MaxResultBytes: 50})
	require.NoError(t, err)
	require.True(t, out.Truncated)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(ts.m["inv-1/r2"].Response), &got))
	require.Equal(t, link.WorkflowID, got["child_workflow_id"])
	require.Equal(t, link.RunID, got["child_run_id"])
	require.Equal(t, "…", got["answer"])
}
