package activities

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// sameAnswer answers every call with the same billed response, as the model
// does for the same input when the answer is blocked.
type sameAnswer struct {
	resp  *genai.GenerateContentResponse
	calls atomic.Int32
}

func (s *sameAnswer) GenerateContent(context.Context, string, []*genai.Content, *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error) {
	s.calls.Add(1)
	return s.resp, nil
}

// llmRetries runs an activity under the model activities' retry budget
// (workflows.llmOptions), with the worker's heartbeat interceptor.
func llmRetries(t *testing.T, a *Activities, run func(ctx workflow.Context) error) error {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{Heartbeats()}})
	env.RegisterActivity(a)
	wf := func(ctx workflow.Context) error {
		return run(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			ScheduleToCloseTimeout: 20 * time.Minute, StartToCloseTimeout: 3 * time.Minute, HeartbeatTimeout: 10 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
		}))
	}
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	require.True(t, env.IsWorkflowCompleted())
	return env.GetWorkflowError()
}

func blocked(reason genai.FinishReason, thoughts bool) *genai.GenerateContentResponse {
	c := &genai.Candidate{FinishReason: reason}
	if thoughts {
		c.Content = &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{Text: "thinking…", Thought: true}}}
	}
	return &genai.GenerateContentResponse{Candidates: []*genai.Candidate{c},
		UsageMetadata: &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 50000, ThoughtsTokenCount: 8000}}
}

// A blocked or empty answer for a reason the same input meets again fails
// the activity with one sentence naming the reason, in a model turn and in
// a structured (GenerateJSON) phase alike: paid once for a blocked prompt
// or an answer spent on thinking, twice for a blocked sample (sampled once
// more), never by Temporal's retries.
func TestRefusedAnswerIsNotRetried(t *testing.T) {
	cases := map[string]struct {
		resp  *genai.GenerateContentResponse
		want  string
		calls int32
	}{
		"safety":      {blocked(genai.FinishReasonSafety, false), "the model refused to answer (SAFETY)", 2},
		"recitation":  {blocked(genai.FinishReasonRecitation, false), "the model refused to answer (RECITATION)", 2},
		"prohibited":  {blocked(genai.FinishReasonProhibitedContent, false), "the model refused to answer (PROHIBITED_CONTENT)", 2},
		"blocklist":   {blocked(genai.FinishReasonBlocklist, false), "the model refused to answer (BLOCKLIST)", 2},
		"spii":        {blocked(genai.FinishReasonSPII, false), "the model refused to answer (SPII)", 2},
		"image":       {blocked(genai.FinishReasonImageSafety, false), "the model refused to answer (IMAGE_SAFETY)", 2},
		"all thought": {blocked(genai.FinishReasonMaxTokens, true), "the model spent its whole output budget thinking and gave no answer (MAX_TOKENS)", 1},
		"prompt blocked": {&genai.GenerateContentResponse{PromptFeedback: &genai.GenerateContentResponsePromptFeedback{BlockReason: genai.BlockedReasonJailbreak}},
			"the model refused to answer (prompt blocked: JAILBREAK)", 1},
	}
	for name, c := range cases {
		for _, phase := range []string{"turn", "plan"} {
			t.Run(name+"/"+phase, func(t *testing.T) {
				a, _, _ := newActivities(t)
				llm := &sameAnswer{resp: c.resp}
				a.Model.LLM = llm
				err := llmRetries(t, a, func(ctx workflow.Context) error {
					if phase == "turn" {
						return workflow.ExecuteActivity(ctx, a.ModelTurn, TurnInput{Session: "s", Key: "t1-step_1-i1", AlertID: "a1", Step: plan.Step{ID: "step_1"}}).Get(ctx, nil)
					}
					return workflow.ExecuteActivity(ctx, a.GeneratePlan, PlanInput{AlertID: "a1", MaxSteps: 3}).Get(ctx, nil)
				})
				require.Equal(t, c.calls, llm.calls.Load(), "paid calls")
				var app *temporal.ApplicationError
				require.True(t, errors.As(err, &app), "%v", err)
				require.Equal(t, ErrModelRefused, app.Type())
				require.True(t, app.NonRetryable())
				require.Equal(t, c.want, app.Message())
			})
		}
	}
}

// An empty answer for a reason a new sample may not meet (OTHER) is still
// retried.
func TestEmptyAnswerOtherIsRetried(t *testing.T) {
	require.NoError(t, refusal(blocked(genai.FinishReasonOther, false)))
	require.NoError(t, refusal(blocked(genai.FinishReasonStop, false)))
	require.NoError(t, refusal(&genai.GenerateContentResponse{Candidates: []*genai.Candidate{{FinishReason: genai.FinishReasonSafety,
		Content: &genai.Content{Parts: []*genai.Part{{Text: "a partial answer"}}}}}}), "an answer with text is an answer")
}

// A model activity that fails for good carries what every attempt was
// billed for in its error, for the workflow to charge: a refusal at once,
// a retried failure (the answer's write fails each time) once its budget
// is spent.
func TestFailedModelActivityCarriesItsUsage(t *testing.T) {
	a, _, _ := newActivities(t)
	a.Model.LLM = &sameAnswer{resp: blocked(genai.FinishReasonSafety, false)}
	err := llmRetries(t, a, func(ctx workflow.Context) error {
		return workflow.ExecuteActivity(ctx, a.ModelTurn, TurnInput{Session: "s", Key: "t1-step_1-i1", AlertID: "a1", Step: plan.Step{ID: "step_1"}}).Get(ctx, nil)
	})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, ErrModelRefused, app.Type(), "the error stays what it was")
	require.True(t, app.NonRetryable())
	var u investigation.Usage
	require.NoError(t, app.Details(&u))
	require.Equal(t, investigation.Usage{Calls: 2, PromptTokens: 100000, ThoughtTokens: 16000, Model: "m"}, u)

	a, _, ts := newActivities(t)
	llm := &sameAnswer{resp: text("an answer the store will not keep")}
	a.Model.LLM = llm
	a.Model.Transcript = failingPut{ts}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{Heartbeats()}})
	env.RegisterActivity(a)
	wf := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute, HeartbeatTimeout: 10 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
		})
		return workflow.ExecuteActivity(ctx, a.ModelTurn, TurnInput{Session: "s", Key: "t1-step_1-i1", AlertID: "a1", Step: plan.Step{ID: "step_1"}}).Get(ctx, nil)
	}
	env.RegisterWorkflow(wf)
	env.ExecuteWorkflow(wf)
	err = env.GetWorkflowError()
	require.True(t, errors.As(err, &app), "%v", err)
	require.Contains(t, app.Message(), "firestore unavailable", "the message stays")
	require.False(t, app.NonRetryable())
	require.NoError(t, app.Details(&u))
	require.Equal(t, int32(3), llm.calls.Load())
	require.Equal(t, 3, u.Calls, "every billed attempt, not only the last")
	require.Equal(t, 30, u.PromptTokens)
}

// answers gives its responses in turn, then the last one again.
type answers struct {
	resps []*genai.GenerateContentResponse
	calls atomic.Int32
}

func (a *answers) GenerateContent(context.Context, string, []*genai.Content, *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error) {
	n := int(a.calls.Add(1))
	return a.resps[min(n, len(a.resps))-1], nil
}

// A candidate blocked on its way out judged that sample: the next sample,
// in the same attempt, is the answer, and both are counted.
func TestBlockedSampleIsSampledOnceMore(t *testing.T) {
	for _, phase := range []string{"turn", "plan"} {
		t.Run(phase, func(t *testing.T) {
			a, _, _ := newActivities(t)
			ok := text("fine")
			if phase == "plan" {
				ok = text(`{"objective":"o","steps":[{"id":"step_1","description":"d","tools":["get_alert"],"expected":"e"}]}`)
			}
			llm := &answers{resps: []*genai.GenerateContentResponse{blocked(genai.FinishReasonSafety, false), ok}}
			a.Model.LLM = llm
			var usage investigation.Usage
			err := llmRetries(t, a, func(ctx workflow.Context) error {
				if phase == "turn" {
					var out TurnOutput
					err := workflow.ExecuteActivity(ctx, a.ModelTurn, TurnInput{Session: "s", Key: "t1-step_1-i1", AlertID: "a1", Step: plan.Step{ID: "step_1"}}).Get(ctx, &out)
					usage = out.Usage
					return err
				}
				var out PlanOutput
				err := workflow.ExecuteActivity(ctx, a.GeneratePlan, PlanInput{AlertID: "a1", MaxSteps: 3}).Get(ctx, &out)
				usage = out.Usage
				return err
			})
			require.NoError(t, err)
			require.Equal(t, int32(2), llm.calls.Load())
			require.Equal(t, 2, usage.Calls, "the blocked sample was paid for too")
		})
	}
}
