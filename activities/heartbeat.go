package activities

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/investigation"
)

// HeartbeatInterval is how often a running activity heartbeats, so a worker
// that dies mid-call is noticed within the heartbeat timeout instead of the
// call's start-to-close timeout, and a cancelled activity (the analyst
// stopped the investigation) learns it within one interval. The worker's
// heartbeat throttle (MaxHeartbeatThrottleInterval) is set to the same
// value, or the SDK would hold heartbeats back for up to 0.8 × the
// heartbeat timeout and a stop would reach the activity that much later.
const HeartbeatInterval = 2 * time.Second

// billing is what the provider billed for the model calls of one activity,
// its earlier attempts included. It rides in the heartbeat details, which
// Temporal hands to the next attempt (the SDK flushes a pending heartbeat
// when an attempt fails), so an attempt that was billed and then failed (its
// answer not stored, the worker killed) is still counted once.
type billing struct {
	mu sync.Mutex
	// total is every attempt's billed usage: the heartbeat details.
	total investigation.Usage
	// prior is the earlier attempts' usage not yet added to a result.
	prior investigation.Usage
	// retried says an earlier attempt ran (it may have stored an answer).
	retried bool
	// sending is held while a heartbeat is on its way: the attempt ends
	// (finish) only after it arrived, and none leaves after that.
	sending  sync.Mutex
	finished bool
	// ctx is the attempt's own context: a heartbeat never rides a model
	// call's, which the caller cancels once the call returned (callWindow)
	// while the heartbeat may still be on its way (the SDK also flushes its
	// throttle window later with the context that opened it), and the SDK
	// takes a heartbeat failed that way for a lost server and cancels the
	// whole attempt (TestReaskOnARealServer).
	ctx context.Context
}

// send heartbeats the latest total, unless the attempt ended; the caller
// holds b.sending.
func (b *billing) send(ctx context.Context) {
	if b.finished {
		return
	}
	b.mu.Lock()
	total := b.total
	b.mu.Unlock()
	activity.RecordHeartbeat(ctx, total)
}

// finish ends the attempt's heartbeats once the one on its way arrived.
func (b *billing) finish() {
	b.sending.Lock()
	b.finished = true
	b.sending.Unlock()
}

type billingKey struct{}

// billingOf returns the activity's billing, or nil outside an activity the
// interceptor wrapped (unit tests calling a method directly).
func billingOf(ctx context.Context) *billing {
	b, _ := ctx.Value(billingKey{}).(*billing)
	return b
}

// billed records the usage of one model call the provider answered and
// heartbeats it at once, while the caller goes on: a model turn stores its
// answer meanwhile, so the heartbeat's round trip (2–3 ms) is no longer
// between the answer and the activity's completion. The attempt still
// ends, failed or not, only after the heartbeat arrived (finish).
func billed(ctx context.Context, u investigation.Usage) {
	b := billingOf(ctx)
	if b == nil {
		return
	}
	b.mu.Lock()
	b.total = b.total.Add(u)
	b.mu.Unlock()
	b.sending.Lock() // released by the goroutine, once sent
	go func() {
		defer b.sending.Unlock()
		b.send(b.ctx)
	}()
}

// Billed records the usage of a call made outside Model (an embedding) and
// returns it with what earlier attempts of the activity were billed for:
// the usage the activity's result reports.
func Billed(ctx context.Context, u investigation.Usage) investigation.Usage {
	billed(ctx, u)
	return u.Add(earlierAttempts(ctx))
}

// earlierAttempts returns, once per attempt, the usage earlier attempts of
// this activity were billed for, so a model activity's result counts it.
func earlierAttempts(ctx context.Context) investigation.Usage {
	b := billingOf(ctx)
	if b == nil {
		return investigation.Usage{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.prior
	b.prior = investigation.Usage{}
	return u
}

// isRetry reports whether an earlier attempt of this activity ran.
func isRetry(ctx context.Context) bool {
	b := billingOf(ctx)
	return b != nil && b.retried
}

// newBilling reads what the earlier attempts were billed for.
func newBilling(ctx context.Context) *billing {
	b := &billing{retried: activity.GetInfo(ctx).Attempt > 1}
	if activity.HasHeartbeatDetails(ctx) {
		var u investigation.Usage
		if err := activity.GetHeartbeatDetails(ctx, &u); err == nil {
			b.total, b.prior, b.retried = u, u, true
		}
	}
	return b
}

// heartbeat records activity heartbeats, carrying the billing, until the
// returned stop is called.
func heartbeat(ctx context.Context, b *billing) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				b.sending.Lock()
				b.send(ctx)
				b.sending.Unlock()
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
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).IsLocalActivity {
		return h.Next.ExecuteActivity(ctx, in)
	}
	b := newBilling(ctx)
	ctx = context.WithValue(ctx, billingKey{}, b)
	b.ctx = ctx
	stop := heartbeat(ctx, b)
	defer func() { stop(); b.finish() }()
	res, err := h.Next.ExecuteActivity(ctx, in)
	if err != nil {
		err = b.carry(err)
	}
	return res, err
}

// carry puts what every attempt so far was billed for into a failed
// attempt's error, as its details, so the workflow charges a model activity
// that fails for good (non-retryable, or its last retry) its usage too. The
// error keeps its message, type, retryability and retry delay; a
// cancellation is left as it is (the workflow ends as Canceled).
func (b *billing) carry(err error) error {
	b.mu.Lock()
	total := b.total
	b.mu.Unlock()
	if total == (investigation.Usage{}) || errors.Is(err, context.Canceled) || temporal.IsCanceledError(err) {
		return err
	}
	app, ok := err.(*temporal.ApplicationError)
	if !ok {
		// As the SDK would convert it: its message, its Go type's name.
		return temporal.NewApplicationErrorWithOptions(err.Error(), errTypeName(err), temporal.ApplicationErrorOptions{Details: []any{total}})
	}
	if app.HasDetails() {
		return err
	}
	return temporal.NewApplicationErrorWithOptions(app.Message(), app.Type(), temporal.ApplicationErrorOptions{
		NonRetryable: app.NonRetryable(), Cause: errors.Unwrap(app), Details: []any{total},
		NextRetryDelay: app.NextRetryDelay(), Category: app.Category(),
	})
}

// errTypeName is the SDK's type of a plain error: its Go type's name.
func errTypeName(err error) string {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}
