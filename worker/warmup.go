package main

import (
	"context"
	"log/slog"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/alerts"
)

// warmUpTimeout bounds the start-up read: a store that does not answer by
// then is left to the activities' own retries.
const warmUpTimeout = 10 * time.Second

// warmUpWait is how long the worker waits for the warm-up before it polls.
const warmUpWait = 3 * time.Second

// warmUpKey is an indicator key no alert holds.
const warmUpKey = "investigator-warm-up"

// warmUpFirestore opens the worker's Firestore connection, and the paths its
// tools take, before a task needs them: one read of a document that does
// not exist, then one alert search that matches nothing (the query
// search_alerts sends). Without them the first investigation after a start
// pays inside its model phases for the connection (on Google Cloud also the
// TLS handshake and the token; 20-30 ms against the local emulator) and for
// the store's first query (the emulator, a JVM, runs each kind of request
// slowly the first time: about 85 ms for a query). They also show at start
// that the worker may read and query the alerts: a missing document is the
// expected answer, any other error is returned for a warning.
func warmUpFirestore(ctx context.Context, fs *firestore.Client, search alertSearch, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := fs.Collection("investigator-warm-up").Doc("connection").Get(ctx)
	if err != nil && status.Code(err) != codes.NotFound {
		return err
	}
	_, err = search.Search(ctx, alerts.Query{Indicators: []string{warmUpKey}, Limit: 1})
	return err
}

// alertSearch is the alert store's search (*alerts.Store).
type alertSearch interface {
	Search(ctx context.Context, q alerts.Query) ([]alerts.Alert, error)
}

// warmUp is warmUpFirestore running beside the rest of the start.
type warmUp struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done closes
}

func startWarmUp(ctx context.Context, fs *firestore.Client, search alertSearch, timeout time.Duration) *warmUp {
	w := &warmUp{done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		w.err = warmUpFirestore(w.ctx, fs, search, timeout)
	}()
	return w
}

// stop ends the warm-up and waits for it; the worker calls it before it
// closes the store, on every exit.
func (w *warmUp) stop() { w.cancel(); <-w.done }

// report warns, once the warm-up ends, that the store did not answer. It
// is called only once the start got as far as polling: a start that fails
// for another reason (a bad key file, Temporal unreachable) closes the
// store under the read, and a warning about Firestore then sent the user
// the wrong way. A stopped warm-up says nothing.
func (w *warmUp) report(logger *slog.Logger) {
	go func() {
		<-w.done
		if w.err != nil && w.ctx.Err() == nil {
			logger.Warn("Firestore did not answer the worker's start-up read and alert search; each activity retries its own store calls", "error", w.err)
		}
	}()
}
