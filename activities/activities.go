// Package activities holds the Investigation workflow's activities: every
// model call and every tool call. Prompts are filled here, from templates
// embedded next to this code, so changing a prompt never breaks replay.
package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/tools"
)

// ErrMalformedOutput is the error type of a model answer that could not be
// used even after one corrective retry within the activity.
const ErrMalformedOutput = "MalformedModelOutput"

// ErrAlertNotFound is the error type when the investigated alert is not stored.
const ErrAlertNotFound = "AlertNotFound"

type alertReader = AlertReader

// AlertReader reads a stored alert by ID (the alert store or its cache).
type AlertReader interface {
	Get(ctx context.Context, id string) (alerts.Alert, error)
}

// Activities are the investigation's activities; the worker registers one
// value of it.
type Activities struct {
	Model *Model
	// Endpoint names the model and where it is served, for the catalog.
	Endpoint investigation.ModelEndpoint
	// Tools are the investigation's tools; Toolsets are other agents'
	// (the BigQuery sub-agent's), which CallTool runs by name.
	Tools    *tools.Registry
	Toolsets map[string]*tools.Registry
	Alerts   alertReader
	// Progress keeps progress events and the status beside the transcript
	// (nil: not at all).
	Progress ProgressStore
	// MCP are the worker's MCP servers (nil without --mcp-config): their
	// tools are in Tools, their state is for the catalog.
	MCP MCPServers
	// Store names the worker's Firestore database, for the catalog.
	Store *investigation.StoreEndpoint
}

// MCPServers is what the activities need of the worker's MCP servers.
type MCPServers interface {
	Statuses() []investigation.MCPServer
	Configured(name string) bool
}

// Logger returns the activity's logger (with the workflow and activity IDs
// Temporal adds), or slog's default outside an activity (unit tests).
func Logger(ctx context.Context) log.Logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return log.NewStructuredLogger(slog.Default())
}

// loadAlert reads the investigated alert; a missing alert cannot be fixed by
// retrying.
func (a *Activities) loadAlert(ctx context.Context, id string) (alerts.Alert, error) {
	al, err := a.Alerts.Get(ctx, id)
	if errors.Is(err, alerts.ErrNotFound) {
		return al, temporal.NewNonRetryableApplicationError(fmt.Sprintf("alert %q is not in the alert store; import it first", id), ErrAlertNotFound, err)
	}
	if err != nil {
		return al, fmt.Errorf("load alert %s: %w", id, err)
	}
	return al, nil
}
