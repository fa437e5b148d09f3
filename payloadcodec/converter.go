package payloadcodec

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/secops-agent/investigator/internal/clip"
)

// DataConverter is Temporal's default data converter with the codec behind
// it: payloads are serialized as usual, then encrypted. The SDK hands it the
// workflow a payload belongs to (WithSerializationContext), so that what it
// writes is bound to that workflow and what it reads must be (see Codec).
//
// It also decides what happens to a payload that cannot be used:
//
//   - a decode target that implements Refuser (the workflows' steering
//     signals, updates and progress queries) takes the error instead, so the
//     workflow notes or rejects it and never reads the payload, the same way
//     live and in replay;
//   - with keys, in a workflow, Refuser targets left without a payload (a
//     signal, update or query sent with none, as anyone may) take a
//     *RefusedError too: nothing encrypted shows that its sender holds a key;
//   - in workflow code, a payload that cannot be decrypted (a *KeyError: a
//     key this worker lacks, or that does not match) panics, live and in
//     replay alike: the workflow task fails and is retried, by this worker
//     after a fix or by another that holds the key, instead of the workflow
//     failing for good;
//   - everywhere else, and for a refused payload (*RefusedError: the same
//     answer whatever keys a worker holds), it is an ordinary error: a start
//     fails with the sentence, an update or query is refused with it.
//
// Each such problem in workflow code is logged once a minute.
type DataConverter struct {
	codec  converter.DataConverter // the codec data converter, in its serialization context once given one
	raw    *Codec                  // its codec, before any serialization context
	wf     converter.WorkflowContext
	report *reporter
	// bound: keys and a serialization context naming a workflow, where the
	// codec refuses what could have been written without a key.
	bound bool
}

var (
	_ converter.DataConverter                         = (*DataConverter)(nil)
	_ converter.ContextAware                          = (*DataConverter)(nil)
	_ converter.DataConverterWithSerializationContext = (*DataConverter)(nil)
	_ converter.FailureConverter                      = (*FailureConverter)(nil)
)

// Refuser is a decode target that takes a payload the codec refused or could
// not decrypt, instead of the decode failing.
type Refuser interface {
	RefusePayload(err error)
}

// NewDataConverter returns the data converter for keys (nil: decode-only,
// see Codec); logger (may be nil) receives the key problems.
func NewDataConverter(keys *Keys, logger *slog.Logger) *DataConverter {
	c := NewCodec(keys)
	return &DataConverter{
		codec:  converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c),
		raw:    c,
		report: &reporter{logger: logger, logged: map[string]time.Time{}, panicked: map[string]bool{}},
	}
}

// forFailures is d with the failure converter's codec (Codec.ForFailures),
// before any serialization context.
func (d *DataConverter) forFailures() *DataConverter {
	c := *d
	c.raw = d.raw.ForFailures()
	c.codec = converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c.raw)
	return &c
}

// WithSerializationContext implements
// converter.DataConverterWithSerializationContext.
func (d *DataConverter) WithSerializationContext(sc converter.SerializationContext) converter.DataConverter {
	c := *d
	c.codec = converter.WithDataConverterSerializationContext(d.codec, sc)
	scope, _ := scopeOf(sc)
	c.bound = d.raw.keys != nil && scope != ""
	return &c
}

// WithWorkflowContext implements converter.ContextAware.
func (d *DataConverter) WithWorkflowContext(ctx converter.WorkflowContext) converter.DataConverter {
	c := *d
	c.wf = ctx
	return &c
}

// WithContext implements converter.ContextAware: outside workflow code an
// undecryptable payload is an ordinary error.
func (d *DataConverter) WithContext(context.Context) converter.DataConverter { return d }

// ToPayload implements converter.DataConverter.
func (d *DataConverter) ToPayload(v any) (*commonpb.Payload, error) { return d.codec.ToPayload(v) }

// ToPayloads implements converter.DataConverter.
func (d *DataConverter) ToPayloads(vs ...any) (*commonpb.Payloads, error) {
	return d.codec.ToPayloads(vs...)
}

// FromPayload implements converter.DataConverter.
func (d *DataConverter) FromPayload(p *commonpb.Payload, v any) error {
	return d.settle(d.codec.FromPayload(p, v), v)
}

// FromPayloads implements converter.DataConverter.
func (d *DataConverter) FromPayloads(ps *commonpb.Payloads, vs ...any) error {
	// Only Refusers: a result without a value (an activity that returns only
	// an error) is decoded into a pointer too, and has nothing to refuse.
	if d.bound && len(ps.GetPayloads()) < len(vs) && allRefusers(vs) {
		return d.settle(&RefusedError{Reason: RefusedMissing}, vs...)
	}
	return d.settle(d.codec.FromPayloads(ps, vs...), vs...)
}

// ToString implements converter.DataConverter.
func (d *DataConverter) ToString(p *commonpb.Payload) string { return d.codec.ToString(p) }

// ToStrings implements converter.DataConverter.
func (d *DataConverter) ToStrings(ps *commonpb.Payloads) []string { return d.codec.ToStrings(ps) }

// settle decides what a decode error of the codec does (see DataConverter).
func (d *DataConverter) settle(err error, targets ...any) error {
	bad := payloadError(err)
	if bad == nil {
		return err
	}
	if d.wf != nil {
		// The worker's log; elsewhere the error reaches its caller (the
		// starter's user) or a failure (FailureConverter logs those).
		d.report.log(bad)
	}
	if refuse(bad, targets) {
		return nil
	}
	// Zero targets: a query or update without arguments that was sent some;
	// it is answered with the error, never a panic outside a coroutine.
	if ke := (*KeyError)(nil); errors.As(bad, &ke) && d.wf != nil && len(targets) > 0 {
		// The SDK keeps the panic's value only as text: the failure
		// converter knows the sentence by this record, not by its words.
		d.report.panicking(ke.Error())
		panic(ke)
	}
	return err
}

// allRefusers says whether there are targets and all of them are Refusers.
func allRefusers(targets []any) bool {
	for _, t := range targets {
		if _, ok := t.(Refuser); !ok {
			return false
		}
	}
	return len(targets) > 0
}

// refuse hands err to every target when all of them are Refusers.
func refuse(err error, targets []any) bool {
	if !allRefusers(targets) {
		return false
	}
	for _, t := range targets {
		t.(Refuser).RefusePayload(err)
	}
	return true
}

// keyErrorLogEvery spaces out the log lines about one key problem: a
// workflow task that fails on it is retried, and queries repeat it.
const keyErrorLogEvery = time.Minute

// maxLogged bounds the problems remembered for spacing: refused payloads
// quote what their sender wrote, so there can be any number of distinct ones.
const maxLogged = 1000

// maxLogMessage bounds each remembered and logged message, so that the
// reporter holds at most maxLogged of them whatever errors it is handed.
const maxLogMessage = 1024

// reporter logs each distinct key problem at most once a minute, and
// remembers the KeyError sentences workflow code panicked with.
type reporter struct {
	logger   *slog.Logger
	mu       sync.Mutex
	logged   map[string]time.Time
	panicked map[string]bool
}

// panicking records a KeyError sentence a workflow panics with.
func (r *reporter) panicking(sentence string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.panicked) >= maxLogged {
		clear(r.panicked)
	}
	r.panicked[sentence] = true
}

// panickedWith says whether workflow code of this process panicked with
// exactly this KeyError sentence.
func (r *reporter) panickedWith(msg string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.panicked[msg]
}

func (r *reporter) log(problem error) {
	if r == nil || r.logger == nil {
		return
	}
	msg := clip.String(problem.Error(), maxLogMessage)
	now := time.Now()
	r.mu.Lock()
	last, seen := r.logged[msg]
	fresh := !seen || now.Sub(last) >= keyErrorLogEvery
	if fresh {
		if len(r.logged) >= maxLogged {
			clear(r.logged)
		}
		r.logged[msg] = now
	}
	r.mu.Unlock()
	if fresh {
		r.logger.Error(msg)
	}
}
