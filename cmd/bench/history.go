package main

import (
	"context"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Activity type names, as the worker registers them.
const (
	actPlan     = "GeneratePlan"
	actTurn     = "ModelTurn"
	actTool     = "CallTool"
	actReflect  = "Reflect"
	actConclude = "Conclude"
	actMode     = "DecideMode"
	actReview   = "ReviewVerdict"
)

// activity is one activity of a history, from its events.
type activity struct {
	typ                        string
	scheduled, started, closed time.Time
	identity                   string // of the worker that started its last attempt
	completed                  bool
	bytes                      int // protobuf size of its events
	events                     int
	// local says it ran as a local activity: one marker, no times of its own.
	local bool
}

// model says the activity is a model call: the bench's one list of them
// (every row counting model calls by activity type uses it).
func (a *activity) model() bool {
	switch a.typ {
	case actPlan, actTurn, actReflect, actConclude, actMode, actReview:
		return true
	}
	return false
}

// span is scheduled → closed.
func (a *activity) span() interval { return interval{a.scheduled, a.closed} }

// histInfo is what the bench reads from one history.
type histInfo struct {
	events, bytes  int
	activities     []*activity // in schedule order
	largestPayload int
	// timeline is every event's type and time, for -trace.
	timeline []timedEvent
}

type timedEvent struct {
	typ enums.EventType
	at  time.Time
}

var payloadName = (&commonpb.Payload{}).ProtoReflect().Descriptor().FullName()

func fetchHistory(ctx context.Context, tc client.Client, id string) (*historypb.History, error) {
	it := tc.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("read the history of %s: %w", id, err)
		}
		h.Events = append(h.Events, e)
	}
	return h, nil
}

func analyze(h *historypb.History) histInfo {
	info := histInfo{events: len(h.Events), bytes: proto.Size(h), largestPayload: largestPayload(h.ProtoReflect())}
	byID := map[int64]*activity{}
	for _, e := range h.Events {
		at := e.GetEventTime().AsTime()
		info.timeline = append(info.timeline, timedEvent{e.GetEventType(), at})
		var a *activity
		switch {
		case e.GetActivityTaskScheduledEventAttributes() != nil:
			a = &activity{typ: e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName(), scheduled: at}
			byID[e.GetEventId()] = a
			info.activities = append(info.activities, a)
		case e.GetActivityTaskStartedEventAttributes() != nil:
			x := e.GetActivityTaskStartedEventAttributes()
			if a = byID[x.GetScheduledEventId()]; a != nil {
				a.started, a.identity = at, x.GetIdentity()
			}
		case e.GetActivityTaskCompletedEventAttributes() != nil:
			if a = byID[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; a != nil {
				a.closed, a.completed = at, true
			}
		case e.GetActivityTaskFailedEventAttributes() != nil:
			if a = byID[e.GetActivityTaskFailedEventAttributes().GetScheduledEventId()]; a != nil {
				a.closed = at
			}
		case e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity":
			var data struct{ ActivityType string }
			_ = converter.GetDefaultDataConverter().FromPayloads(e.GetMarkerRecordedEventAttributes().GetDetails()["data"], &data)
			a = &activity{typ: data.ActivityType, local: true, completed: e.GetMarkerRecordedEventAttributes().GetFailure() == nil}
			info.activities = append(info.activities, a)
		case e.GetActivityTaskTimedOutEventAttributes() != nil:
			if a = byID[e.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()]; a != nil {
				a.closed = at
			}
		}
		if a != nil {
			a.events++
			a.bytes += proto.Size(e)
		}
	}
	return info
}

// concluded is when the last Conclude activity completed.
func (h histInfo) concluded() (time.Time, bool) {
	for i := len(h.activities) - 1; i >= 0; i-- {
		if a := h.activities[i]; a.typ == actConclude && a.completed {
			return a.closed, true
		}
	}
	return time.Time{}, false
}

func (h histInfo) ofType(pred func(*activity) bool) []*activity {
	var out []*activity
	for _, a := range h.activities {
		if pred(a) {
			out = append(out, a)
		}
	}
	return out
}

func spans(acts []*activity) []interval {
	out := make([]interval, len(acts))
	for i, a := range acts {
		out[i] = a.span()
	}
	return out
}

// largestPayload is the protobuf size of the largest Payload anywhere in m.
func largestPayload(m protoreflect.Message) int {
	if m.Descriptor().FullName() == payloadName {
		return proto.Size(m.Interface())
	}
	best := 0
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := range l.Len() {
				best = max(best, largestPayload(l.Get(i).Message()))
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				best = max(best, largestPayload(mv.Message()))
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			best = max(best, largestPayload(v.Message()))
		}
		return true
	})
	return best
}
