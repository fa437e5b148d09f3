package main

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// warmUpTimeout bounds the start-up read: a store that does not answer by
// then is left to the activities' own retries.
const warmUpTimeout = 10 * time.Second

// warmUpFirestore opens the worker's Firestore connection before a task
// needs it, with one read of a document that does not exist. Without it
// the first investigation after a start pays for the connection (on Google
// Cloud also the TLS handshake and the token) inside its first model
// phase: 20-30 ms against the local emulator. A missing document is the
// expected answer; any other error is returned for a warning.
func warmUpFirestore(ctx context.Context, fs *firestore.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := fs.Collection("investigator-warm-up").Doc("connection").Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}
