package payloadcodec

import (
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// FailureConverter encrypts failure messages and stack traces
// (EncodeCommonAttributes), except when a KeyError or RefusedError is the
// cause: then the failure holds its sentence alone, in clear. That sentence
// names key IDs, a key file or a workflow ID, nothing secret, and it is
// exactly what a process without the right key needs to read (the starter's
// user, the Web UI without the codec server). Each such failure is logged
// like the data converter's key problems: in the worker this is the line
// that says why a workflow or activity cannot run.
//
// The SDK hands it the workflow a failure belongs to
// (WithSerializationContext), so that its encoded attributes are bound to
// that workflow like every other payload: a failure copied from one history
// is no payload another workflow accepts as a signal. Failures written
// before that are bound to the key only; its codec still reads them
// (Codec.ForFailures), so recorded histories replay.
type FailureConverter struct {
	dc                *DataConverter // the failure codec's, in the context once given one
	encrypt           bool
	encrypting, plain converter.FailureConverter
}

var _ converter.FailureConverterWithSerializationContext = (*FailureConverter)(nil)

// NewFailureConverter is the failure converter over dc; encrypt turns
// EncodeCommonAttributes on (with keys).
func NewFailureConverter(dc *DataConverter, encrypt bool) *FailureConverter {
	return newFailureConverter(dc.forFailures(), encrypt)
}

func newFailureConverter(dc *DataConverter, encrypt bool) *FailureConverter {
	plain := temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc})
	encrypting := plain
	if encrypt {
		encrypting = temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: true})
	}
	return &FailureConverter{dc: dc, encrypt: encrypt, encrypting: encrypting, plain: plain}
}

// WithSerializationContext implements
// converter.FailureConverterWithSerializationContext.
func (f *FailureConverter) WithSerializationContext(sc converter.SerializationContext) converter.FailureConverter {
	return newFailureConverter(f.dc.WithSerializationContext(sc).(*DataConverter), f.encrypt)
}

// ErrorToFailure implements converter.FailureConverter.
func (f *FailureConverter) ErrorToFailure(err error) *failurepb.Failure {
	if bad := payloadError(err); bad != nil {
		f.dc.report.log(bad)
		return f.plain.ErrorToFailure(bad)
	}
	if err != nil && f.dc.report.panickedWith(err.Error()) {
		// The SDK's wrapper of a KeyError the workflow panicked with (see
		// DataConverter): its message is the sentence, its stack the SDK's.
		// Known by the record of the panic, never by its words, which any
		// error could start with.
		return f.plain.ErrorToFailure(temporal.NewApplicationError(err.Error(), keyErrorType))
	}
	return f.encrypting.ErrorToFailure(err)
}

// FailureToError implements converter.FailureConverter; failures in clear
// and encrypted ones both decode.
func (f *FailureConverter) FailureToError(failure *failurepb.Failure) error {
	return f.encrypting.FailureToError(failure)
}

// The failure types of the sentences written in clear: the Go type names
// the SDK gives a *KeyError and a *RefusedError. Explain looks for them.
const (
	keyErrorType     = "KeyError"
	refusedErrorType = "RefusedError"
)
