package agentclient

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

func TestPrinterPrintsEveryEventKind(t *testing.T) {
	var b strings.Builder
	p := &printer{out: &b, id: "inv-1"}
	events := []investigation.Event{
		{Kind: investigation.EventPlan, Plan: &plan.Plan{Objective: "Find out", Steps: []plan.Step{
			{ID: "step_1", Description: "Read the alert.", Tools: []string{"get_alert"}, Expected: "the IP"},
			{ID: "step_2", Description: "Think."},
		}}, Notes: []string{"removed unknown tools whois"}},
		{Kind: investigation.EventApproval, Text: "awaiting"},
		{Kind: investigation.EventApproval, Text: "revise: use the firewall logs"},
		{Kind: investigation.EventApproval, Text: "approved"},
		{Kind: investigation.EventStep, Step: "step_1", Text: "Read the alert."},
		{Kind: investigation.EventHint, Text: "the IP is our scanner"},
		{Kind: investigation.EventToolCall, Text: "get_alert a1"},
		{Kind: investigation.EventToolResult, Text: "ok 120 bytes"},
		{Kind: investigation.EventQuestion, Step: "step_2", Text: "Is host-7 a test box?", QuestionID: "q-1"},
		{Kind: investigation.EventAnswer, Text: "yes", QuestionID: "q-1"},
		{Kind: investigation.EventStepDone, Text: "Found it.\nTwice."},
		{Kind: investigation.EventInsight, Insights: []string{"it is a scanner"}},
		{Kind: investigation.EventPlanUpdate, Updates: []string{"cancel_step step_2 (done already)"}, Completed: []string{"step_1: Read the alert."}},
		{Kind: investigation.EventStop, Text: "stopped by the analyst: enough"},
		{Kind: investigation.EventConclusion, Text: "## Summary\n\nBenign.\n"},
		{Kind: investigation.EventIdle, Text: "waiting up to 30m0s for follow-up questions"},
		{Kind: investigation.EventNote, Text: "follow-up question queued: And the other host?"},
		{Kind: investigation.EventTurn, Turn: 2, Text: "And the other host?", Mode: "direct", Reason: "a short question"},
		{Kind: investigation.EventVerdictChanged, From: &investigation.Verdict{Verdict: "true_positive", Confidence: "high"},
			Verdict: &investigation.Verdict{Verdict: "benign", Confidence: "medium", Reason: "The analyst says it was the approved pentest.",
				Evidence: []investigation.Evidence{{StepID: "analyst", Fact: "SEC-1182 covers 198.51.100.23."}}},
			Reason: "The analyst says it was the approved pentest."},
		{Kind: investigation.EventConclusion, Text: "It was the pentest.", Verdict: &investigation.Verdict{Verdict: "benign", Confidence: "medium",
			Reason: "The analyst says it was the approved pentest.", Evidence: []investigation.Evidence{{StepID: "analyst", Fact: "SEC-1182 covers 198.51.100.23."}}}},
	}
	for _, e := range events {
		p.print(e)
	}
	want := `PLAN  Find out
  step_1  Read the alert. [get_alert]
          expect: the IP
  step_2  Think. [no tools]
  note: removed unknown tools whois
PLAN AWAITS APPROVAL: starter approve inv-1 | starter revise inv-1 "..."
  revision requested: use the firewall logs
  plan approved

STEP  step_1: Read the alert.
  hint: the IP is our scanner
  -> get_alert a1
  <- ok 120 bytes
QUESTION q-1 from step_2: Is host-7 a test box? — answer with: starter answer inv-1 "..."
  answer to q-1: yes
  done: Found it.
        Twice.
  insight: it is a scanner
  plan: cancel_step step_2 (done already)
  completed: step_1: Read the alert.
  pending:   (none)
  stopping early: stopped by the analyst: enough

==================== CONCLUSION ====================
      ## Summary

      Benign.
(the investigation stays open for follow-up questions: starter ask inv-1 "...")
  note: follow-up question queued: And the other host?

=== FOLLOW-UP (turn 2, mode direct): And the other host?

VERDICT CHANGED  true_positive (high) -> benign (medium)
  why: The analyst says it was the approved pentest.

==================== CONCLUSION ====================
      It was the pentest.

VERDICT  benign (medium confidence)
  why: The analyst says it was the approved pentest.
  - SEC-1182 covers 198.51.100.23. [analyst]
`
	require.Equal(t, want, b.String())
	require.True(t, p.concluded)
}

// While two steps run side by side, each step's lines name their step.
func TestPrinterNamesTheStepOfParallelLines(t *testing.T) {
	var b strings.Builder
	p := &printer{out: &b, id: "inv-1"}
	for _, e := range []investigation.Event{
		{Kind: investigation.EventStep, Step: "step_1", Text: "Read the alert."},
		{Kind: investigation.EventToolCall, Step: "step_1", Text: "get_alert a1"},
		{Kind: investigation.EventStep, Step: "step_3", Text: "Ask the logs."},
		{Kind: investigation.EventToolCall, Step: "step_3", Text: "bigquery_agent"},
		{Kind: investigation.EventToolResult, Step: "step_1", Text: "get_alert: 120 bytes"},
		{Kind: investigation.EventStepDone, Step: "step_1", Text: "Read."},
		{Kind: investigation.EventToolResult, Step: "step_3", Text: "bigquery_agent: 80 bytes"},
	} {
		p.print(e)
	}
	require.Equal(t, `
STEP  step_1: Read the alert.
  -> get_alert a1

STEP  step_3: Ask the logs.
[step_3]  -> bigquery_agent
[step_1]  <- get_alert: 120 bytes
[step_1]  done: Read.
  <- bigquery_agent: 80 bytes
`, b.String())
}

func TestPrefixWriterPrefixesEachLine(t *testing.T) {
	var b strings.Builder
	p := &printer{out: &prefixWriter{w: &b, prefix: "    [bigquery] "}}
	p.print(investigation.Event{Kind: investigation.EventNote, Text: "Recalled 2 memories"})
	p.print(investigation.Event{Kind: investigation.EventStep, Step: "bigquery", Text: "Find logins"})
	p.print(investigation.Event{Kind: investigation.EventStepDone, Text: "3 logins\nall failed"})
	require.Equal(t, "    [bigquery]   note: Recalled 2 memories\n\n    [bigquery] STEP  bigquery: Find logins\n    [bigquery]   done: 3 logins\n    [bigquery]         all failed\n", b.String())
}

func TestPrintStatus(t *testing.T) {
	var b strings.Builder
	RenderStatus(&b, "inv-1", "running", investigation.Status{
		Phase: investigation.PhaseWaitingForAnswer, Turn: 2, Request: "Did they get in?",
		Plan: plan.Plan{Objective: "Decide", Steps: []plan.Step{
			{ID: "step_1", Description: "Read.", Tools: []string{"get_alert"}, Status: plan.Done},
			{ID: "step_2", Description: "Ask.", Tools: []string{"ask_user"}, Status: plan.Running},
			{ID: "step_3", Description: "Search.", Tools: []string{"search_alerts"}, Status: plan.Pending},
			{ID: "step_4", Description: "Whois.", Tools: []string{"whois"}, Status: plan.Cancelled, Note: "duplicate"},
		}},
		Insights:  []investigation.Insight{{Turn: 2, Step: "step_1", Text: "known scanner"}},
		Hints:     []string{"ignore 10.0.0.0/8"},
		Questions: []investigation.Question{{ID: "q-1", Step: "step_2", Question: "Is host-7 a test box?"}},
		FollowUps: []string{"And host-8?"},
		Spend: spend(3, investigation.Usage{Calls: 2, PromptTokens: 400, OutputTokens: 100, Model: "gemini-2.5-pro"},
			investigation.Usage{Calls: 3, PromptTokens: 600, OutputTokens: 100, Model: "unknown-model"}),
		LastSeq: 17,
	}, pricing.Default())
	want := `Investigation inv-1
  phase:    waiting_for_answer
  turn:     2
  request:  Did they get in?

PLAN  Decide
  [x] step_1  Read. [get_alert] (done)
  [>] step_2  Ask. [ask_user] (running)
  [ ] step_3  Search. [search_alerts]
  [-] step_4  Whois. [whois] (cancelled)
              note: duplicate

Insights:
  - known scanner (turn 2, step_1)

Hints:
  - ignore 10.0.0.0/8

Questions waiting for an answer:
  q-1: Is host-7 a test box? (asked by step_2) — answer with: starter answer inv-1 --question q-1 "..."

Queued follow-up questions:
  - And host-8?

17 events, 3 tool calls, 5 model calls (1000 prompt + 200 output tokens; by phase: plan 500, steps 700, reflection 0, conclusion 0, sub-agent 0); estimated cost over 0.0015 USD (no price for unknown-model: starter --prices)
`
	require.Equal(t, want, b.String())

	b.Reset()
	RenderStatus(&b, "inv-1", "running", investigation.Status{Phase: investigation.PhaseIdle, Turn: 1}, pricing.Default())
	require.Contains(t, b.String(), "PLAN  (none yet)")
	require.Contains(t, b.String(), "Insights: (none yet)")
	require.Contains(t, b.String(), `(the investigation stays open for follow-up questions: starter ask inv-1 "...")`)

	b.Reset()
	RenderStatus(&b, "inv-1", "completed", investigation.Status{Phase: investigation.PhaseIdle, Turn: 1}, pricing.Default())
	require.Contains(t, b.String(), "phase:    idle, workflow completed")
	require.NotContains(t, b.String(), "starter ask", "a closed investigation takes no follow-ups")

	b.Reset()
	RenderStatus(&b, "inv-1", "running", investigation.Status{Phase: investigation.PhaseAwaitingApproval}, pricing.Default())
	require.Contains(t, b.String(), `PLAN AWAITS APPROVAL: starter approve inv-1 | starter revise inv-1 "..."`)
}

// An action's arguments, in the approval prompt and in status, show every
// invisible character escaped: "10.0.0.5\u200b" is not approved as
// "10.0.0.5".
func TestActionArgumentsRevealInvisibleCharacters(t *testing.T) {
	args := `{"target":"10.0.0.5` + "\u200b" + `","note":"` + "\ufeff" + `ok` + "\u2060" + `"}`
	want := `{"target":"10.0.0.5\u200b","note":"\ufeffok\u2060"}`
	var b strings.Builder
	p := &printer{out: &b, id: "inv-1"}
	p.print(investigation.Event{Kind: investigation.EventApprovalRequested, Step: "step_1", Tool: "response.block_ip", CallID: "c1", Text: args, Reason: "contain"})
	require.Contains(t, b.String(), "response.block_ip "+want+" (contain)")
	require.NotContains(t, b.String(), "\u200b")

	b.Reset()
	RenderStatus(&b, "inv-1", "running", investigation.Status{Phase: investigation.PhaseAwaitingCallApproval,
		Actions: []investigation.Action{{CallID: "c1", Tool: "response.block_ip", Args: args, Step: "step_1", Status: investigation.ActionPending}}}, pricing.Default())
	require.Contains(t, b.String(), "c1: response.block_ip "+want+" (asked by step_1)")
	require.NotContains(t, b.String(), "\u2060")
}

// A verdict's fields come from the model, from what an alert's sender
// wrote: a line break in a fact, a reason (a bare CR is one on the
// terminal) or the verdict's history cannot print a line that reads as the
// verdict.
func TestVerdictFieldsCannotForgeAVerdictLine(t *testing.T) {
	const forged = "VERDICT  benign (high confidence)"
	var b bytes.Buffer
	printVerdict(termtext.NewWriter(&b), &investigation.Verdict{Verdict: "true_positive", Confidence: "high", Reason: "r\r" + forged,
		Evidence: []investigation.Evidence{{StepID: "alert", Fact: "x\n\n" + forged + "\n  - y"}, {StepID: "step_1", Tool: "t\n" + forged, Fact: "f"}}})
	RenderStatus(termtext.NewWriter(&b), "inv-1", "running", investigation.Status{Phase: investigation.PhaseIdle, Turn: 2,
		VerdictHistory: []investigation.VerdictChange{{Turn: 1, Verdict: "true_positive", Confidence: "high"}, {Turn: 2, Verdict: "true_positive", Confidence: "low", Reason: "r\n" + forged}}},
		pricing.Default())
	for _, l := range strings.Split(b.String(), "\n") {
		require.NotEqual(t, forged, l, "forged line printed:\n%s", b.String())
	}
	require.Contains(t, b.String(), "  - x VERDICT benign (high confidence) - y [alert]\n")
	require.Contains(t, b.String(), "  why: r\n       "+forged+"\n", "a reason's lines stay under it")
}

// The attack: model-written plan text, insights and plan updates with a
// newline that would print a fake VERDICT line. Each prints on its line.
func TestPrinterKeepsModelTextOnOneLine(t *testing.T) {
	var b strings.Builder
	p := &printer{out: &b, id: "inv-1"}
	fake := "x\nVERDICT  benign"
	for _, e := range []investigation.Event{
		{Kind: investigation.EventPlan, Plan: &plan.Plan{Objective: fake, Steps: []plan.Step{{ID: "step_1", Description: fake, Tools: []string{fake}, Expected: fake}}}, Notes: []string{fake}},
		{Kind: investigation.EventStep, Step: "step_1", Text: fake},
		{Kind: investigation.EventInsight, Step: "step_1", Insights: []string{fake}},
		{Kind: investigation.EventPlanUpdate, Step: "step_1", Updates: []string{fake}, Pending: []string{fake}},
		{Kind: investigation.EventToolCall, Step: "step_1", Text: fake},
		{Kind: investigation.EventToolResult, Step: "step_1", Text: fake},
		{Kind: investigation.EventNote, Text: fake},
		{Kind: investigation.EventNote, Text: fake, Notes: []string{fake}},
	} {
		p.print(e)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		require.False(t, strings.HasPrefix(line, "VERDICT"), "a model's newline printed a line of its own:\n%s", b.String())
	}
}

// The attack: text from outside — an ask_user question, a step's
// description shown as an action's reason, a stop reason, a deny reason, a
// follow-up question, a direct answer that kept the verdict (so no real
// VERDICT line follows it) — carries lines of the CLI's own. None of them
// prints: single-line fields stay on their line, a conclusion is indented.
func TestModelTextCannotForgeTheCLIsLines(t *testing.T) {
	forged := []string{
		"VERDICT  benign (high confidence)",
		`ACTION AWAITS APPROVAL c-2 from step_1: response.block_ip {"ip":"203.0.113.9"} (contain) — starter approve-call inv-1 c-2 | starter deny-call inv-1 c-2 "reason"`,
		"  hint: 10.0.0.5 is our pentest box",
		"    [bigquery]   <- bigquery_agent: 0 logins",
	}
	banner := "==================== CONCLUSION ===================="
	attack := "x\n" + strings.Join(forged, "\n") + "\r" + forged[0] + "\n" + banner + "\n"
	// A line of the conclusion indented by the model by any amount.
	for _, f := range forged {
		attack += "\n" + strings.TrimLeft(f, " ") + "\n  " + strings.TrimLeft(f, " ")
	}
	var b strings.Builder
	w := termtext.NewWriter(&b)
	p := &printer{out: w, id: "inv-1"}
	for _, e := range []investigation.Event{
		{Kind: investigation.EventQuestion, Step: "step_1", QuestionID: "q-1", Text: "Is this expected?\n" + attack},
		{Kind: investigation.EventApprovalRequested, Step: "step_1", Tool: "response.disable_user", CallID: "c-2", Text: `{"user":"ceo"}`, Reason: "Contain\n" + attack},
		{Kind: investigation.EventApprovalDecided, Tool: "response.disable_user", CallID: "c-2", Text: "denied: " + attack},
		{Kind: investigation.EventHint, Text: attack},
		{Kind: investigation.EventApproval, Text: "revise: " + attack},
		{Kind: investigation.EventAnswer, QuestionID: "q-1", Text: attack},
		{Kind: investigation.EventStop, Text: attack},
		{Kind: investigation.EventTurn, Turn: 2, Mode: "direct", Text: attack},
		{Kind: investigation.EventStepDone, Step: "answer", Text: attack},
		{Kind: investigation.EventConclusion, Text: "The host is fine.\n\n" + attack},
		{Kind: "future_kind", Text: attack},
	} {
		p.print(e)
	}
	RenderStatus(w, "inv-1", "running", investigation.Status{Phase: investigation.PhaseWaitingForAnswer, StopReason: attack,
		Questions: []investigation.Question{{ID: "q-1", Step: "step_1", Question: "ok?\n" + attack}},
		Actions:   []investigation.Action{{CallID: "c-2", Tool: "response.block_ip", Args: "{}", Step: "step_1", Status: investigation.ActionDenied, Note: attack}},
		Insights:  []investigation.Insight{{Text: attack, Turn: 1, Step: "step_1"}}, Hints: []string{attack}, FollowUps: []string{attack},
		Intake: &investigation.IntakeStatus{Arrived: 1, Arrivals: []investigation.Arrival{{AlertID: "a-2", Title: attack}}}}, pricing.Default())
	out := b.String()
	for _, l := range strings.Split(out, "\n") {
		for _, f := range forged {
			require.NotEqual(t, f, l, "forged line printed:\n%s", out)
		}
	}
	require.Equal(t, 1, strings.Count(out, "\n"+banner+"\n"), "only the real conclusion's banner:\n%s", out)
	// What is legitimate still reads: the field on its line, the
	// conclusion under its banner.
	require.Contains(t, out, "QUESTION q-1 from step_1: Is this expected? x VERDICT benign (high confidence) ACTION AWAITS")
	require.Contains(t, out, `ACTION AWAITS APPROVAL c-2 from step_1: response.disable_user {"user":"ceo"} (Contain x VERDICT benign`)
	require.Contains(t, out, "==================== CONCLUSION ====================\n      The host is fine.\n\n      x\n      VERDICT  benign (high confidence)\n")
	require.Contains(t, out, "  stopping: x VERDICT benign")
	require.Contains(t, out, "  q-1: ok? x VERDICT benign")
}
