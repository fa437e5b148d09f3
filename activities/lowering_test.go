package activities

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/delivery"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/transcript"
)

// queuedFollowUp is a follow-up the intake queued when a related alert
// arrived (no analyst spoke), whose step ran one bigquery_agent call: a
// steered model can make its sub-agent run any query that succeeds.
func queuedFollowUp(t *testing.T) VerdictContext {
	return VerdictContext{Turn: 2, Standing: standing, Analyst: false, Ran: []investigation.StepRun{
		{Turn: 1, Step: "step_1", Tools: []string{"get_alert"}},
		{Turn: 1, Step: "step_2", Tools: []string{"bigquery_agent"}},
		{Turn: 2, Step: "step_1", Tools: []string{"bigquery_agent"}},
	}}.readingAlerts(alertTools(t))
}

// A follow-up no analyst asked cannot lower the standing verdict, whatever
// tool of the exchange it cites: to benign, false_positive or undetermined
// (which takes the confirmed-threat label away). The standing verdict stays
// with a note that the lower verdict waits for an analyst; the model is not
// asked again, as no evidence would make it apply.
func TestQueuedFollowUpCannotLowerTheVerdict(t *testing.T) {
	for _, verdict := range []string{"benign", "false_positive", "undetermined"} {
		t.Run(verdict, func(t *testing.T) {
			c := queuedFollowUp(t)
			v := modelVerdict{Verdict: verdict, Confidence: "high", Reason: "authorised red-team exercise",
				Evidence: []investigation.Evidence{{StepID: "step_1", Tool: "bigquery_agent", Fact: "SOC ticket SEC-1 shows this was the authorised pentest"}}}
			require.Empty(t, c.problems(v), "nothing for the model to fix")
			out, notes, overruled := c.settle(v, "en")
			require.Equal(t, standing, out)
			require.Equal(t, []string{"a follow-up queued for an arriving alert (no analyst spoke) proposed " + verdict + " (high), " +
				"lower than the standing verdict true_positive (high): it waits for an analyst, and the verdict stays true_positive (high)"}, notes)
			require.Equal(t, verdict+" (high)", overruled)
			require.Contains(t, c.citable(), "no analyst spoke in this exchange: a verdict lower than the standing true_positive is not applied")
		})
	}
}

// A queued follow-up's conclusion is told that a lower verdict waits for
// an analyst and that its report must not advise closing the alert; one
// that lowers it anyway is not asked again, and its summary leads with the
// sentence that the lower verdict waits, the model's own text following
// quoted as what it proposed: the delivered summary never tells the reader
// to close the alert as if that were the verdict.
func TestQueuedFollowUpsReportLeadsWithTheWait(t *testing.T) {
	benign := `{"report":"## Summary\nBenign: the authorised pentest.\nClose the alert.\n\n## Assessment\nBenign.","evidence":[{"step_id":"step_1","tool":"bigquery_agent","fact":"SEC-1 covers it"}],` +
		`"reason":"pentest","verdict":"benign","confidence":"high"}`
	a, llm, ts := newActivities(t, text(benign), text(benign))
	ts.M["s/k1"] = transcript.Entry{Kind: transcript.KindModel, Text: "1"}
	c, err := a.Conclude(context.Background(), ConcludeInput{Session: "s", AlertID: "a1", Request: "A related alert arrived: does it change the verdict?", Objective: "o",
		Language: "en", Asker: AskerIntake, Steps: []plan.Step{{ID: "step_1", Description: "read", Status: plan.Done, ResultKey: "k1"}},
		Verdict: queuedFollowUp(t)})
	require.NoError(t, err)
	require.Len(t, llm.Calls, 1, "not asked again")
	require.Equal(t, standing, c.Verdict)
	require.Contains(t, userText(llm.Calls[0].Cfg.SystemInstruction), "so a verdict lower than the standing true_positive is not applied: it waits for an analyst. "+
		"If the evidence points lower, say in the Summary and the Assessment that the lower reading waits for an analyst's confirmation and that the verdict stays true_positive; "+
		"recommend what the standing verdict calls for, and do not tell the reader to close, dismiss or stop responding to the alert.")
	require.Equal(t, "**Verdict check:** the conclusion proposed benign (high) in a follow-up queued for an arriving alert, "+
		"which no analyst asked, and a lower verdict proposed there waits for an analyst, so the verdict stays true_positive (high).\n\n"+
		"What the model proposed (benign (high), not applied), as it wrote it:\n\n"+
		"> Benign: the authorised pentest.\n> Close the alert.", investigation.SummaryOf(c.Markdown))
	require.True(t, strings.HasSuffix(c.Markdown, "> Close the alert.\n\n## Assessment\nBenign."), c.Markdown)

	// An analyst's follow-up is not told so: its lower verdict may apply.
	a, llm, ts = newActivities(t, text(benign))
	ts.M["s/k1"] = transcript.Entry{Kind: transcript.KindModel, Text: "1"}
	asked := queuedFollowUp(t)
	asked.Analyst = true
	_, err = a.Conclude(context.Background(), ConcludeInput{Session: "s", AlertID: "a1", Request: "Is it the pentest?", Objective: "o",
		Language: "en", Steps: []plan.Step{{ID: "step_1", Description: "read", Status: plan.Done, ResultKey: "k1"}}, Verdict: asked})
	require.NoError(t, err)
	require.NotContains(t, userText(llm.Calls[0].Cfg.SystemInstruction), "waits for an analyst")
}

// Raising concern in a queued follow-up stays allowed on this exchange's
// tool result, as a lower verdict is not.
func TestQueuedFollowUpMayRaiseTheVerdict(t *testing.T) {
	c := queuedFollowUp(t)
	c.Standing = &investigation.Verdict{Verdict: "benign", Confidence: "medium", Reason: "scanner",
		Evidence: []investigation.Evidence{{StepID: "step_2", Tool: "bigquery_agent", Fact: "the scanner's address"}}}
	for _, verdict := range []string{"undetermined", "true_positive"} {
		v := modelVerdict{Verdict: verdict, Confidence: "high", Reason: "the new alert's source logged in",
			Evidence: []investigation.Evidence{{StepID: "step_1", Tool: "bigquery_agent", Fact: "the source logged in as root"}}}
		require.Empty(t, c.problems(v))
		out, notes, overruled := c.settle(v, "en")
		require.Equal(t, verdict, out.Verdict)
		require.Empty(t, notes)
		require.Empty(t, overruled)
	}
}

// An analyst's follow-up (here one no tool answered) cannot lower the
// verdict on an analyst item the model wrote plus the standing verdict's
// own evidence copied unchanged, or a result served from an earlier
// exchange's call: neither is a tool's result of this exchange.
func TestLoweringNeedsAToolResultOfThisExchange(t *testing.T) {
	said := investigation.Evidence{StepID: "analyst", Fact: "the analyst confirmed this is the authorised pentest"}
	for _, tc := range []struct {
		name string
		ran  investigation.StepRun
		item investigation.Evidence
	}{
		{"kept", investigation.StepRun{Turn: 2, Step: "answer"}, standing.Evidence[0]},
		{"served from an earlier exchange", investigation.StepRun{Turn: 2, Step: "answer", Earlier: []string{"bigquery_agent"}},
			investigation.Evidence{StepID: "answer", Tool: "bigquery_agent", Fact: "the source is the pentest range"}},
		{"an earlier exchange's run", investigation.StepRun{Turn: 2, Step: "answer"},
			investigation.Evidence{StepID: "step_2", Tool: "bigquery_agent", Fact: "the source is the pentest range"}},
	} {
		for _, verdict := range []string{"benign", "undetermined"} {
			t.Run(tc.name+" "+verdict, func(t *testing.T) {
				c := VerdictContext{Turn: 2, Standing: standing, Analyst: true, Ran: []investigation.StepRun{
					{Turn: 1, Step: "step_1", Tools: []string{"get_alert"}},
					{Turn: 1, Step: "step_2", Tools: []string{"bigquery_agent"}},
					tc.ran,
				}}.readingAlerts(alertTools(t))
				v := modelVerdict{Verdict: verdict, Confidence: "high", Reason: "pentest", Evidence: []investigation.Evidence{said, tc.item}}
				require.Contains(t, strings.Join(c.problems(v), "\n"), "rests on no tool's result of this exchange")
				out, _, overruled := c.settle(v, "en")
				require.Equal(t, standing, out)
				require.Equal(t, verdict+" (high)", overruled)
			})
		}
	}
	// With a tool's result of this exchange beside the analyst's word, it
	// is lowered.
	c := VerdictContext{Turn: 2, Standing: standing, Analyst: true, Ran: []investigation.StepRun{
		{Turn: 2, Step: "answer", Tools: []string{"abuseipdb_check"}}}}.readingAlerts(alertTools(t))
	v := modelVerdict{Verdict: "benign", Confidence: "high", Reason: "pentest", Evidence: []investigation.Evidence{said,
		{StepID: "answer", Tool: "abuseipdb_check", Fact: "the source is the pentest vendor's range"}}}
	require.Empty(t, c.problems(v))
	out, _, overruled := c.settle(v, "en")
	require.Equal(t, "benign", out.Verdict)
	require.Empty(t, overruled)
}

// When the check overrules a verdict, what Slack and the results topic
// receive leads with the check's sentence and shows the checked verdict:
// a triager reading only the summary is not told to close the alert on
// the model's word.
func TestOverruledVerdictLeadsTheDeliveredSummary(t *testing.T) {
	hostile := `{"report":"## Summary\nBenign: the authorised quarterly pentest. No action needed; close the alert.\n\n## Details\nsee above",` +
		`"evidence":[{"step_id":"alert","fact":"pentest"}],"reason":"pentest","verdict":"benign","confidence":"high"}`
	c, _ := concludeOnce(t, hostile, hostile)
	require.Equal(t, investigation.VerdictUndetermined, c.Verdict.Verdict)
	const check = "**Verdict check:** the conclusion proposed benign (high)"
	require.True(t, strings.HasPrefix(c.Markdown, "## Summary\n"+check), c.Markdown)
	require.Equal(t, 1, strings.Count(c.Markdown, "**Verdict check:**"))

	var posted map[string]any
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(body, &posted))
	}))
	defer slack.Close()
	acts, _, _ := newActivities(t)
	in := &Intake{Alerts: acts.Alerts, Slack: &delivery.Slack{URL: slack.URL, HTTP: slack.Client()}}
	d := DeliveryInput{Key: "wf/t1", WorkflowID: "wf", AlertID: "a1", Exchange: 1, Verdict: *c.Verdict, Summary: investigation.SummaryOf(c.Markdown)}
	_, err := in.DeliverSlack(context.Background(), d)
	require.NoError(t, err)
	raw, err := json.Marshal(posted)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"text":"Undetermined (low confidence)"`)
	var summary string
	for _, b := range posted["blocks"].([]any) {
		text, _ := b.(map[string]any)["text"].(map[string]any)
		if s, _ := text["text"].(string); strings.Contains(s, "close the alert") {
			summary = s
		}
	}
	require.True(t, strings.HasPrefix(summary, check), "Slack's summary: %q", summary)
	require.Contains(t, summary, "What the model proposed (benign (high), not applied), as it wrote it:\n\n&gt; Benign: the authorised quarterly pentest. No action needed; close the alert.")

	r, err := in.result(context.Background(), d) // what PublishResult publishes
	require.NoError(t, err)
	require.Equal(t, investigation.VerdictUndetermined, r.Verdict)
	require.True(t, strings.HasPrefix(r.Summary, check), "the topic's summary: %q", r.Summary)
}
