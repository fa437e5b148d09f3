package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/telemetry"
)

// serviceAnnotation is the annotation of a command that runs as a service
// of its own for OpenTelemetry (the intake: "investigator-intake"); every
// other command is "investigator-starter". OTEL_SERVICE_NAME wins over both.
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
	service := "investigator-starter"
	for c := cmd; c != nil; c = c.Parent() {
		if s := c.Annotations[serviceAnnotation]; s != "" {
			service = s
			break
		}
	}
	tel, err := telemetry.Start(cmd.Context(), service, a.logger())
	if err != nil {
		return err
	}
	a.tel = tel
	ctx, end := tel.Command(cmd.Context(), cmd.CommandPath())
	cmd.SetContext(ctx)
	a.endCommand = end
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
