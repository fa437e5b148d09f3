package source

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/secops-agent/investigator/intake"
)

// AdmitFunc sends one batch to the admission workflow.
type AdmitFunc func(ctx context.Context, req intake.AdmitRequest) (intake.AdmitResult, error)

// Batcher gathers the alerts of concurrent messages into admit requests of
// up to intake.MaxBatch alerts, sent Linger after the first one arrived (or
// at once when full), at most InFlight at a time: a burst of a thousand
// messages is a few dozen updates of the admission workflow, not a
// thousand.
type Batcher struct {
	Admit    AdmitFunc
	Settings intake.Settings
	Linger   time.Duration
	InFlight int

	once sync.Once
	in   chan *pending
	sem  chan struct{}
}

type pending struct {
	alert intake.Alert
	done  chan admitted
}

type admitted struct {
	outcome    intake.Outcome
	retryAfter time.Duration
	err        error
}

// Run sends batches until ctx ends; Submit waits for it.
func (b *Batcher) Run(ctx context.Context) {
	b.init()
	for {
		var batch []*pending
		select {
		case <-ctx.Done():
			return
		case p := <-b.in:
			batch = append(batch, p)
		}
		timer := time.NewTimer(b.Linger)
	gather:
		for len(batch) < intake.MaxBatch {
			select {
			case p := <-b.in:
				batch = append(batch, p)
			case <-timer.C:
				break gather
			case <-ctx.Done():
				break gather
			}
		}
		timer.Stop()
		select {
		case b.sem <- struct{}{}:
		case <-ctx.Done():
			fail(batch, ctx.Err())
			return
		}
		go func() {
			defer func() { <-b.sem }()
			b.send(ctx, batch)
		}()
	}
}

func (b *Batcher) init() {
	b.once.Do(func() {
		b.in = make(chan *pending)
		b.sem = make(chan struct{}, max(b.InFlight, 1))
	})
}

// send admits one batch; the alerts whose messages gave up waiting are
// still sent (their outcome is durable all the same, and the message
// comes back to find it).
func (b *Batcher) send(ctx context.Context, batch []*pending) {
	req := intake.AdmitRequest{Settings: b.Settings, Alerts: make([]intake.Alert, len(batch))}
	for i, p := range batch {
		req.Alerts[i] = p.alert
	}
	res, err := b.Admit(ctx, req)
	if err == nil && len(res.Outcomes) != len(batch) {
		err = errors.New("the admission workflow answered for another number of alerts")
	}
	if err != nil {
		fail(batch, err)
		return
	}
	for i, p := range batch {
		p.done <- admitted{outcome: res.Outcomes[i], retryAfter: res.RetryAfter.Duration()}
	}
}

func fail(batch []*pending, err error) {
	for _, p := range batch {
		p.done <- admitted{err: err}
	}
}

// Submit has one alert admitted and returns its outcome (and, for a shed
// alert, how long to wait before it is sent again).
func (b *Batcher) Submit(ctx context.Context, a intake.Alert) (intake.Outcome, time.Duration, error) {
	// One alert the admission workflow cannot hold would have it refuse
	// the whole batch: it is refused here, alone.
	if err := a.Check(); err != nil {
		return intake.Outcome{}, 0, err
	}
	b.init()
	p := &pending{alert: a, done: make(chan admitted, 1)}
	select {
	case b.in <- p:
	case <-ctx.Done():
		return intake.Outcome{}, 0, errors.New("interrupted before the alert was admitted")
	}
	select {
	case r := <-p.done:
		return r.outcome, r.retryAfter, r.err
	case <-ctx.Done():
		return intake.Outcome{}, 0, errors.New("interrupted while the alert was being admitted")
	}
}
