package main

import (
	"os"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/secops-agent/investigator/config"
)

// TestComposeWaitsForTheStopTimeout: docker compose kills the worker 10 s
// after SIGTERM unless stop_grace_period says otherwise; it must cover the
// worker's stop timeout and the queued progress writes (design/deploy.md),
// or a restart kills the model calls in flight, which are paid twice.
func TestComposeWaitsForTheStopTimeout(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Environment     map[string]any `yaml:"environment"`
			StopGracePeriod string         `yaml:"stop_grace_period"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	w, ok := compose.Services["worker"]
	if !ok {
		t.Fatal("docker-compose.yml has no worker service")
	}
	var wc config.Worker
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	wc.Flags(fs)
	stop := fs.Lookup("stop-timeout").DefValue
	if v, ok := w.Environment["WORKER_STOP_TIMEOUT"].(string); ok {
		stop = v
	}
	timeout, err := time.ParseDuration(stop)
	if err != nil {
		t.Fatalf("WORKER_STOP_TIMEOUT %q: %v", stop, err)
	}
	grace := 10 * time.Second // Docker's default
	if w.StopGracePeriod != "" {
		if grace, err = time.ParseDuration(w.StopGracePeriod); err != nil {
			t.Fatalf("stop_grace_period %q: %v", w.StopGracePeriod, err)
		}
	}
	if grace < timeout+15*time.Second {
		t.Errorf("the worker's stop_grace_period is %s, want at least its stop timeout %s and 15 s", grace, timeout)
	}
}
