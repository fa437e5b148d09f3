package main

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/telemetry"
)

// flushTimeout bounds how long a stopping worker waits to export what it
// buffered.
const flushTimeout = 10 * time.Second

// flush exports what is buffered before the worker exits.
func flush(tel *telemetry.Telemetry, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		logger.Warn("OpenTelemetry: not everything was exported before stopping", "error", err)
	}
}

// priceTable is the table the exported cost estimate uses: the file's, or
// the shipped one.
func priceTable(file string) (pricing.Table, error) {
	if file == "" {
		return pricing.Default(), nil
	}
	return pricing.Load(file)
}

// provider names the model's provider as the GenAI conventions do.
func provider(e investigation.ModelEndpoint) string {
	if strings.HasPrefix(e.Backend, "vertex-ai") {
		return telemetry.ProviderVertexAI
	}
	return telemetry.ProviderGemini
}

// host is the host of a base URL ("" when it has none).
func host(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
