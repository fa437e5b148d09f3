package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/config"
)

// firestoreCall runs one Firestore call under the call timeout (flag
// --call-timeout): with the service down or unreachable (the Firestore
// client otherwise waits for a connection forever) a command ends with one
// sentence instead of hanging. Temporal calls are bounded in agentclient.
func (a *app) firestoreCall(ctx context.Context, call func(context.Context) error) error {
	return agentclient.Bounded(ctx, a.timeout(), "Firestore", a.firestoreUnreachable, call)
}

// firestoreUnreachable is the sentence for a Firestore that did not answer
// within the call timeout, naming the emulator or the project.
func (a *app) firestoreUnreachable() string {
	if host := os.Getenv("FIRESTORE_EMULATOR_HOST"); host != "" {
		return fmt.Sprintf("Firestore at %s did not answer within %s; is the emulator running?", host, a.timeout())
	}
	project := a.firestore.Project
	if project == "" {
		project = config.EmulatorProject
	}
	return fmt.Sprintf("Firestore (project %s, database %s) did not answer within %s; check the network and the Google Cloud credentials", project, a.firestore.Database, a.timeout())
}

// timeout is the call timeout; zero (an app built without flags) means the
// default.
func (a *app) timeout() time.Duration {
	if a.callTimeout <= 0 {
		return agentclient.DefaultCallTimeout
	}
	return a.callTimeout
}
