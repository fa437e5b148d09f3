package delivery

import (
	"context"
	"encoding/json"
	"strconv"

	"cloud.google.com/go/pubsub/v2"

	"github.com/secops-agent/investigator/internal/gpubsub"
)

// Topic publishes results to Pub/Sub topics.
type Topic struct {
	Clients *gpubsub.Clients
}

// Publish publishes the result as JSON to topic ("projects/P/topics/T"),
// with the idempotency key, workflow and alert IDs, verdict and
// confidence as attributes, so a subscriber can filter and drop
// duplicates without reading the data. It returns the message ID.
func (t *Topic) Publish(ctx context.Context, topic string, r Result) (string, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	return t.Clients.Publish(ctx, topic, &pubsub.Message{Data: data, Attributes: map[string]string{
		"idempotency_key": r.Key,
		"workflow_id":     r.WorkflowID,
		"alert_id":        r.AlertID,
		"verdict":         r.Verdict,
		"confidence":      r.Confidence,
		"exchange":        strconv.Itoa(r.Exchange),
	}})
}
