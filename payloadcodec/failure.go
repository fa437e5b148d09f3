package payloadcodec

import (
	"errors"
	"strings"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
)

// FailureConverter encrypts failure messages and stack traces with
// encrypting, except when a KeyError or RefusedError is the cause: then the
// failure holds its sentence alone, in clear, built by plain. That sentence
// names key IDs, a key file or a workflow ID, nothing secret, and it is
// exactly what a process without the right key needs to read (the starter's
// user, the Web UI without the codec server). Each such failure is logged
// like the data converter's key problems: in the worker this is the line
// that says why a workflow or activity cannot run.
type FailureConverter struct {
	encrypting, plain converter.FailureConverter
	report            *reporter
}

// NewFailureConverter wraps encrypting (EncodeCommonAttributes on) and plain
// (off) failure converters built over dc.
func NewFailureConverter(encrypting, plain converter.FailureConverter, dc *DataConverter) *FailureConverter {
	return &FailureConverter{encrypting: encrypting, plain: plain, report: dc.report}
}

// ErrorToFailure implements converter.FailureConverter.
func (f *FailureConverter) ErrorToFailure(err error) *failurepb.Failure {
	if bad := payloadError(err); bad != nil {
		f.report.log(bad)
		return f.plain.ErrorToFailure(bad)
	}
	if err != nil && strings.HasPrefix(err.Error(), decryptPrefix) {
		// The SDK's wrapper of a KeyError the workflow panicked with (see
		// DataConverter): its message is the sentence, its stack the SDK's.
		return f.plain.ErrorToFailure(errors.New(err.Error()))
	}
	return f.encrypting.ErrorToFailure(err)
}

// FailureToError implements converter.FailureConverter; failures in clear
// and encrypted ones both decode.
func (f *FailureConverter) FailureToError(failure *failurepb.Failure) error {
	return f.encrypting.FailureToError(failure)
}
