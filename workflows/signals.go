package workflows

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/payloadcodec"
)

// The steering inputs also arrive as signals, for `temporal workflow signal`
// and the Web UI's "Send a Signal". A signal reaches the same validation and
// the same handler as its update; since it cannot be refused to its sender,
// an invalid one becomes a progress note saying why it was ignored, never a
// failed workflow task. Payloads are read loosely: a JSON string, or an
// object with "text" (and "question_id" for answer); approve reads none.
//
// With a payload key, anyone who may signal the workflow but lacks the key
// can still send one (`temporal workflow signal --input '"..."'` without the
// codec): the worker's payload codec refuses such a payload (not encrypted
// with the key, written for another workflow, under a key this worker does
// not hold), and the signal becomes a note "<name> signal refused: ...",
// its text never read. So does a signal that carries no payload at all
// (payloadcodec.RefusedMissing): approve too takes one, `--input '{}'`.

// signalInput is one signal's payload: its JSON value, or why the payload
// codec refused it. The codec hands the refusal to RefusePayload instead of
// failing (payloadcodec.Refuser), so the same history gives the same note,
// live and in replay, and no workflow task fails on what an outsider sent.
type signalInput struct {
	value   any
	refused error
}

func (s *signalInput) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &s.value) }

// RefusePayload implements payloadcodec.Refuser.
func (s *signalInput) RefusePayload(err error) { s.refused = err }

// afterSeq is the progress query's argument, a sequence number, taken the
// same way: a query whose argument the codec refuses is answered with the
// reason, never a panic outside the workflow's coroutines.
type afterSeq struct {
	n       int
	refused error
}

func (a *afterSeq) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &a.n) }

// RefusePayload implements payloadcodec.Refuser. A query sent without an
// argument reads from the start (the Web UI's Queries tab, `temporal
// workflow query --name progress`): it changes nothing, so under a key file
// it is not refused like a payloadless steering input.
func (a *afterSeq) RefusePayload(err error) {
	if !payloadcodec.Missing(err) {
		a.refused = err
	}
}

// progressQuery adapts a progress query handler to afterSeq.
func progressQuery(events func(after int) ([]investigation.Event, error)) func(afterSeq) ([]investigation.Event, error) {
	return func(after afterSeq) ([]investigation.Event, error) {
		if after.refused != nil {
			return nil, after.refused
		}
		return events(after.n)
	}
}

// signal is one steering signal: its name and how to apply a payload.
type signal struct {
	name  string
	apply func(v any) (investigation.Ack, error)
}

func (r *run) signals(ctx workflow.Context) []signal {
	textual := func(valid func(string) error, handle func(string) investigation.Ack) func(any) (investigation.Ack, error) {
		return func(v any) (investigation.Ack, error) {
			s, err := signalText(v)
			if err == nil {
				err = valid(s)
			}
			if err != nil {
				return investigation.Ack{}, err
			}
			return handle(s), nil
		}
	}
	return []signal{
		{investigation.UpdateHint, textual(r.checkHintSignal(ctx), r.hint)},
		{investigation.UpdateApprove, func(any) (investigation.Ack, error) {
			if err := r.decisionOpen(); err != nil {
				return investigation.Ack{}, err
			}
			return r.approve(), nil
		}},
		{investigation.UpdateRevise, textual(r.checkRevisionSignal(ctx), r.revise)},
		{investigation.UpdateAnswer, func(v any) (investigation.Ack, error) {
			ans, err := signalAnswer(v)
			if err == nil {
				err = r.checkAnswer(ans)
			}
			if err != nil {
				return investigation.Ack{}, err
			}
			return r.answer(ans), nil
		}},
		{investigation.UpdateStop, func(v any) (investigation.Ack, error) {
			reason, _ := signalText(v) // a stop needs no reason
			if err := r.checkStopSignal(ctx); err != nil {
				return investigation.Ack{}, err
			}
			return r.stop(reason), nil
		}},
		{investigation.UpdateAsk, textual(r.checkQuestion, r.ask)},
		{investigation.AlertsUpdate, r.alertsSignal},                                   // intake.go
		{investigation.UpdateApproveCall, decision(r.checkApproveCall, r.approveCall)}, // mcp.go
		{investigation.UpdateDenyCall, decision(r.checkDenyCall, r.denyCall)},
	}
}

// decision adapts an approve_call or deny_call handler to a signal.
func decision(valid func(investigation.CallDecision) error, handle func(investigation.CallDecision) investigation.Ack) func(any) (investigation.Ack, error) {
	return func(v any) (investigation.Ack, error) {
		d, err := signalDecision(v)
		if err == nil {
			err = valid(d)
		}
		if err != nil {
			return investigation.Ack{}, err
		}
		return handle(d), nil
	}
}

// listen receives the steering signals for the life of the run.
func (r *run) listen(ctx workflow.Context) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		sigs := r.signals(ctx)
		sel := workflow.NewSelector(ctx)
		for _, s := range sigs {
			sel.AddReceive(workflow.GetSignalChannel(ctx, s.name), func(c workflow.ReceiveChannel, _ bool) {
				var in signalInput
				c.Receive(ctx, &in)
				r.receive(ctx, s, in)
			})
		}
		for ctx.Err() == nil {
			sel.Select(ctx)
		}
	})
}

// drainInputs applies the signals still buffered and waits for the update
// handlers to finish, before the run completes or continues as new.
func (r *run) drainInputs(ctx workflow.Context) error {
	r.applyBuffered(ctx)
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && r.Intake.inFlight == 0 })
}

// applyBuffered applies the signals received and not yet handled.
func (r *run) applyBuffered(ctx workflow.Context) {
	for _, s := range r.signals(ctx) {
		ch := workflow.GetSignalChannel(ctx, s.name)
		var in signalInput
		for ch.ReceiveAsync(&in) {
			r.receive(ctx, s, in)
			in = signalInput{}
		}
	}
}

// receive applies one signal, or notes why it was refused or ignored.
func (r *run) receive(ctx workflow.Context, s signal, in signalInput) {
	if in.refused != nil && !takesPayloadless(ctx, in.refused) {
		r.noteSignal(ctx, fmt.Sprintf("%s signal refused: %v", s.name, in.refused))
		return
	}
	if _, err := s.apply(in.value); err != nil {
		r.noteSignal(ctx, fmt.Sprintf("%s signal ignored: %v", s.name, err))
	}
}

// noteSignal notes a signal refused or ignored: the run's first
// maxSignalNotes, then once that later ones go unnoted, so a flood of
// signals anyone who may signal can send does not push the run's progress
// out of its window (maxRunEvents). A note is a progress write (a
// StoreProgress marker) in a workflow task that emitted nothing else, so
// histories recorded before the bounded-signal-notes gate, asked only at
// the first signal past the bound, note every one.
func (r *run) noteSignal(ctx workflow.Context, text string) {
	r.signalNotes++
	switch {
	case r.signalNotes <= maxSignalNotes ||
		workflow.GetVersion(ctx, "bounded-signal-notes", workflow.DefaultVersion, 1) == workflow.DefaultVersion:
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: text})
	case r.signalNotes == maxSignalNotes+1:
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf(
			"further signals that are refused or ignored are not noted (%d were)", maxSignalNotes)})
	}
}

// takesPayloadless says whether a signal the codec refused for carrying no
// payload is taken as before, with a nil value: in histories recorded
// before the "payloadless-refused" gate, which a keyed worker took.
func takesPayloadless(ctx workflow.Context, refused error) bool {
	return payloadcodec.Missing(refused) &&
		workflow.GetVersion(ctx, "payloadless-refused", workflow.DefaultVersion, 1) == workflow.DefaultVersion
}

// input is an update's argument as the payload codec hands it over: its
// value, or why the codec refused its payload (payloadcodec.Refuser), so
// that the validator rejects it with the reason instead of the decode.
type input[T any] struct {
	v       T
	refused error
}

func (in *input[T]) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &in.v) }

// RefusePayload implements payloadcodec.Refuser.
func (in *input[T]) RefusePayload(err error) { in.refused = err }

// value is the argument for the handler. Only the validator rejects a
// refused one, and it does not run in replay: an update that a worker took
// before payloadless inputs were refused replays with the zero value it
// got then; any other refusal there is a key this worker lacks, and fails
// the workflow task, as the decode did, for a worker that holds it.
func (in input[T]) value() T {
	if in.refused != nil && !payloadcodec.Missing(in.refused) {
		panic(in.refused)
	}
	return in.v
}

func signalText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case map[string]any:
		if s, ok := x["text"].(string); ok {
			return s, nil
		}
	case nil:
		return "", nil
	}
	return "", errors.New(`its payload must be a JSON string or {"text": "..."}`)
}

func signalAnswer(v any) (investigation.Answer, error) {
	if m, ok := v.(map[string]any); ok {
		id, _ := m["question_id"].(string)
		text, _ := m["text"].(string)
		return investigation.Answer{QuestionID: id, Text: text}, nil
	}
	text, err := signalText(v)
	if err != nil {
		return investigation.Answer{}, errors.New(`its payload must be a JSON string or {"question_id": "q-1", "text": "..."}`)
	}
	return investigation.Answer{Text: text}, nil
}
