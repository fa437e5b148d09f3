package agentclient

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// UnavailableError is a call that got no answer in time, or was
// interrupted: a command that makes several calls stops at the first one.
type UnavailableError struct{ msg string }

func (e *UnavailableError) Error() string { return e.msg }

// IsUnavailable says err is an UnavailableError.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

// InterruptedError is following stopped by Ctrl-C or SIGTERM while the
// investigation goes on; it names the command that resumes it.
type InterruptedError struct{ msg string }

func (e *InterruptedError) Error() string { return e.msg }

// Bounded runs call with the timeout d and turns its expiry (the sentence
// timeout returns), or an interruption of ctx, into an UnavailableError.
// Every call to Temporal or Firestore that could otherwise wait forever
// (a service down, a connection never made) goes through it.
func Bounded(ctx context.Context, d time.Duration, service string, timeout func() string, call func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := call(cctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return &UnavailableError{"interrupted while waiting for " + service}
	case cctx.Err() != nil:
		return &UnavailableError{timeout()}
	}
	return err
}

// call runs one Temporal call under the call timeout.
func (c *Client) call(ctx context.Context, call func(context.Context) error) error {
	return Bounded(ctx, c.timeout, "Temporal", c.unreachable, call)
}

// unreachable is the sentence for a Temporal that did not answer in time.
func (c *Client) unreachable() string {
	return fmt.Sprintf("Temporal at %s did not answer within %s; is the server running?", c.cfg.Address, c.timeout)
}

// storeCall runs one call to the progress store under the call timeout:
// a Firestore client waits for a connection forever.
func (c *Client) storeCall(ctx context.Context, call func(context.Context) error) error {
	return Bounded(ctx, c.timeout, "the progress store", c.storeUnreachable, call)
}

// storeUnreachable is the sentence for a progress store that did not
// answer in time.
func (c *Client) storeUnreachable() string {
	if c.progressDown != nil {
		return c.progressDown()
	}
	return fmt.Sprintf("the progress store did not answer within %s", c.timeout)
}
