package tools

import (
	"context"
	"sync/atomic"
)

// CallInfo describes the call a tool is running, for tools whose side effects
// must survive a retry or count against a budget. The activity that runs the
// tool puts it in the context; a tool run outside an activity sees the zero
// value (no ID, no budget).
type CallInfo struct {
	// ID is unique per call of an investigation and the same on every retry
	// of it (the workflow ID and the call's transcript key), so a tool can
	// derive idempotent IDs from it (a BigQuery job ID).
	ID string
	// Session is the workflow the call belongs to (the investigation or
	// the BigQuery sub-agent), so that a tool can bind what it hands out
	// to it (a bigquery_result handle).
	Session string
	// ScanBytesLeft is how many bytes the investigation may still scan in
	// BigQuery: 0 means no limit, a negative value that none is left.
	ScanBytesLeft int64
	// MaxResultBytes is the size above which the activity cuts the call's
	// result (as compact JSON); 0 means the default. A tool that pages,
	// such as get_alert, keeps each page within it.
	MaxResultBytes int
	// scanned accumulates the bytes this call scanned (see AddScanned).
	scanned *atomic.Int64
}

type callKey struct{}

// WithCallInfo returns a context that carries c for the tool it runs.
func WithCallInfo(ctx context.Context, c CallInfo) context.Context {
	if c.scanned == nil {
		c.scanned = new(atomic.Int64)
	}
	return context.WithValue(ctx, callKey{}, c)
}

// CallInfoFrom returns the call the context carries, or the zero CallInfo.
func CallInfoFrom(ctx context.Context) CallInfo {
	c, _ := ctx.Value(callKey{}).(CallInfo)
	return c
}

// AddScanned records bytes the call scanned (billed) in BigQuery.
func (c CallInfo) AddScanned(n int64) {
	if c.scanned != nil {
		c.scanned.Add(n)
	}
}

// Scanned returns the bytes recorded with AddScanned.
func (c CallInfo) Scanned() int64 {
	if c.scanned == nil {
		return 0
	}
	return c.scanned.Load()
}
