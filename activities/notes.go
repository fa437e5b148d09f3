package activities

import (
	"fmt"
	"strconv"
	"strings"
)

// What the code (not the model) tells the analyst about a report, a
// verdict or an answer, in the investigation's language
// (investigation.Languages): one table, so a language has every note
// (TestEveryLanguageHasEveryNote). The workflow calls CutShortNote,
// CheckedNote and the cut reasons too: workflow code, so keep them
// deterministic; a note's text is a payload (an event, the conclusion),
// never a command.
type notes struct {
	// The sentence that leads a report whose verdict the code did not keep
	// (overruledNote): a first verdict made undetermined, a change refused,
	// a lower verdict of a follow-up no analyst asked (waitsKept); and the
	// reason of a verdict it lowered.
	undetermined, kept, waitsKept, reason string
	// proposed labels the model's own summary of such a report, quoted
	// under the sentence (investigation.OverruledSummary).
	proposed string
	// The same leading a direct answer whose verdict the review did not
	// keep: the answer may say the verdict changed.
	answerUndetermined, answerKept, answerWaits string
	// The verdict check's notes (settle) and their event's text
	// (CheckedNote): an item dropped with its problem, a change refused, a
	// lower verdict that waits for an analyst, a first verdict lowered
	// because it rests on no valid evidence or no tool's result.
	checked, dropped, refused, waits, lowered, noValid, noTool string
	problems                                                   problemTexts
	// calls: what a step called in this exchange, and in an earlier one,
	// and an empty list.
	called, calledEarlier, none string
	// cutShort ends a direct answer cut short; its reason is one of the
	// workflow's (stopped, toolCalls, timeBudget), said in the language.
	cutShort                       string
	stopped, toolCalls, timeBudget string
	// A loop's answer laid out from what it had (CutAnswer): its header,
	// with the reason, and the headings of its parts.
	cutAnswer, lastNotes, noResults, toolResults string
	// unplanned answers a follow-up whose plan could not be made.
	unplanned string
}

// problemTexts say why an evidence item is invalid (evidenceProblem).
type problemTexts struct {
	noFact, pseudoTool, analystSilent, notRun, noTool, wrongTool string
}

var localNotes = map[string]notes{
	"en": {
		proposed:           "What the model proposed (%s, not applied), as it wrote it:",
		reason:             "The conclusion said %s, but none of its evidence names a step that ran in this investigation and a tool it called.",
		undetermined:       "**Verdict check:** the conclusion proposed %s, but none of its evidence names a step that ran in this investigation and a tool it called, so the verdict is %s.",
		kept:               "**Verdict check:** the conclusion proposed %s, but a change needs evidence from this exchange and a reason (and, to a lower verdict, a tool's result of this exchange), so the standing verdict %s stays.",
		waitsKept:          "**Verdict check:** the conclusion proposed %s in a follow-up queued for an arriving alert, which no analyst asked, and a lower verdict proposed there waits for an analyst, so the verdict stays %s.",
		answerUndetermined: "**Verdict check:** this answer proposed %s, but its evidence names no step that ran in this investigation with a tool's result that backs it: the verdict was not set, it is %s.",
		answerKept:         "**Verdict check:** this answer proposed %s, but a change needs evidence from this exchange and a reason (and, to a lower verdict, a tool's result of this exchange): the change was not accepted, the verdict stays %s.",
		answerWaits:        "**Verdict check:** this answer proposed %s in a follow-up queued for an arriving alert, which no analyst asked, and a lower verdict proposed there waits for an analyst: the change was not accepted, the verdict stays %s.",
		checked:            "the verdict's evidence was checked:",
		dropped:            "dropped evidence item %d: %s",
		refused:            "the answer proposed %s, but a change needs evidence from this exchange and a reason (and, to a lower verdict, a tool's result of this exchange): the verdict stays %s",
		waits:              "a follow-up queued for an arriving alert (no analyst spoke) proposed %s, lower than the standing verdict %s: it waits for an analyst, and the verdict stays %s",
		lowered:            "the verdict %s rests on %s: it is %s",
		noValid:            "no valid evidence",
		noTool:             "no tool's result",
		problems: problemTexts{
			noFact:     "it states no fact",
			pseudoTool: "step_id %q takes no tool, and it names %q",
			analystSilent: "it cites the analyst, but no analyst said anything in this exchange (its question was not theirs, and no hint or answer came): " +
				"cite the step and tool whose result showed the fact, keep the standing verdict's analyst item unchanged, or leave the item out",
			notRun:    "it names step %q, which did not run in this investigation",
			noTool:    "it names no tool of %s: name the tool whose result showed the fact (%s), or cite the step that called it",
			wrongTool: "it names tool %q, which %s did not call (%s)",
		},
		called:        "it called %s",
		calledEarlier: "an earlier exchange's %s called %s",
		none:          "none",
		cutShort:      "(This answer was cut short: %s.)",
		stopped:       "stopped by the analyst",
		toolCalls:     "this exchange used its %s tool calls",
		timeBudget:    "this exchange used its time budget of %s",
		cutAnswer:     "(Not written by the model: the work was cut short (%s) before it answered. What it had so far follows, as it was: its last notes and the results of its tool calls.)",
		lastNotes:     "Last notes:",
		noResults:     "No tool call had returned a result.",
		toolResults:   "Tool results:",
		unplanned:     "(Not written by the model: this follow-up was not investigated, because no usable plan could be made for it. The verdict and the earlier conclusion stand as they were.)",
	},
	"ja": {
		proposed:           "モデルが示した内容（%s、適用されていません）。モデルが書いたとおり:",
		reason:             "結論は %s を示しましたが、その証拠のどれも、この調査で実行されたステップとそのステップが呼び出したツールを示していません。",
		undetermined:       "**判定の検証:** 結論は %s を示しましたが、この調査で実行されたステップとそのステップが呼び出したツールを示す証拠が一つもないため、判定は %s とします。",
		kept:               "**判定の検証:** 結論は %s を示しましたが、判定を変えるには今回のやり取りの証拠と理由（より低い判定への変更には今回のやり取りのツールの結果も）が必要なため、これまでの判定 %s を維持します。",
		waitsKept:          "**判定の検証:** 分析者が尋ねたのではない、到着したアラートのために追加されたフォローアップで結論は %s を示しましたが、そこで示されたより低い判定は分析者の確認を待つため、判定は %s のままです。",
		answerUndetermined: "**判定の検証:** この回答は %s を示しましたが、その証拠は、この調査で実行されたステップとそれを裏付けるツールの結果を示していないため、判定は設定されず %s です。",
		answerKept:         "**判定の検証:** この回答は %s を示しましたが、判定を変えるには今回のやり取りの証拠と理由（より低い判定への変更には今回のやり取りのツールの結果も）が必要なため、変更は受け入れられず、判定は %s のままです。",
		answerWaits:        "**判定の検証:** 分析者が尋ねたのではない、到着したアラートのために追加されたフォローアップでこの回答は %s を示しましたが、そこで示されたより低い判定は分析者の確認を待つため、変更は受け入れられず、判定は %s のままです。",
		checked:            "判定の証拠を検証しました:",
		dropped:            "証拠項目 %d を除外しました: %s",
		refused:            "回答は %s を示しましたが、判定を変えるには今回のやり取りの証拠と理由（より低い判定への変更には今回のやり取りのツールの結果も）が必要なため、判定は %s のままです",
		waits:              "到着したアラートのために追加されたフォローアップ（分析者は発言していません）は %s を示しましたが、これまでの判定 %s より低いため分析者の確認を待ち、判定は %s のままです",
		lowered:            "判定 %s は%sに基づいていないため、%s とします",
		noValid:            "有効な証拠",
		noTool:             "ツールの結果",
		problems: problemTexts{
			noFact:     "事実が書かれていません",
			pseudoTool: "step_id %q はツールを取りませんが、%q を挙げています",
			analystSilent: "分析者を根拠にしていますが、今回のやり取りで分析者は何も述べていません（質問は分析者のものではなく、ヒントも回答もありませんでした）: " +
				"事実を示した結果のステップとツールを挙げるか、これまでの判定の analyst 項目をそのまま残すか、この項目を省いてください",
			notRun:    "ステップ %q を挙げていますが、このステップはこの調査で実行されていません",
			noTool:    "%s のツールを挙げていません: 事実を示した結果のツール（%s）を挙げるか、それを呼び出したステップを挙げてください",
			wrongTool: "ツール %q を挙げていますが、%s はこれを呼び出していません（%s）",
		},
		called:        "呼び出したのは %s です",
		calledEarlier: "以前のやり取りの %s が呼び出したのは %s です",
		none:          "なし",
		cutShort:      "（この回答は途中で打ち切られました: %s）",
		stopped:       "分析者が停止しました",
		toolCalls:     "このやり取りのツール呼び出し %s 回を使い切りました",
		timeBudget:    "このやり取りの時間予算 %s を使い切りました",
		cutAnswer:     "（モデルが書いたものではありません: 回答の前に作業が打ち切られました（%s）。ここまでの内容、つまり最後のメモとツール呼び出しの結果を、そのまま示します。）",
		lastNotes:     "最後のメモ:",
		noResults:     "結果を返したツール呼び出しはありませんでした。",
		toolResults:   "ツール呼び出しの結果:",
		unplanned:     "（モデルが書いたものではありません: 使える計画を作れなかったため、このフォローアップは調査されていません。判定とこれまでの結論はそのまま変わりません。）",
	},
}

// notesIn returns the notes in language, English when it has none.
func notesIn(language string) notes {
	if n, ok := localNotes[language]; ok {
		return n
	}
	return localNotes["en"]
}

// overruledNote is the sentence that leads a report whose verdict the
// code did not keep; waits says the verdict was a lower one that waits for
// an analyst (VerdictContext.waitsForAnalyst).
func overruledNote(language, proposed string, kept fmt.Stringer, standing, waits bool) string {
	n := notesIn(language)
	switch {
	case waits:
		return fmt.Sprintf(n.waitsKept, proposed, kept)
	case standing:
		return fmt.Sprintf(n.kept, proposed, kept)
	}
	return fmt.Sprintf(n.undetermined, proposed, kept)
}

// answerOverruledNote is the sentence that leads a direct answer whose
// verdict the review did not keep.
func answerOverruledNote(language, proposed string, kept fmt.Stringer, standing, waits bool) string {
	n := notesIn(language)
	switch {
	case waits:
		return fmt.Sprintf(n.answerWaits, proposed, kept)
	case standing:
		return fmt.Sprintf(n.answerKept, proposed, kept)
	}
	return fmt.Sprintf(n.answerUndetermined, proposed, kept)
}

// UnplannedNote answers a follow-up whose plan could not be made, in
// language.
func UnplannedNote(language string) string { return notesIn(language).unplanned }

// CheckedNote is the text of the event that lists the verdict check's
// notes.
func CheckedNote(language string) string { return notesIn(language).checked }

// The reasons the workflow cuts an exchange short, as it records them (the
// stop event, State.StopReason, EndedEarly, CutAnswer's input): in English.
// CutShortNote says them in the answer's language.

// StoppedReason is a stop's reason; the analyst's own words, if any, follow.
func StoppedReason(said string) string {
	if said == "" {
		return localNotes["en"].stopped
	}
	return localNotes["en"].stopped + ": " + said
}

// ToolCallsReason is the reason of an exchange that used its n tool calls.
func ToolCallsReason(n int) string {
	return fmt.Sprintf(localNotes["en"].toolCalls, strconv.Itoa(n))
}

// TimeBudgetReason is the reason of an exchange that used its time budget.
func TimeBudgetReason(budget fmt.Stringer) string {
	return fmt.Sprintf(localNotes["en"].timeBudget, budget.String())
}

// CutShortNote is the note a direct answer cut short for why ends with, in
// language. A reason of the workflow's is said in language (the analyst's
// words after a stop stay as they were written); any other stays as it is.
func CutShortNote(language, why string) string {
	return fmt.Sprintf(notesIn(language).cutShort, cutReasonIn(language, why))
}

// cutReasonIn says one of the workflow's English cut reasons in language.
func cutReasonIn(language, why string) string {
	en, to := localNotes["en"], notesIn(language)
	if rest, ok := strings.CutPrefix(why, en.stopped); ok && (rest == "" || strings.HasPrefix(rest, ": ")) {
		return to.stopped + rest
	}
	for _, f := range [][2]string{{en.toolCalls, to.toolCalls}, {en.timeBudget, to.timeBudget}} {
		prefix, suffix, _ := strings.Cut(f[0], "%s")
		if len(why) > len(prefix)+len(suffix) && strings.HasPrefix(why, prefix) && strings.HasSuffix(why, suffix) {
			return fmt.Sprintf(f[1], why[len(prefix):len(why)-len(suffix)])
		}
	}
	return why
}
