package main

import (
	"slices"
	"time"
)

// interval is a span of wall-clock time.
type interval struct{ start, end time.Time }

// union returns the total time covered by at least one interval.
func union(ivs []interval) time.Duration {
	ivs = sortedIntervals(ivs)
	var total time.Duration
	var cur interval
	for i, iv := range ivs {
		switch {
		case i == 0:
			cur = iv
		case iv.start.After(cur.end):
			total += cur.end.Sub(cur.start)
			cur = iv
		case iv.end.After(cur.end):
			cur.end = iv.end
		}
	}
	if len(ivs) > 0 {
		total += cur.end.Sub(cur.start)
	}
	return total
}

// maxOverlap returns the largest number of intervals in progress at one
// instant (touching ends do not overlap).
func maxOverlap(ivs []interval) int {
	type edge struct {
		at    time.Time
		delta int
	}
	edges := make([]edge, 0, 2*len(ivs))
	for _, iv := range ivs {
		edges = append(edges, edge{iv.start, 1}, edge{iv.end, -1})
	}
	// Ends before starts at the same instant.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	best, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		best = max(best, cur)
	}
	return best
}

func sortedIntervals(ivs []interval) []interval {
	out := make([]interval, 0, len(ivs))
	for _, iv := range ivs {
		if !iv.end.Before(iv.start) && !iv.start.IsZero() {
			out = append(out, iv)
		}
	}
	slices.SortFunc(out, func(a, b interval) int { return a.start.Compare(b.start) })
	return out
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of ds,
// and false when ds is empty.
func percentile(ds []time.Duration, p float64) (time.Duration, bool) {
	if len(ds) == 0 {
		return 0, false
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)], true
}

// median is the 50th percentile.
func median(ds []time.Duration) (time.Duration, bool) { return percentile(ds, 50) }
