package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A batch where one run of four never concluded reports no wall-time
// ratio: a percentile of the three that did would leave the slowest out.
// A failed CPU reading gives n/a, not a ratio of zeros.
func TestBatchFiguresWithFailedRunsAreNotApplicable(t *testing.T) {
	done := func(d time.Duration) *run { return &run{wall: d} }
	failed := &run{err: errors.New("timed out")}
	bt := &batch{n: 4, runs: []*run{done(time.Second), done(time.Second), done(2 * time.Second), failed}, elapsed: 3 * time.Second, servers: map[string]float64{}}
	rows := batchRows(bt, time.Second, time.Second, nil)
	for _, r := range rows[1:3] {
		if r.NA == "" || !strings.Contains(r.NA, "1 of 4") {
			t.Errorf("%s = %+v, want n/a naming the 1 of 4 runs that did not conclude", r.Figure, r)
		}
	}

	ok := &batch{n: 2, runs: []*run{done(time.Second), done(time.Second)}, elapsed: 2 * time.Second, cpu: 1, servers: map[string]float64{}}
	part := &batch{n: 2, runs: []*run{done(time.Second), failed}, elapsed: 2 * time.Second, cpu: 1, servers: map[string]float64{}}
	for _, r := range scaleRows(ok, part, 2, time.Second) {
		if r.NA == "" {
			t.Errorf("%s = %+v with a run that did not conclude, want n/a", r.Figure, r)
		}
	}
	noCPU := &batch{n: 2, runs: []*run{done(time.Second), done(time.Second)}, elapsed: 2 * time.Second, cpuErr: errors.New("no /proc"), servers: map[string]float64{}}
	if r := scaleRows(ok, noCPU, 2, time.Second)[2]; r.NA == "" {
		t.Errorf("worker CPU with an unreadable CPU time = %+v, want n/a", r)
	}
}

// The history row names the model calls of the run: the workflow's local
// store writes (StoreProgress, StoreContext markers) are activities too,
// but no model call, and an activity the bench does not know is none.
func TestHistoryRowCountsModelActivitiesOnly(t *testing.T) {
	at := timestamppb.New(time.Now())
	var evs []*historypb.HistoryEvent
	id := int64(0)
	sched := func(typ string) {
		id++
		s := id
		evs = append(evs, &historypb.HistoryEvent{EventId: s, EventTime: at, EventType: enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{ActivityType: &commonpb.ActivityType{Name: typ}}}})
		id++
		evs = append(evs, &historypb.HistoryEvent{EventId: id, EventTime: at, EventType: enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
			Attributes: &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: s}}})
	}
	marker := func(typ string) {
		p, err := converter.GetDefaultDataConverter().ToPayloads(struct{ ActivityType string }{typ})
		if err != nil {
			t.Fatal(err)
		}
		id++
		evs = append(evs, &historypb.HistoryEvent{EventId: id, EventTime: at, EventType: enums.EVENT_TYPE_MARKER_RECORDED,
			Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: "LocalActivity", Details: map[string]*commonpb.Payloads{"data": p}}}})
	}
	sched(actPlan)
	marker("StoreProgress")
	marker(actTool)
	sched(actTurn)
	marker("StoreProgress")
	sched(actTool)
	marker("StoreContext")
	sched("DescribeTools")
	sched(actConclude)
	r := &run{wall: time.Second, hist: analyze(&historypb.History{Events: evs})}
	rows := historyRows(r, []*run{r})
	if want := "2 tool calls, 3 model calls"; !strings.HasPrefix(rows[0].Detail, want) {
		t.Errorf("a plan, a turn and a conclusion with 2 tool calls and 3 store writes: detail %q, want it to start %q", rows[0].Detail, want)
	}
	if want := "other activities: DescribeTools 1, StoreContext 1, StoreProgress 2"; !strings.HasSuffix(rows[0].Detail, want) {
		t.Errorf("detail %q, want it to end %q", rows[0].Detail, want)
	}
	// One CallTool ran as a local activity (a marker), one as an activity.
	if want := "3 events of the 2 CallTool activities (1 of them local"; !strings.HasPrefix(rows[1].Detail, want) {
		t.Errorf("events per tool call: detail %q, want it to start %q", rows[1].Detail, want)
	}
}

// The tool calls the overhead and store rows name are the CallTool
// activities in each run's history, not the count the scenario scripts.
func TestRowsCountToolCallsFromHistory(t *testing.T) {
	sc := standard("alert-1")
	now := time.Now()
	tr := &runTrace{sc: sc, calls: []modelCall{{span: interval{now, now.Add(time.Second)}}}}
	r := &run{sc: sc, trace: tr, wall: 2 * time.Second}
	for range 3 {
		r.hist.activities = append(r.hist.activities, &activity{typ: actTool, local: true})
	}
	if sc.toolCalls() == 3 {
		t.Fatal("the test needs a history that differs from the script")
	}
	if got := storeRow([]*run{r}, []callCount{{"Commit": 2}}).Detail; !strings.Contains(got, "(with 3 tool calls)") {
		t.Errorf("store row detail %q, want the history's 3 tool calls", got)
	}
	if got := (&bench{}).overheadRows([]*run{r}, time.Second)[0].Detail; !strings.Contains(got, "3 tool calls") {
		t.Errorf("overhead row detail %q, want the history's 3 tool calls", got)
	}
}
