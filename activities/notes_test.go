package activities

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/investigation"
)

// Every language a conclusion can be written in has every note, with the
// same verbs as the English one, in the same order.
func TestEveryLanguageHasEveryNote(t *testing.T) {
	verbs := func(s string) (out []string) {
		for i := 0; i < len(s)-1; i++ {
			if s[i] == '%' {
				out = append(out, s[i:i+2])
				i++
			}
		}
		return out
	}
	var fields func(v reflect.Value, name string, f func(name, s string))
	fields = func(v reflect.Value, name string, f func(name, s string)) {
		for i := range v.NumField() {
			switch fv := v.Field(i); fv.Kind() {
			case reflect.String:
				f(name+v.Type().Field(i).Name, fv.String())
			case reflect.Struct:
				fields(fv, name+v.Type().Field(i).Name+".", f)
			}
		}
	}
	en := map[string]string{}
	fields(reflect.ValueOf(localNotes["en"]), "", func(name, s string) { en[name] = s })
	require.Greater(t, len(en), 20)
	for code := range investigation.Languages {
		n, ok := localNotes[code]
		require.True(t, ok, code)
		fields(reflect.ValueOf(n), "", func(name, s string) {
			require.NotEmpty(t, s, "%s: %s", code, name)
			require.Equal(t, verbs(en[name]), verbs(s), "%s: %s", code, name)
		})
	}
}

// A direct answer cut short says why in the answer's language: the
// workflow's reasons are said in it, the analyst's words after a stop stay
// as written, and a reason it does not know stays as it is.
func TestCutShortNoteSaysTheReasonInTheLanguage(t *testing.T) {
	require.Equal(t, "(This answer was cut short: this exchange used its 2 tool calls.)", CutShortNote("en", ToolCallsReason(2)))
	require.Equal(t, "(This answer was cut short: x.)", CutShortNote("", "x"))
	for why, want := range map[string]string{
		ToolCallsReason(2): "このやり取りのツール呼び出し 2 回を使い切りました",
		TimeBudgetReason(investigation.Duration(10 * 60e9)): "このやり取りの時間予算 10m を使い切りました",
		StoppedReason(""):                        "分析者が停止しました",
		StoppedReason("enough, thanks"):          "分析者が停止しました: enough, thanks",
		"stopped by the analysts":                "stopped by the analysts",
		"this exchange used its  tool calls":     "this exchange used its  tool calls",
		"the investigation stopped waiting here": "the investigation stopped waiting here",
	} {
		require.Equal(t, "（この回答は途中で打ち切られました: "+want+"）", CutShortNote("ja", why), why)
	}
	// The workflow records them in English, as before.
	require.Equal(t, "stopped by the analyst: enough", StoppedReason("enough"))
	require.Equal(t, "this exchange used its time budget of 10m", TimeBudgetReason(investigation.Duration(10*60e9)))
}

// The verdict check's notes are in the report's language; what the model
// is asked to fix stays English, as its prompt is.
func TestVerdictCheckNotesFollowTheLanguage(t *testing.T) {
	bad := `{"report":"## 概要\n侵害。","evidence":[{"step_id":"step_99","tool":"get_alert","fact":"root シェル"},` +
		`{"step_id":"step_1","tool":"port_scanner","fact":"ポート 22"}],"reason":"起きた。","verdict":"true_positive","confidence":"high"}`
	c, sent := concludeIn(t, "ja", bad, bad)
	require.Contains(t, sent[1], `evidence item 2: it names tool \"port_scanner\", which step_1 did not call (it called get_alert)`)
	require.Equal(t, []string{
		`証拠項目 1 を除外しました: ステップ "step_99" を挙げていますが、このステップはこの調査で実行されていません`,
		`証拠項目 2 を除外しました: ツール "port_scanner" を挙げていますが、step_1 はこれを呼び出していません（呼び出したのは get_alert です）`,
		"判定 true_positive (high) は有効な証拠に基づいていないため、undetermined (low) とします",
	}, c.Notes)

	// A change of the standing verdict refused, in a follow-up's review.
	follow := VerdictContext{Turn: 2, Ran: ran, Standing: standing, Analyst: true}
	_, notes, _ := follow.settle(modelVerdict{Verdict: "benign", Confidence: "high", Reason: "r",
		Evidence: []investigation.Evidence{{StepID: "step_2", Tool: "bigquery_agent", Fact: "an earlier fact"}}}, "ja")
	require.Len(t, notes, 1)
	require.True(t, strings.HasPrefix(notes[0], "回答は benign (high) を示しましたが、"), notes[0])
	require.True(t, strings.HasSuffix(notes[0], "判定は true_positive (high) のままです"), notes[0])
	// A lower verdict of a follow-up no analyst asked waits for one.
	follow.Analyst = false
	_, notes, _ = follow.settle(modelVerdict{Verdict: "benign", Confidence: "high", Reason: "r",
		Evidence: []investigation.Evidence{{StepID: "answer", Tool: "abuseipdb_check", Fact: "a new fact"}}}, "ja")
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "分析者の確認を待ち")
}
