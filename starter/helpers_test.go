package main

import (
	"context"
	"testing"
	"time"

	"github.com/secops-agent/investigator/investigation"
)

// testApp is an app whose Temporal settings are the defaults.
func testApp() *app {
	a := &app{}
	a.temporal.TaskQueue = investigation.DefaultQueue
	a.temporal.Namespace = "default"
	a.temporal.UIURL = "http://localhost:8233"
	return a
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
