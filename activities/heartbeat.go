package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// HeartbeatInterval is how often a running activity heartbeats, so a worker
// that dies mid-call is noticed within the heartbeat timeout instead of the
// call's start-to-close timeout, and a cancelled activity (the analyst
// stopped the investigation) learns it within one interval.
const HeartbeatInterval = 5 * time.Second

// heartbeat records activity heartbeats until the returned stop is called.
func heartbeat(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// Heartbeats is a worker interceptor that makes every activity heartbeat
// while it runs: model calls, tool calls (a provider lookup, a BigQuery
// query) and store writes alike. The worker installs it once.
func Heartbeats() interceptor.WorkerInterceptor { return &heartbeats{} }

type heartbeats struct {
	interceptor.WorkerInterceptorBase
}

func (*heartbeats) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &heartbeatInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}}
}

type heartbeatInbound struct {
	interceptor.ActivityInboundInterceptorBase
}

func (h *heartbeatInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	defer heartbeat(ctx)()
	return h.Next.ExecuteActivity(ctx, in)
}
