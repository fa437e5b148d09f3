package payloadcodec

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
)

// keyErrorLogEvery spaces out the log lines about one key problem: a
// workflow whose input this worker cannot decrypt fails the same way on
// every retry and every query.
const keyErrorLogEvery = time.Minute

// FailureConverter encrypts failure messages and stack traces with
// encrypting, except when a KeyError is the cause: then the failure holds
// the KeyError's sentence alone, in clear, built by plain. That sentence
// names key IDs and a key file, nothing secret, and it is exactly what a
// process without the right key needs to read (the starter's user, the Web
// UI without the codec server). Each such failure is logged once a minute
// per key problem: in the worker this is the line that says why a workflow
// or activity cannot run.
type FailureConverter struct {
	encrypting, plain converter.FailureConverter
	logger            *slog.Logger

	mu     sync.Mutex
	logged map[string]time.Time
}

// NewFailureConverter wraps encrypting (EncodeCommonAttributes on) and plain
// (off) failure converters over the same data converter; logger may be nil.
func NewFailureConverter(encrypting, plain converter.FailureConverter, logger *slog.Logger) *FailureConverter {
	return &FailureConverter{encrypting: encrypting, plain: plain, logger: logger, logged: map[string]time.Time{}}
}

// ErrorToFailure implements converter.FailureConverter.
func (f *FailureConverter) ErrorToFailure(err error) *failurepb.Failure {
	var ke *KeyError
	if !errors.As(err, &ke) {
		return f.encrypting.ErrorToFailure(err)
	}
	f.log(ke)
	return f.plain.ErrorToFailure(ke)
}

// FailureToError implements converter.FailureConverter; failures in clear
// and encrypted ones both decode.
func (f *FailureConverter) FailureToError(failure *failurepb.Failure) error {
	return f.encrypting.FailureToError(failure)
}

func (f *FailureConverter) log(ke *KeyError) {
	if f.logger == nil {
		return
	}
	msg := ke.Error()
	now := time.Now()
	f.mu.Lock()
	last, seen := f.logged[msg]
	if !seen || now.Sub(last) >= keyErrorLogEvery {
		f.logged[msg] = now
	} else {
		msg = ""
	}
	f.mu.Unlock()
	if msg != "" {
		f.logger.Error(msg)
	}
}
