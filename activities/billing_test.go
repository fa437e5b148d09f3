package activities

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/transcript"
)

// failingPut is a transcript whose writes fail, as when Firestore is down
// after the model already answered.
type failingPut struct{ TranscriptStore }

func (failingPut) Put(context.Context, string, string, transcript.Entry) (transcript.Entry, error) {
	return transcript.Entry{}, errors.New("firestore unavailable")
}

// attemptEnv runs activities as the worker does (with the heartbeat
// interceptor), as an attempt that follows one whose last heartbeat carried
// prior, and collects the heartbeats this attempt sends.
func attemptEnv(t *testing.T, a *Activities, prior *investigation.Usage) (*testsuite.TestActivityEnvironment, func() investigation.Usage) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{Heartbeats()}})
	env.RegisterActivity(a)
	if prior != nil {
		env.SetHeartbeatDetails(*prior)
	}
	var mu sync.Mutex
	var last investigation.Usage
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var u investigation.Usage
		if d.HasValues() && d.Get(&u) == nil {
			mu.Lock()
			last = u
			mu.Unlock()
		}
	})
	return env, func() investigation.Usage { mu.Lock(); defer mu.Unlock(); return last }
}

// A retried model turn whose earlier attempt stored its answer returns that
// answer without calling the model, and its usage is what that attempt was
// billed for.
func TestRetriedTurnReturnsTheStoredAnswer(t *testing.T) {
	a, llm, ts := newActivities(t, text("a second, paid answer"))
	ts.M["s/t1-step_1-i1"] = transcript.Entry{Kind: transcript.KindModel, Content: `{"role":"model","parts":[{"text":"the first answer"}]}`, Text: "the first answer"}
	prior := investigation.Usage{Calls: 1, PromptTokens: 100, OutputTokens: 10, Model: "m"}
	env, _ := attemptEnv(t, a, &prior)

	v, err := env.ExecuteActivity(a.ModelTurn, TurnInput{Session: "s", Key: "t1-step_1-i1", AlertID: "a1", Step: plan.Step{ID: "step_1"}})
	require.NoError(t, err)
	var out TurnOutput
	require.NoError(t, v.Get(&out))
	require.Equal(t, "the first answer", out.Text)
	require.Empty(t, llm.Calls, "the stored answer was paid for: no second model call")
	require.Equal(t, prior, out.Usage)
}

// An attempt that was billed and then failed before storing its answer
// leaves its usage in the heartbeat; the next attempt calls the model again
// and reports both calls.
func TestBilledAttemptThatFailedIsCounted(t *testing.T) {
	a, _, ts := newActivities(t, text("lost answer"))
	a.Model.Transcript = failingPut{ts}
	env, lastBeat := attemptEnv(t, a, nil)
	in := TurnInput{Session: "s", Key: "t1-step_1-i1", AlertID: "a1", Step: plan.Step{ID: "step_1"}}
	_, err := env.ExecuteActivity(a.ModelTurn, in)
	require.ErrorContains(t, err, "firestore unavailable")
	first := lastBeat()
	require.Equal(t, 1, first.Calls, "the failed attempt's heartbeat carries what it was billed for")

	a2, llm, _ := newActivities(t, text("the answer"))
	env, _ = attemptEnv(t, a2, &first)
	v, err := env.ExecuteActivity(a2.ModelTurn, in)
	require.NoError(t, err)
	var out TurnOutput
	require.NoError(t, v.Get(&out))
	require.Len(t, llm.Calls, 1)
	require.Equal(t, 2, out.Usage.Calls, "both billed attempts count")
}

// Structured-output activities count earlier billed attempts too.
func TestGenerateJSONCountsEarlierAttempts(t *testing.T) {
	a, _, _ := newActivities(t, text(`{"objective":"o","steps":[{"id":"1","description":"d","tools":["get_alert"]}]}`))
	prior := investigation.Usage{Calls: 1, PromptTokens: 5, Model: "m"}
	env, _ := attemptEnv(t, a, &prior)
	v, err := env.ExecuteActivity(a.GeneratePlan, PlanInput{AlertID: "a1", MaxSteps: 5})
	require.NoError(t, err)
	var out PlanOutput
	require.NoError(t, v.Get(&out))
	require.Equal(t, 2, out.Usage.Calls)
}

// timedPut notes when the answer's store write starts.
type timedPut struct {
	TranscriptStore
	started chan time.Time
}

func (p timedPut) Put(ctx context.Context, session, key string, e transcript.Entry) (transcript.Entry, error) {
	p.started <- time.Now()
	return p.TranscriptStore.Put(ctx, session, key, e)
}

// A model turn stores its answer while the billed heartbeat is on its way,
// not after it arrived, and ends only once it arrived: the heartbeat's
// round trip is off the path from the answer to the activity's completion,
// and a failure still finds the usage recorded.
func TestBilledHeartbeatOverlapsTheAnswersWrite(t *testing.T) {
	a, _, ts := newActivities(t, text("the answer"))
	put := timedPut{ts, make(chan time.Time, 1)}
	a.Model.Transcript = put
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{Heartbeats()}})
	env.RegisterActivity(a)
	const roundTrip = 300 * time.Millisecond
	var mu sync.Mutex
	var sent, arrived time.Time
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		mu.Lock()
		sent = time.Now()
		mu.Unlock()
		time.Sleep(roundTrip) // a slow RecordActivityTaskHeartbeat
		mu.Lock()
		arrived = time.Now()
		mu.Unlock()
	})
	_, err := env.ExecuteActivity(a.ModelTurn, TurnInput{Session: "s", Key: "t1-step_1-i1", AlertID: "a1", Step: plan.Step{ID: "step_1"}})
	ended := time.Now()
	require.NoError(t, err)
	putAt := <-put.started
	mu.Lock()
	defer mu.Unlock()
	require.False(t, sent.IsZero(), "the billed call heartbeats")
	require.True(t, putAt.Before(arrived), "the answer's write waited for the heartbeat: put at +%s, heartbeat arrived at +%s", putAt.Sub(sent), arrived.Sub(sent))
	require.False(t, ended.Before(arrived), "the attempt ended before its heartbeat arrived")
}
