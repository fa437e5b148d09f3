package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/secops-agent/investigator/config"
)

// defaultCallTimeout bounds each call the starter makes to Firestore or
// Temporal (flag --call-timeout): with a service down or unreachable (the
// Firestore client otherwise waits for a connection forever) a command ends
// with one sentence instead of hanging.
const defaultCallTimeout = 30 * time.Second

// unavailableError is a call that got no answer in time, or was
// interrupted: the commands that make several calls stop at the first one.
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string { return e.msg }

func isUnavailable(err error) bool {
	var u *unavailableError
	return errors.As(err, &u)
}

// firestoreCall runs one Firestore call under the call timeout.
func (a *app) firestoreCall(ctx context.Context, call func(context.Context) error) error {
	return a.bounded(ctx, call, func() string {
		if host := os.Getenv("FIRESTORE_EMULATOR_HOST"); host != "" {
			return fmt.Sprintf("Firestore at %s did not answer within %s; is the emulator running?", host, a.timeout())
		}
		project := a.firestore.Project
		if project == "" {
			project = config.EmulatorProject
		}
		return fmt.Sprintf("Firestore (project %s, database %s) did not answer within %s; check the network and the Google Cloud credentials", project, a.firestore.Database, a.timeout())
	}, "Firestore")
}

// temporalCall runs one Temporal call under the call timeout.
func (a *app) temporalCall(ctx context.Context, call func(context.Context) error) error {
	return a.bounded(ctx, call, a.temporalTimeout, "Temporal")
}

func (a *app) temporalTimeout() string {
	return fmt.Sprintf("Temporal at %s did not answer within %s; is the server running?", a.temporal.Address, a.timeout())
}

// bounded runs call with the call timeout and turns its expiry, or an
// interruption of ctx, into one sentence.
func (a *app) bounded(ctx context.Context, call func(context.Context) error, timeout func() string, service string) error {
	cctx, cancel := context.WithTimeout(ctx, a.timeout())
	defer cancel()
	err := call(cctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return &unavailableError{"interrupted while waiting for " + service}
	case cctx.Err() != nil:
		return &unavailableError{timeout()}
	}
	return err
}

// timeout is the call timeout; zero (an app built without flags) means the
// default.
func (a *app) timeout() time.Duration {
	if a.callTimeout <= 0 {
		return defaultCallTimeout
	}
	return a.callTimeout
}
