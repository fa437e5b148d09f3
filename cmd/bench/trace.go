package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// writeTrace prints each lone run's activities with their timings, for a
// reader who wants to see where a figure comes from (-trace).
func writeTrace(w io.Writer, m *measurements) {
	var runs []*run
	for _, rs := range append(m.lone, m.callsPar, m.callsSeq, m.stepsPar, m.stepsSeq) {
		runs = append(runs, rs...)
	}
	for _, r := range runs {
		if !r.ok() {
			fmt.Fprintf(w, "%s: %s\n", r.id, why(r.err))
			continue
		}
		fmt.Fprintf(w, "%s: wall %s, %d events\n", r.id, dur(r.wall), r.hist.events)
		for _, a := range r.hist.activities {
			if a.local {
				// A marker has no times of its own.
				fmt.Fprintf(w, "  %-12s (local)\n", a.typ)
				continue
			}
			fmt.Fprintf(w, "  %-12s +%-8s queued %-6s ran %-8s %s\n", a.typ, dur(a.scheduled.Sub(r.start)),
				dur(a.started.Sub(a.scheduled)), dur(a.closed.Sub(a.started)), a.identity)
		}
		for i, c := range r.trace.snapshot() {
			fmt.Fprintf(w, "  model %d %-8s +%.1f ms → +%.1f ms\n", i+1, c.phase, float64(c.span.start.Sub(r.start).Microseconds())/1000, float64(c.span.end.Sub(r.start).Microseconds())/1000)
		}
		// The first lone run's events: where a gap between model calls goes.
		if r == runs[0] {
			for _, e := range r.hist.timeline {
				fmt.Fprintf(w, "    +%-6.1f %s\n", float64(e.at.Sub(r.start).Microseconds())/1000, strings.TrimPrefix(e.typ.String(), "EVENT_TYPE_"))
			}
		}
	}
	// What an analyst waits for outside the model: the starter's start,
	// each gap between model calls, and its end.
	for _, r := range append(append([]*starterRun{m.starterFirst}, m.starterWarm...), m.starterRestart) {
		if r == nil || r.err != nil {
			continue
		}
		calls := r.trace.snapshot()
		if len(calls) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s: wall %s; start → first model call %s", r.key, dur(r.wall), dur(calls[0].span.start.Sub(r.start)))
		for i := 1; i < len(calls); i++ {
			fmt.Fprintf(w, ", %s", dur(calls[i].span.start.Sub(calls[i-1].span.end)))
		}
		fmt.Fprintf(w, "; last reply → exit %s\n", dur(r.start.Add(r.wall).Sub(calls[len(calls)-1].span.end)))
		// The first run, the first warm one and the restarted worker's
		// first: the history's events and the model calls, in time order,
		// from the process's start.
		if r == m.starterFirst || r == m.starterRestart || len(m.starterWarm) > 0 && r == m.starterWarm[0] {
			writeTimeline(w, r, calls)
		}
	}
}

// writeTimeline prints a starter run's history events among its model
// calls (the server's, the model server's and the bench's clocks are this
// machine's).
func writeTimeline(w io.Writer, r *starterRun, calls []modelCall) {
	type line struct {
		at   time.Time
		what string
	}
	var lines []line
	for _, e := range r.timeline {
		lines = append(lines, line{e.at, strings.TrimPrefix(e.typ.String(), "EVENT_TYPE_")})
	}
	for i, c := range calls {
		lines = append(lines, line{c.span.start, fmt.Sprintf("model call %d (%s) sent", i+1, c.phase)}, line{c.span.end, fmt.Sprintf("model call %d answered", i+1)})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	for _, l := range lines {
		fmt.Fprintf(w, "    +%-7.1f %s\n", float64(l.at.Sub(r.start).Microseconds())/1000, l.what)
	}
}
