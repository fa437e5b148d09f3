package main

import (
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/secops-agent/investigator/config"
)

// TestStopReachesActivitiesWithinFiveSeconds: every worker of the binary
// sends heartbeats as often as activities record them and heartbeats every
// activity, so a stop or a cancel reaches a running activity within 5 s;
// the SDK's own throttle would wait up to 0.8 x the 30 s heartbeat timeout.
func TestStopReachesActivitiesWithinFiveSeconds(t *testing.T) {
	wc := config.Worker{StopTimeout: time.Minute, MaxConcurrentActivities: 10}
	for name, o := range map[string]worker.Options{
		"investigation": investigationWorkerOptions(wc, "fp"),
		"provider":      providerWorkerOptions(wc, "fp", 4.0/60),
		"admission":     admissionWorkerOptions(wc, "fp"),
	} {
		if o.MaxHeartbeatThrottleInterval <= 0 || o.MaxHeartbeatThrottleInterval > 5*time.Second ||
			o.DefaultHeartbeatThrottleInterval <= 0 || o.DefaultHeartbeatThrottleInterval > 5*time.Second {
			t.Errorf("%s worker: heartbeats throttled to %s (default %s), want at most 5s", name, o.MaxHeartbeatThrottleInterval, o.DefaultHeartbeatThrottleInterval)
		}
		if len(o.Interceptors) == 0 {
			t.Errorf("%s worker: no heartbeat interceptor", name)
		}
	}
	if o := providerWorkerOptions(wc, "fp", 0.5); o.TaskQueueActivitiesPerSecond != 0.5 {
		t.Errorf("provider rate %v, want 0.5", o.TaskQueueActivitiesPerSecond)
	}
}

// TestDeploymentVersionIsLogged: the start-up log names the version the
// worker serves, or says it serves none.
func TestDeploymentVersionIsLogged(t *testing.T) {
	if got := deploymentVersion(config.Worker{DeploymentName: "investigator", BuildID: "b2"}); got != "investigator:b2" {
		t.Errorf("deployment version %q, want investigator:b2", got)
	}
	if got := deploymentVersion(config.Worker{}); got != "unversioned" {
		t.Errorf("deployment version %q, want unversioned", got)
	}
}
