package activities

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/plan"
)

// maxResultBytes is what the tests hold a structured phase's result under,
// far below Temporal's 2 MB payload limit, whatever the answer (up to the
// 8 MiB an endpoint may send).
const maxResultBytes = 256 << 10

func resultSize(t *testing.T, v any) int {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return len(raw)
}

// A mode decision's reason is clipped at the activity: a 3 MB one made a
// result over the payload limit (TMPRL1103, the paid answer lost and
// bought again on every retry) and reached a progress event whole.
func TestModeReasonIsBounded(t *testing.T) {
	a, _, _ := newActivities(t, text(`{"reason":"`+strings.Repeat("r", 3<<20)+`","mode":"direct"}`))
	m, err := a.DecideMode(context.Background(), ModeInput{AlertID: "a1", Question: "q?"})
	require.NoError(t, err)
	require.Equal(t, "direct", m.Mode)
	require.LessOrEqual(t, len(m.Reason), MaxModeReasonBytes)
	require.True(t, clip.Clipped(m.Reason), "the cut is marked")
	require.Less(t, resultSize(t, m), maxResultBytes)
}

// A conclusion's report and the notes of its evidence check are bounded
// at the activity, not only later in the workflow.
func TestConclusionIsBounded(t *testing.T) {
	items := strings.TrimSuffix(strings.Repeat(`{"step_id":"step_9","tool":"`+strings.Repeat("t", 500)+`","fact":"f"},`, 3000), ",")
	ans := text(`{"report":"` + strings.Repeat("x", 3<<20) + `","evidence":[` + items + `],"reason":"r","verdict":"undetermined","confidence":"low"}`)
	a, _, _ := newActivities(t, ans, ans)
	c, err := a.Conclude(context.Background(), ConcludeInput{Session: "s", AlertID: "a1", Objective: "o", Language: "en"})
	require.NoError(t, err)
	require.LessOrEqual(t, len(c.Markdown), MaxConclusionBytes)
	require.True(t, strings.Contains(c.Markdown, clip.Marker), "the cut is marked")
	require.Len(t, c.Notes, maxVerdictNotes, "3000 dropped items, 20 notes")
	require.Equal(t, "… (+2981)", c.Notes[maxVerdictNotes-1])
	require.Less(t, resultSize(t, c), maxResultBytes)
}

// A reflection's plan updates are bounded at the activity: their count,
// every text within the plan's bounds, every list capped.
func TestReflectionUpdatesAreBounded(t *testing.T) {
	big := strings.Repeat("d", 100<<10)
	many := `"` + strings.TrimSuffix(strings.Repeat(strings.Repeat("n", 300)+`","`, 500), `","`) + `"`
	update := `{"type":"add_step","step_id":"` + big + `","reason":"` + big + `","step":{"id":"` + big + `","result":"` + big +
		`","description":"` + big + `","expected":"` + big + `","tools":[` + many + `],"depends_on":[` + many + `]}}`
	updates := strings.TrimSuffix(strings.Repeat(update+",", 60), ",")
	a, _, _ := newActivities(t, text(`{"insights":["`+big+`"],"plan_updates":[`+updates+`],"achieved":false}`))
	r, err := a.Reflect(context.Background(), ReflectInput{Session: "s", Objective: "o", Step: plan.Step{ID: "step_1"}})
	require.NoError(t, err)
	require.Len(t, r.PlanUpdates, MaxPlanUpdates)
	require.True(t, plan.UpdatesWithinBounds(r.PlanUpdates))
	for _, u := range r.PlanUpdates {
		require.LessOrEqual(t, len(u.StepID), maxUpdateName)
		require.Empty(t, u.Step.ID, "only the fields an update sets are kept")
		require.Empty(t, u.Step.Result)
		require.Len(t, u.Step.Tools, maxStepNames)
		require.Len(t, u.Step.DependsOn, maxStepNames)
		require.LessOrEqual(t, len(u.Step.Tools[0]), maxUpdateName)
	}
	require.Less(t, resultSize(t, r), maxResultBytes)

	// depends_on: [] (no dependency) stays apart from none given.
	a, _, _ = newActivities(t, text(`{"insights":[],"plan_updates":[{"type":"add_step","reason":"r","step":{"description":"d","depends_on":[]}},`+
		`{"type":"add_step","reason":"r","step":{"description":"e"}}],"achieved":false}`))
	r, err = a.Reflect(context.Background(), ReflectInput{Session: "s", Objective: "o", Step: plan.Step{ID: "step_1"}})
	require.NoError(t, err)
	require.NotNil(t, r.PlanUpdates[0].Step.DependsOn)
	require.Nil(t, r.PlanUpdates[1].Step.DependsOn)
}

// A reflection without the schema's required fields ({}, null) is not
// taken for "nothing to change, not achieved": it is re-asked, naming what
// is missing, as the other phases' answers are.
func TestReflectionNeedsTheRequiredFields(t *testing.T) {
	a, llm, _ := newActivities(t, text(`{}`), text(`{"insights":["i"],"plan_updates":[],"achieved":true}`))
	r, err := a.Reflect(context.Background(), ReflectInput{Session: "s", Objective: "o", Step: plan.Step{ID: "step_1"}})
	require.NoError(t, err)
	require.True(t, r.Achieved)
	require.Equal(t, []string{"i"}, r.Insights)
	require.Len(t, llm.Calls, 2)
	reask := llm.Calls[1].Contents[len(llm.Calls[1].Contents)-1].Parts[0].Text
	require.Contains(t, reask, "the answer lacks the required field(s) achieved, insights, plan_updates")

	a, llm, _ = newActivities(t, text(`null`), text(`{"insights":[],"plan_updates":[]}`))
	_, err = a.Reflect(context.Background(), ReflectInput{Session: "s", Objective: "o", Step: plan.Step{ID: "step_1"}})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrMalformedOutput, app.Type())
	require.Contains(t, app.Message(), "lacks the required field(s) achieved")
	require.Len(t, llm.Calls, 2)
}
