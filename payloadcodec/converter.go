package payloadcodec

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// DataConverter is Temporal's default data converter with the codec behind
// it: payloads are serialized as usual, then encrypted. In workflow code it
// also decides what a payload the worker cannot decrypt does: while the
// workflow replays (a worker with the wrong key picked up a running
// investigation) it panics, so that the workflow task fails and is retried,
// by this worker after a fix or by another that holds the key, instead of
// the workflow failing for good; on new events it is an ordinary error (a
// new investigation fails at once with the sentence, an update is refused).
// Each such problem is logged once a minute.
type DataConverter struct {
	converter.DataConverter
	report *reporter
}

var (
	_ converter.DataConverter    = (*DataConverter)(nil)
	_ converter.ContextAware     = (*DataConverter)(nil)
	_ converter.DataConverter    = (*workflowConverter)(nil)
	_ converter.FailureConverter = (*FailureConverter)(nil)
)

// NewDataConverter returns the data converter for keys (nil: decode-only,
// see Codec); logger (may be nil) receives the key problems.
func NewDataConverter(keys *Keys, logger *slog.Logger) *DataConverter {
	return &DataConverter{
		DataConverter: converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), NewCodec(keys)),
		report:        &reporter{logger: logger, logged: map[string]time.Time{}},
	}
}

// WithWorkflowContext implements converter.ContextAware.
func (d *DataConverter) WithWorkflowContext(ctx converter.WorkflowContext) converter.DataConverter {
	return &workflowConverter{DataConverter: d.DataConverter, ctx: ctx, report: d.report}
}

// WithContext implements converter.ContextAware: outside workflow code an
// undecryptable payload is an ordinary error.
func (d *DataConverter) WithContext(context.Context) converter.DataConverter { return d }

// workflowConverter is the DataConverter inside one workflow's code.
type workflowConverter struct {
	converter.DataConverter
	ctx    converter.WorkflowContext
	report *reporter
}

func (w *workflowConverter) FromPayload(p *commonpb.Payload, v any) error {
	return w.check(w.DataConverter.FromPayload(p, v))
}

func (w *workflowConverter) FromPayloads(ps *commonpb.Payloads, v ...any) error {
	return w.check(w.DataConverter.FromPayloads(ps, v...))
}

func (w *workflowConverter) check(err error) error {
	var ke *KeyError
	if !errors.As(err, &ke) {
		return err
	}
	w.report.log(ke)
	if workflow.IsReplaying(w.ctx) {
		panic(ke)
	}
	return err
}

// keyErrorLogEvery spaces out the log lines about one key problem: a
// workflow task that fails on it is retried, and queries repeat it.
const keyErrorLogEvery = time.Minute

// reporter logs each distinct key problem at most once a minute.
type reporter struct {
	logger *slog.Logger
	mu     sync.Mutex
	logged map[string]time.Time
}

func (r *reporter) log(ke *KeyError) {
	if r == nil || r.logger == nil {
		return
	}
	msg := ke.Error()
	now := time.Now()
	r.mu.Lock()
	last, seen := r.logged[msg]
	fresh := !seen || now.Sub(last) >= keyErrorLogEvery
	if fresh {
		r.logged[msg] = now
	}
	r.mu.Unlock()
	if fresh {
		r.logger.Error(msg)
	}
}
