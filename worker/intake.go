package main

import (
	"net/http"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/activities"
	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/delivery"
	"github.com/secops-agent/investigator/internal/gpubsub"
	"github.com/secops-agent/investigator/internal/redact"
)

// intakeActivities builds the intake's activities (design/intake.md): the
// admission workflow's starts and checks through the worker's own
// Temporal client, and the verdicts' deliveries: Slack through
// SLACK_WEBHOOK_URL (read here only, never put in history), the results
// topics through Pub/Sub (PUBSUB_EMULATOR_HOST for the emulator). Every
// secret the worker holds is removed from what is delivered. The returned
// function closes the Pub/Sub clients.
func intakeActivities(c client.Client, tc config.Temporal, al activities.AlertReader) (*activities.Intake, func(), error) {
	ac, err := agentclient.New(c, agentclient.Options{Temporal: tc, CallTimeout: 30 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	clients := &gpubsub.Clients{}
	in := &activities.Intake{
		Temporal: ac,
		Topic:    &delivery.Topic{Clients: clients},
		Alerts:   al,
		WebURL:   tc.WorkflowURL,
		Secrets:  redact.New(workerSecrets(tc)...),
	}
	if url := config.Env("", "SLACK_WEBHOOK_URL"); url != "" {
		in.Slack = &delivery.Slack{URL: url, HTTP: &http.Client{Timeout: 30 * time.Second}}
	}
	return in, clients.Close, nil
}

// workerSecrets are the secrets a delivered message must never hold: the
// API keys of the environment, the Slack webhook URL and the payload keys.
func workerSecrets(tc config.Temporal) []string {
	var secrets []string
	for _, name := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "OTX_API_KEY", "URLSCAN_API_KEY", "VIRUSTOTAL_API_KEY",
		"ABUSEIPDB_API_KEY", "TEMPORAL_API_KEY", "SLACK_WEBHOOK_URL"} {
		if v := config.Env("", name); v != "" {
			secrets = append(secrets, v)
		}
	}
	if tc.PayloadKeyFile != "" {
		if raw, err := os.ReadFile(tc.PayloadKeyFile); err == nil {
			for line := range strings.SplitSeq(string(raw), "\n") {
				if _, key, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && key != "" {
					secrets = append(secrets, key)
				}
			}
		}
	}
	return secrets
}
