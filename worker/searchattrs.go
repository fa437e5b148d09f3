package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/config"
)

// searchAttributeTimeout bounds the registration at start-up, so that a slow
// or refusing server never holds the worker back.
const searchAttributeTimeout = 5 * time.Second

// searchAttributesFlag registers --register-search-attributes, on unless
// the flag or REGISTER_SEARCH_ATTRIBUTES says false.
func searchAttributesFlag(fs *pflag.FlagSet, p *bool) {
	config.EnvBoolVar(fs, p, "register-search-attributes", true,
		"register the AlertId and Verdict search attributes on the namespace at start-up where the server allows it (env REGISTER_SEARCH_ATTRIBUTES)", "REGISTER_SEARCH_ATTRIBUTES")
}

// registerSearchAttributes registers the investigation's search attributes
// the namespace lacks. Where it cannot (Temporal Cloud refuses it through the
// API) it logs one warning and the worker goes on: investigations then run
// without them.
func registerSearchAttributes(ctx context.Context, c client.Client, namespace string, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, searchAttributeTimeout)
	defer cancel()
	added, err := agentclient.RegisterSearchAttributes(ctx, c.OperatorService(), namespace)
	if len(added) > 0 {
		logger.Info("registered search attributes", "namespace", namespace, "added", added)
	}
	var sae *agentclient.SearchAttributeError
	if errors.As(err, &sae) {
		logger.Warn("search attributes not registered; investigations run without them",
			"namespace", namespace, "missing", sae.Missing, "reason", sae.Reason,
			"register_with", "temporal operator search-attribute create --name NAME --type Keyword (Temporal Cloud: tcld namespace search-attributes add)")
	}
}
