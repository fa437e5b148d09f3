package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/internal/testenv"
)

// A structured phase whose first answer is unusable asks again, on a real
// server with the worker's heartbeats: the billed call's heartbeat, still
// on its way when that call's own context ends (callWindow), must not
// cancel the attempt. It did once: the SDK took the heartbeat failed by
// the ended context for a lost server, the re-ask failed as "context
// canceled", and every retry paid for the first answer again.
func TestReaskOnARealServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := testenv.StartTemporal(ctx, testenv.WithoutSearchAttributes())
	require.NoError(t, err)
	defer func() { _ = srv.Stop() }()
	c := srv.Client()

	a, _, _ := newActivities(t)
	// The re-ask outlasts the heartbeat throttle's window, which the SDK
	// flushes with the context of the heartbeat that opened it.
	llm := &slowSecond{answers: answers{resps: []*genai.GenerateContentResponse{
		text("not json"),
		text(`{"objective":"o","steps":[{"id":"step_1","description":"d","tools":["get_alert"],"expected":"e"}]}`),
	}}, wait: HeartbeatInterval + 2*time.Second}
	a.Model.LLM = llm
	const queue = "reask"
	w := worker.New(c, queue, worker.Options{
		Interceptors:                     []interceptor.WorkerInterceptor{Heartbeats()},
		MaxHeartbeatThrottleInterval:     HeartbeatInterval,
		DefaultHeartbeatThrottleInterval: HeartbeatInterval,
	})
	w.RegisterActivity(a)
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context) (PlanOutput, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 5 * time.Minute, HeartbeatTimeout: 10 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		var out PlanOutput
		err := workflow.ExecuteActivity(ctx, a.GeneratePlan, PlanInput{AlertID: "a1", MaxSteps: 3}).Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: "reask"})
	require.NoError(t, w.Start())
	defer w.Stop()

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, "reask")
	require.NoError(t, err)
	var out PlanOutput
	require.NoError(t, run.Get(ctx, &out), "the re-ask ran in the same attempt")
	require.Equal(t, int32(2), llm.calls.Load())
	require.Equal(t, 2, out.Usage.Calls)
	require.Equal(t, "o", out.Plan.Objective)
}

// slowSecond answers its second and later calls after wait.
type slowSecond struct {
	answers
	wait time.Duration
}

func (s *slowSecond) GenerateContent(ctx context.Context, model string, c []*genai.Content, cfg *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error) {
	if s.calls.Load() > 0 {
		select {
		case <-time.After(s.wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.answers.GenerateContent(ctx, model, c, cfg)
}
