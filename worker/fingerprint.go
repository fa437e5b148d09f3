package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// settings are what every worker of one task queue must agree on: a plan
// made on one worker names tools whose calls may run on another, and a
// payload one encrypts another must decrypt. No secret is in it: keys are
// named by their IDs and check values (payloadcodec.Keys.CheckValues), so a
// key regenerated under the same ID is another configuration.
type settings struct {
	Tools []toolcall.Tool `json:"tools"`
	// Declarations are the tools' JSON declarations, by name.
	Declarations map[string]json.RawMessage `json:"declarations"`
	Statuses     []investigation.ToolStatus `json:"statuses"`
	// Toolsets are the sub-agents' tools (the BigQuery tables among them).
	Toolsets       map[string]any     `json:"toolsets,omitempty"`
	Model          string             `json:"model"`
	EmbeddingModel string             `json:"embedding_model,omitempty"`
	PayloadKeys    []string           `json:"payload_keys,omitempty"` // ID:CHECK, in file order
	IntelRates     map[string]float64 `json:"intel_rates,omitempty"`
	// Slack says the worker delivers verdicts to Slack (SLACK_WEBHOOK_URL).
	Slack bool `json:"slack,omitempty"`
	// MCP are the configured MCP servers (names, transports, allow lists).
	MCP map[string]any `json:"mcp,omitempty"`
}

// fingerprint is 12 hex digits of the settings' SHA-256.
func (s settings) fingerprint() string {
	raw, err := json.Marshal(s) // maps marshal in key order
	if err != nil {
		panic(fmt.Sprintf("encode worker settings: %v", err)) // plain data: cannot fail
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:6])
}

// identityMark ends a worker's identity with its settings' fingerprint, so
// every poller of the queue shows which settings it runs.
const identityMark = "@settings:"

// identity is the SDK's default identity (pid@host) with the fingerprint.
func identity(fp string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s%s%s", os.Getpid(), host, identityMark, fp)
}

// pollerWindow is how recently a poller must have polled to count as
// running: a worker polls again as soon as a long poll (about a minute)
// ends, so one silent for longer has stopped.
const pollerWindow = 90 * time.Second

// stoppedHere reports whether a poller identity (pid@host) names a process
// of this host that no longer runs: a worker restarted with new settings
// finds its predecessor in the queue's poller list for minutes.
func stoppedHere(who string) bool {
	pid, host, ok := strings.Cut(who, "@")
	me, _ := os.Hostname()
	n, err := strconv.Atoi(pid)
	if !ok || host != me || err != nil || n <= 0 {
		return false
	}
	return syscall.Kill(n, 0) == syscall.ESRCH
}

// queueDescriber is the part of the Temporal client checkPeers needs.
type queueDescriber interface {
	DescribeTaskQueue(ctx context.Context, taskQueue string, taskQueueType enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error)
}

var _ queueDescriber = client.Client(nil)

// checkPeers refuses to start beside a running worker of the same queue and
// build whose settings differ: its calls would fail on this one's tools, or
// the other way round, with errors that name neither. A worker of another
// build (Worker Deployment Versioning) may differ: it serves other runs.
func checkPeers(ctx context.Context, c queueDescriber, queue, buildID, fp string, now time.Time) error {
	for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := c.DescribeTaskQueue(ctx, queue, kind)
		if err != nil {
			return fmt.Errorf("describe task queue %s: %w", queue, err)
		}
		for _, p := range resp.GetPollers() {
			who, theirs, ok := strings.Cut(p.GetIdentity(), identityMark)
			if !ok || theirs == fp || now.Sub(p.GetLastAccessTime().AsTime()) > pollerWindow ||
				p.GetDeploymentOptions().GetBuildId() != buildID || stoppedHere(who) {
				continue
			}
			return fmt.Errorf("worker %s on task queue %s runs other settings (%s, this one %s: tools, models, BigQuery tables, "+
				"payload keys or intel rate limits differ); give every worker of a queue the same settings, or deploy the change "+
				"as a new build (--build-id), or start with --allow-mixed-settings", p.GetIdentity(), queue, theirs, fp)
		}
	}
	return nil
}
