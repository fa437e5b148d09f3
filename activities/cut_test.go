package activities

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/transcript"
)

// A loop cut short answers from what it had without a model call: its last
// notes and every result, each within its share of the bound, a lost entry
// named as lost, and a line saying code wrote it and why. A retry returns
// the stored answer.
func TestCutAnswerIsWhatTheLoopHad(t *testing.T) {
	a, llm, ts := newActivities(t)
	ctx := context.Background()
	put := func(key string, e transcript.Entry) {
		_, err := ts.Put(ctx, "s", key, e)
		require.NoError(t, err)
	}
	put("k-i1", transcript.Entry{Kind: transcript.KindModel, Text: "Looking at the logins first."})
	put("k-i1-c1", transcript.Entry{Kind: transcript.KindTool, CallID: "c1", Tool: "search_alerts", Response: `{"alerts":[{"id":"a7"}]}`})
	put("k-i2", transcript.Entry{Kind: transcript.KindModel, Text: "Now the big one."})
	put("k-i2-c1", transcript.Entry{Kind: transcript.KindTool, CallID: "c2", Tool: "get_alert", Response: `{"data":"` + strings.Repeat("x", 40000) + `"}`})
	in := CutAnswerInput{Session: "s", Key: "k-cut", Reason: "stopped by the analyst: enough", MaxBytes: 4096, Transcript: []Ref{
		{Key: "k-i1"}, {Key: "k-i1-c1"}, {Key: "k-i2"}, {Key: "k-i2-c1"}, {Key: "k-i2-c2"},
		{CallID: "c4", Tool: "ask_user", Error: "the call was cut short: stopped by the analyst: enough"},
	}}
	out, err := a.CutAnswer(ctx, in)
	require.NoError(t, err)
	require.Empty(t, llm.Calls, "no model call")
	require.Equal(t, "k-cut", out.Key)
	require.LessOrEqual(t, len(out.Text), 4096)
	for _, want := range []string{
		"Not written by the model", "stopped by the analyst: enough",
		"Now the big one.", `search_alerts (c1):` + "\n" + `{"alerts":[{"id":"a7"}]}`, "get_alert (c2)", "k-i2-c2:\n" + lostAnswer,
		"ask_user (c4):\nerror: the call was cut short",
	} {
		require.Contains(t, out.Text, want)
	}
	require.NotContains(t, out.Text, "Looking at the logins first.", "only the last notes")
	stored, err := ts.GetAll(ctx, "s", []string{"k-cut"})
	require.NoError(t, err)
	require.Equal(t, out.Text, entryText(stored[0]), "stored where the step's answer is read")

	in.Transcript = nil
	again, err := a.CutAnswer(ctx, in)
	require.NoError(t, err)
	require.Equal(t, out.Text, again.Text, "a retry returns the stored answer")

	empty, err := a.CutAnswer(ctx, CutAnswerInput{Session: "s", Key: "e-cut", Reason: "stopped"})
	require.NoError(t, err)
	require.Contains(t, empty.Text, "No tool call had returned a result.")
}

// A cut answer in a ja investigation says its own words in Japanese: the
// header with the workflow's reason translated (the analyst's words after
// a stop as written) and the headings of its parts.
func TestCutAnswerFollowsTheLanguage(t *testing.T) {
	a, _, ts := newActivities(t)
	ctx := context.Background()
	_, err := ts.Put(ctx, "s", "k-i1", transcript.Entry{Kind: transcript.KindModel, Text: "ログインを確認中。"})
	require.NoError(t, err)
	out, err := a.CutAnswer(ctx, CutAnswerInput{Session: "s", Key: "k-cut", Reason: StoppedReason("enough"), MaxBytes: 4096,
		Language: "ja", Transcript: []Ref{{Key: "k-i1"}}})
	require.NoError(t, err)
	for _, want := range []string{"モデルが書いたものではありません", "分析者が停止しました: enough", "最後のメモ:", "ログインを確認中。", "結果を返したツール呼び出しはありませんでした。"} {
		require.Contains(t, out.Text, want)
	}
	for _, english := range []string{"Not written by the model", "stopped by the analyst", "Last notes:", "No tool call"} {
		require.NotContains(t, out.Text, english)
	}
}
