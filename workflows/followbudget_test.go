package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
)

// TestFollowUpPastTheBudget: a related alert reaching a concluded
// investigation once the intake's daily budget is reached (or cannot be
// kept: a model without a price) is recorded and noted, but queues no
// follow-up, so no model call; a critical one still asks, and under the
// budget nothing changes. The batch is the one the admission delivers.
func TestFollowUpPastTheBudget(t *testing.T) {
	const shared = "ip:198.51.100.23"
	priced := investigation.Usage{Calls: 1, PromptTokens: 100000, Model: "gemini-2.5-flash"} // 0.03 USD
	unpriced := investigation.Usage{Calls: 1, PromptTokens: 10, Model: "gemini-unknown"}
	for _, c := range []struct {
		name     string
		budget   float64
		usage    investigation.Usage
		severity string
		asked    bool
	}{
		{"over the budget", 0.01, priced, "high", false},
		{"unpriced model", 100, unpriced, "low", false},
		{"critical over the budget", 0.01, priced, "critical", true},
		{"under the budget", 100, priced, "high", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRoom(t0)
			s := roomSettings(10)
			s.DailyBudgetUSD = c.budget
			o := r.admit(t0, s, alertOf("a1", "guardduty:1:f", "high", shared))
			e := r.byWorkflow[o.WorkflowID]
			r.take(e)
			r.started(o.WorkflowID)
			spend := investigation.Spend{}
			spend.ByPhase.Plan = c.usage
			r.concluded(investigation.Concluded{WorkflowID: o.WorkflowID, Session: investigation.IntakeSession(o.WorkflowID, e.Admitted), Spend: spend})
			r.admit(t0.Add(time.Minute), s, alertOf("a2", "guardduty:2:g", c.severity, shared))
			batch := r.takeToDeliver(e)
			require.Len(t, batch.Arrivals, 1, "the related alert is queued for the concluded investigation")

			questions, events := followUpAfterConclusion(t, batch)
			noted := false
			for _, ev := range events {
				noted = noted || ev.Kind == investigation.EventNote && ev.Text == "the intake's daily budget is reached: not asked whether these change the verdict"
			}
			arrived := false
			for _, ev := range events {
				arrived = arrived || strings.HasPrefix(ev.Text, "alert arrived: related alert a2")
			}
			require.True(t, arrived, "the arrival is recorded either way")
			if c.asked {
				require.Equal(t, []string{"A related alert arrived (a2): does it change the verdict?"}, questions)
				require.False(t, noted)
				return
			}
			require.Empty(t, questions, "past the budget a non-critical related alert runs no follow-up (no model call)")
			require.True(t, noted, "the investigation notes why it did not ask")
		})
	}
}

// followUpAfterConclusion runs an intake investigation that concludes and
// then receives batch by the alerts signal, and returns the follow-up
// questions its model calls were asked and its events.
func followUpAfterConclusion(t *testing.T, batch investigation.ArrivalBatch) ([]string, []investigation.Event) {
	t.Helper()
	h := newHarness(t)
	h.env.RegisterActivity(&activities.Intake{})
	var sig signals
	sig.on(h.env)
	h.onPlan(oneStepPlan(), nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	var questions []string
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ModeInput) (activities.Mode, error) {
		questions = append(questions, in.Question)
		return activities.Mode{Mode: investigation.ModePlan}, nil
	}).Maybe()
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(investigation.AlertsUpdate, batch) }, 2*time.Minute)
	_, err := h.run(t, investigation.Input{AlertID: "a1", IdleTimeout: investigation.Duration(10 * time.Minute),
		Intake: &investigation.IntakeInput{Identity: "guardduty:1:f", Admission: "intake-admission-q"}})
	require.NoError(t, err)
	return questions, h.events(t)
}

// TestHeldArrivalsAskNothingLater: arrivals held by the budget that reach a
// busy investigation are not asked about once it goes idle
// (askAboutUnseen), yet stay unshown: a later model call sees them, and
// the close reports them unseen, so their next alert is no repeat.
func TestHeldArrivalsAskNothingLater(t *testing.T) {
	var st IntakeState
	held := investigation.Arrival{Kind: investigation.ArrivalRelated, AlertID: "gd2", Identity: "guardduty:2:g"}
	st.add(investigation.ArrivalBatch{Arrivals: []investigation.Arrival{held}, OverBudget: true})
	require.Zero(t, st.Unseen, "nothing to ask about at idle")
	require.Equal(t, 1, st.Unshown)
	unseen, _ := st.unseenReport()
	require.Contains(t, unseen, hashOf("guardduty:2:g"))
	// One due anyway for an earlier arrival takes the held ones along.
	st = IntakeState{}
	st.add(investigation.ArrivalBatch{Arrivals: []investigation.Arrival{{Kind: investigation.ArrivalRelated, AlertID: "gd1", Identity: "guardduty:1:f"}}})
	st.add(investigation.ArrivalBatch{Arrivals: []investigation.Arrival{held}, OverBudget: true})
	require.Equal(t, 2, st.Unseen)
}
