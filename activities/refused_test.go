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
// the activity at once with one sentence naming the reason, paid once, in
// a model turn and in a structured (GenerateJSON) phase alike.
func TestRefusedAnswerIsNotRetried(t *testing.T) {
	cases := map[string]struct {
		resp *genai.GenerateContentResponse
		want string
	}{
		"safety":      {blocked(genai.FinishReasonSafety, false), "the model refused to answer (SAFETY)"},
		"recitation":  {blocked(genai.FinishReasonRecitation, false), "the model refused to answer (RECITATION)"},
		"prohibited":  {blocked(genai.FinishReasonProhibitedContent, false), "the model refused to answer (PROHIBITED_CONTENT)"},
		"blocklist":   {blocked(genai.FinishReasonBlocklist, false), "the model refused to answer (BLOCKLIST)"},
		"spii":        {blocked(genai.FinishReasonSPII, false), "the model refused to answer (SPII)"},
		"image":       {blocked(genai.FinishReasonImageSafety, false), "the model refused to answer (IMAGE_SAFETY)"},
		"all thought": {blocked(genai.FinishReasonMaxTokens, true), "the model spent its whole output budget thinking and gave no answer (MAX_TOKENS)"},
		"prompt blocked": {&genai.GenerateContentResponse{PromptFeedback: &genai.GenerateContentResponsePromptFeedback{BlockReason: genai.BlockedReasonJailbreak}},
			"the model refused to answer (prompt blocked: JAILBREAK)"},
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
				require.Equal(t, int32(1), llm.calls.Load(), "the same input gets the same block: one paid call")
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
	require.Equal(t, investigation.Usage{Calls: 1, PromptTokens: 50000, ThoughtTokens: 8000, Model: "m"}, u)

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
