package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/secops-agent/investigator/investigation"
)

// The steering inputs also arrive as signals, for `temporal workflow signal`
// and the Web UI's "Send a Signal". A signal reaches the same validation and
// the same handler as its update; since it cannot be refused to its sender,
// an invalid one becomes a progress note saying why it was ignored, never a
// failed workflow task. Payloads are read loosely: a JSON string, or an
// object with "text" (and "question_id" for answer); approve takes none.

// signal is one steering signal: its name and how to apply a payload.
type signal struct {
	name  string
	apply func(v any) (investigation.Ack, error)
}

func (r *run) signals() []signal {
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
		{investigation.UpdateHint, textual(text("hint"), r.hint)},
		{investigation.UpdateApprove, func(any) (investigation.Ack, error) {
			if err := r.decisionOpen(); err != nil {
				return investigation.Ack{}, err
			}
			return r.approve(), nil
		}},
		{investigation.UpdateRevise, textual(r.checkRevision, r.revise)},
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
			if err := r.checkStop(reason); err != nil {
				return investigation.Ack{}, err
			}
			return r.stop(reason), nil
		}},
		{investigation.UpdateAsk, textual(r.checkQuestion, r.ask)},
		{investigation.AlertsUpdate, r.alertsSignal}, // intake.go
	}
}

// listen receives the steering signals for the life of the run.
func (r *run) listen(ctx workflow.Context) {
	sigs := r.signals()
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		for _, s := range sigs {
			sel.AddReceive(workflow.GetSignalChannel(ctx, s.name), func(c workflow.ReceiveChannel, _ bool) {
				var v any
				c.Receive(ctx, &v)
				r.receive(s, v)
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
	for _, s := range r.signals() {
		ch := workflow.GetSignalChannel(ctx, s.name)
		var v any
		for ch.ReceiveAsync(&v) {
			r.receive(s, v)
			v = nil
		}
	}
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && r.Intake.inFlight == 0 })
}

// receive applies one signal, or notes why it was ignored.
func (r *run) receive(s signal, v any) {
	if _, err := s.apply(v); err != nil {
		r.emit(investigation.Event{Kind: investigation.EventNote, Text: fmt.Sprintf("%s signal ignored: %v", s.name, err)})
	}
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
