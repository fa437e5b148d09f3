package main

import (
	"cmp"
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/telemetry"
)

// serviceAnnotation is the annotation of a long-running command that is a
// service of its own for OpenTelemetry (the intake: "investigator-intake"):
// it gets no root span (a span as long as the process says nothing) and
// starts a span per unit of work with Telemetry.Span. Every other command is
// "investigator-starter", under a root span named after it. OTEL_SERVICE_NAME
// wins over both.
const serviceAnnotation = "otel.service"

// flushTimeout bounds how long the starter waits at exit to export what it
// buffered.
const flushTimeout = 5 * time.Second

// startTelemetry sets up export when OTEL_EXPORTER_OTLP_ENDPOINT asks for
// it, and starts the command's root span ("starter investigate"): the
// trace of the workflows the command starts hangs under it.
func (a *app) startTelemetry(cmd *cobra.Command) error {
	if a.tel != nil || !telemetry.Enabled() {
		return nil
	}
	// The command's own annotation only: `starter intake status` is a
	// command like any other.
	service := cmd.Annotations[serviceAnnotation]
	tel, err := telemetry.Start(cmd.Context(), cmp.Or(service, "investigator-starter"), a.logger())
	if err != nil {
		return err
	}
	a.tel, a.endCommand = tel, func(bool) {}
	if service == "" {
		ctx, end := tel.Span(cmd.Context(), cmd.CommandPath())
		cmd.SetContext(ctx)
		a.endCommand = end
	}
	return nil
}

// endTelemetry ends the command's span and exports what is buffered.
func (a *app) endTelemetry(failed bool) {
	if a.tel == nil {
		return
	}
	a.endCommand(failed)
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := a.tel.Shutdown(ctx); err != nil {
		a.logger().Warn("OpenTelemetry: not everything was exported before exiting", "error", err)
	}
}
