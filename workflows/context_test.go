package workflows

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/investigation"
)

// storedContexts is the tests' store of the contexts the workflow stores
// (StoreContext), by session and key.
var storedContexts sync.Map

// mockContextStore makes env's StoreContext keep each context in
// storedContexts and hand the progress it carries to progress.
func mockContextStore(env *testsuite.TestWorkflowEnvironment, progress func(activities.ProgressInput)) {
	env.OnActivity(a.StoreContext, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ContextInput) error {
		storedContexts.Store(in.Session+"/"+in.Key, in.Context)
		if len(in.Progress.Events) > 0 {
			progress(in.Progress)
		}
		return nil
	}).Maybe()
}

func lastSeq(events []investigation.Event) int {
	if len(events) == 0 {
		return 0
	}
	return events[len(events)-1].Seq
}

// expand puts the stored context an input names back into it, as the
// activity does, so the tests see what the activity sees.
func expand[T interface{ UseContext(activities.Context) }](in T, session, key string) {
	if key == "" {
		return
	}
	if c, ok := storedContexts.Load(session + "/" + key); ok {
		in.UseContext(c.(activities.Context))
	}
}

// TestProgressIsStoredBeforeTheRunCloses: every event a run emits reaches
// the progress store, in order and once, the last one before the run
// closes, with the status as it closed; the conversation, hints and
// standing verdict reach the follow-up's activities by a key only.
func TestProgressIsStoredBeforeTheRunCloses(t *testing.T) {
	h := newHarness(t)
	var stored []investigation.Event // each event as first written
	var last *investigation.Status
	waited, behind, synced := 0, 0, 0
	h.stored = func(in activities.ProgressInput) {
		for _, e := range in.Events {
			if e.Seq > lastSeq(stored) {
				stored = append(stored, e)
			}
		}
		last = in.Status
		if !in.Wait {
			behind++
			require.False(t, waitsAfter(in.Events), "a write before a wait for a person is waited for")
			return
		}
		// A waited-for write sends again everything since the last one.
		waited++
		if len(in.Events) > 0 {
			require.Equal(t, synced+1, in.Events[0].Seq, "a waited-for write starts after the last one")
			synced = in.Events[len(in.Events)-1].Seq
		}
	}
	h.env.OnActivity(a.StoreProgress, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ProgressInput) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.stored(in)
		return nil
	})
	h.onPlan(twoStepPlan(), nil)
	h.onTurn(conclusionOnly)
	h.onReflect(noChange)
	var modes []activities.ModeInput
	h.env.OnActivity(a.DecideMode, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ModeInput) (activities.Mode, error) {
		modes = append(modes, in)
		return activities.Mode{Mode: investigation.ModeDirect}, nil
	})
	hint := "mind the VPN range " + strings.Repeat("v", 3000) // too long to go inline
	h.update(time.Minute, investigation.UpdateHint, hint)
	h.update(2*time.Minute, investigation.UpdateAsk, "When did the login happen?")
	h.update(3*time.Hour, investigation.UpdateStop, "enough")
	_, err := h.run(t, investigation.Input{AlertID: "a1"})
	require.NoError(t, err)
	evs := h.events(t)
	require.Equal(t, evs, stored, "every event stored, in order")
	require.NotNil(t, last)
	require.Equal(t, len(evs), last.LastSeq, "the status stored last is the closed run's")
	require.Equal(t, len(evs), synced, "the last write, waited for, covers every event")
	require.Positive(t, behind, "the writes between model calls go behind the workflow")
	require.Equal(t, 2, waited, "the run waits for its writes before each idle (closing had nothing new)")

	require.Len(t, modes, 1)
	require.Empty(t, modes[0].History, "the mode decision names the conversation by key")
	require.Empty(t, modes[0].Question, "and the question")
	require.NotEmpty(t, modes[0].Context)
	mode := modes[0]
	expand(&mode, mode.Session, mode.Context)
	require.Len(t, mode.History, 2, "the stored context holds the first exchange")
	require.Equal(t, "When did the login happen?", mode.Question, "and the question")
	var direct []activities.TurnInput
	for _, in := range h.turns {
		if in.Direct {
			direct = append(direct, in)
		}
	}
	require.NotEmpty(t, direct)
	require.Equal(t, []string{hint}, direct[0].Hints, "the hint reaches the direct answer through the stored context")
	require.NotNil(t, direct[0].Standing, "so does the standing verdict")
	require.Equal(t, "When did the login happen?", direct[0].Question, "and the question")

	// The review reads the context the answer read (no write of its own),
	// with the answer's step added.
	require.Len(t, h.reviews, 1)
	review := h.reviews[0]
	require.Equal(t, direct[len(direct)-1].Context, review.Context)
	require.Equal(t, "When did the login happen?", review.Question)
	require.Equal(t, []string{hint}, review.Hints)
	require.NotNil(t, review.Verdict.Standing)
	require.Equal(t, investigation.StepRun{Turn: 2, Step: answerStepID}, review.Verdict.Ran[len(review.Verdict.Ran)-1])
	require.Equal(t, "step_1", review.Verdict.Ran[0].Step, "after the steps the context holds")
}
