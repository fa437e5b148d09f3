package main

import (
	"errors"
	"strings"
	"testing"
	"time"
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
