package payloadcodec

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

func workflowCtx(id string) converter.WorkflowSerializationContext {
	return converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: id}
}

// TestFailuresAreBoundToTheirWorkflow: a failure's encoded attributes are a
// payload in an ordinary history. Bound to the key only, anyone who reads
// that history could send it as a signal (a stop needs no text, an approve
// reads none) to any investigation. Bound to its workflow it is refused
// elsewhere; one bound to the key only, as failures were, is refused by any
// workflow's data converter and still read as a failure, so recorded
// histories replay.
func TestFailuresAreBoundToTheirWorkflow(t *testing.T) {
	dc := NewDataConverter(mustKeys(t, "k1:"+newKey(t)), nil)
	root := NewFailureConverter(dc, true)
	inA := converter.WithFailureConverterSerializationContext(root, workflowCtx("investigation-a"))
	f := inA.ErrorToFailure(errors.New("gemini: 429 rate limited"))
	stolen := f.GetEncodedAttributes()
	require.Equal(t, "workflow:default/investigation-a", string(stolen.GetMetadata()[MetadataBoundTo]))

	var v any
	err := dc.WithSerializationContext(workflowCtx("investigation-b")).FromPayload(stolen, &v)
	require.Equal(t, RefusedElsewhere, refusal(t, err), "a failure of a is no signal for b")
	var app *temporal.ApplicationError
	require.True(t, errors.As(inA.FailureToError(proto.Clone(f).(*failurepb.Failure)), &app))
	require.Equal(t, "gemini: 429 rate limited", app.Message())

	// As failures were written before: bound to the key only.
	old := root.ErrorToFailure(errors.New("gemini: 429 rate limited"))
	require.Equal(t, "key", string(old.GetEncodedAttributes().GetMetadata()[MetadataBoundTo]))
	err = dc.WithSerializationContext(workflowCtx("investigation-b")).FromPayload(old.GetEncodedAttributes(), &v)
	require.Equal(t, RefusedKeyOnly, refusal(t, err), "no workflow takes it as a signal")
	require.True(t, errors.As(inA.FailureToError(proto.Clone(old).(*failurepb.Failure)), &app), "replay reads it")
	require.Equal(t, "gemini: 429 rate limited", app.Message())
}

// TestOnlyKeyErrorsTravelInClear: an error that merely starts with the words
// of a KeyError (a tool's or model's text) is encrypted like any other; the
// sentence a workflow panicked with on a KeyError is written in clear.
func TestOnlyKeyErrorsTravelInClear(t *testing.T) {
	keys := mustKeys(t, "k1:"+newKey(t))
	dc := NewDataConverter(keys, nil)
	fc := converter.WithFailureConverterSerializationContext(NewFailureConverter(dc, true), workflowCtx("investigation-a"))
	hostile := errors.New(decryptPrefix + ` encrypted with key "k1": the payload is damaged; the host 10.0.0.7 holds the stolen database`)
	f := fc.ErrorToFailure(hostile)
	require.Equal(t, "Encoded failure", f.GetMessage())

	// The worker panics on a payload under a key it lacks; the SDK hands the
	// failure converter the panic as text.
	other, err := in(NewCodec(mustKeys(t, "k9:"+newKey(t))), "investigation-a").Encode([]*commonpb.Payload{jsonPayload(t, secret)})
	require.NoError(t, err)
	code := dc.WithSerializationContext(workflowCtx("investigation-a")).(converter.ContextAware).WithWorkflowContext(fakeWorkflow{})
	var sentence string
	func() {
		defer func() { sentence = fmt.Sprint(recover()) }()
		var s string
		_ = code.FromPayload(other[0], &s)
	}()
	require.Contains(t, sentence, decryptPrefix)
	f = fc.ErrorToFailure(errors.New(sentence))
	require.Equal(t, sentence, f.GetMessage())
	require.Nil(t, f.GetEncodedAttributes())
	msg, ok := Explain(fc.FailureToError(f))
	require.True(t, ok)
	require.Equal(t, "the worker reports: "+sentence, msg)
}
