package source

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/gpubsub"
)

// Pub/Sub's limits on a message: an attribute value's bytes, a publish
// request's bytes (pubsub.MaxPublishRequestBytes).
const (
	maxAttributeBytes = 1024
	maxPublishBytes   = 1e7
)

// A dead-letter copy keeps the first maxDeadLetterData bytes of a message
// (the rest of a publish request's 10 MB is left for its attributes), and
// folds the original attributes into one, each key and value clipped.
const (
	maxDeadLetterData = maxPublishBytes - 1<<20
	maxFoldedKey      = 64
	maxFoldedValue    = 256
)

// budgetWait bounds how long a message waits for room in the decoded
// bytes budget before it is nacked.
const budgetWait = 10 * time.Second

// maxLeaseExtension bounds each extension of a message's ack deadline.
const maxLeaseExtension = 20 * time.Second

// PubSub takes alerts from a subscription, with flow control: at most
// MaxOutstanding messages are held at once, so a burst waits in Pub/Sub,
// not in memory.
type PubSub struct {
	Subscription string
	// DeadLetterTopic receives malformed and oversized messages with the
	// reason as the "reason" attribute; without one they are not
	// acknowledged (a dead-letter policy of the subscription may take them).
	DeadLetterTopic string
	Clients         *gpubsub.Clients
	Pipeline        *Pipeline
	MaxOutstanding  int
	// MaxDecodedInFlight bounds the decoded bytes of the alerts held
	// (DefaultDecodedInFlight when 0). The client's MaxOutstandingBytes
	// counts message bytes, and a 1 MiB alert may decode to 8 MiB, so it
	// cannot be this bound without starving ordinary alerts. A message
	// waits at most budgetWait for room, then is nacked: it never holds
	// its lease for ever.
	MaxDecodedInFlight int64
	Log                *slog.Logger
	budgetOnce         sync.Once
	budget             *budget
	// Backoff is how long a message waits before it is nacked after a
	// failure (Firestore or Temporal unreachable), so a failing service is
	// not hammered with redeliveries; it doubles up to a minute while
	// failures go on.
	Backoff time.Duration
	failing failStreak
	// publish stands in for Clients.Publish in tests.
	publish func(ctx context.Context, topic string, msg *pubsub.Message) (string, error)
}

// Run receives until ctx ends. Every message is acknowledged only once
// its alert is stored and its outcome recorded, or once it is in the
// dead-letter topic; anything else is nacked and comes back.
func (s *PubSub) Run(ctx context.Context) error {
	project, err := gpubsub.ParseSubscription(s.Subscription)
	if err != nil {
		return err
	}
	client, err := s.Clients.Client(ctx, project)
	if err != nil {
		return err
	}
	sub := client.Subscriber(s.Subscription)
	sub.ReceiveSettings.MaxOutstandingMessages = max(s.MaxOutstanding, 1)
	sub.ReceiveSettings.MaxOutstandingBytes = max(s.MaxOutstanding, 1) * (2 << 20)
	// Leases are extended 20 s at a time (the client's default follows its
	// ack latency, up to 10 minutes): the messages of an intake that died
	// come back to another within 20 s, not minutes.
	sub.ReceiveSettings.MaxDurationPerAckExtension = maxLeaseExtension
	// On a stop, messages still held are nacked (they come back to another
	// intake at once), and the stop never waits longer than 10 s for
	// Pub/Sub, even one that is gone.
	sub.ReceiveSettings.ShutdownOptions = &pubsub.ShutdownOptions{Timeout: 10 * time.Second, Behavior: pubsub.ShutdownBehaviorNackImmediately}
	err = sub.Receive(ctx, func(ctx context.Context, m *pubsub.Message) { s.handle(ctx, m) })
	if err != nil && ctx.Err() == nil {
		return gpubsub.Error("receive from "+s.Subscription, err)
	}
	return nil
}

func (s *PubSub) handle(ctx context.Context, m *pubsub.Message) {
	s.budgetOnce.Do(func() { s.budget = newBudget(s.MaxDecodedInFlight) })
	res := s.Pipeline.take(ctx, m.Data, func(weight int) (func(), error) {
		return s.budget.acquire(ctx, weight, budgetWait)
	})
	log := s.Log.With("message_id", m.ID)
	switch {
	case res.Busy != nil:
		// It waited budgetWait already: it goes back to Pub/Sub at once.
		log.Info("too many alert bytes in flight; message comes back later")
		m.Nack()
	case res.Invalid != nil:
		if s.DeadLetterTopic == "" {
			// It comes back at once, for ever: a pause of one Backoff keeps
			// that from being a tight loop of Warn logs. Not the failure
			// streak's growing pause: malformed messages say nothing about
			// the services, and each holds a flow-control slot while it
			// waits, so a minute each would starve the valid alerts.
			log.Warn("malformed message not acknowledged: no --dead-letter-topic", "reason", res.Invalid)
			sleep(ctx, cmp.Or(s.Backoff, time.Second))
			m.Nack()
			return
		}
		if err := s.deadLetter(ctx, m, res.Invalid.Error()); err != nil {
			log.Warn("could not dead-letter a malformed message; it comes back", "reason", res.Invalid, "error", err)
			s.pause(ctx)
			m.Nack()
			return
		}
		log.Info("malformed message dead-lettered", "reason", res.Invalid, "topic", s.DeadLetterTopic)
		m.Ack()
	case res.Retry != nil:
		log.Warn("message not acknowledged; it comes back", "error", res.Retry)
		s.pause(ctx)
		m.Nack()
	case res.RetryAfter > 0:
		log.Info("waiting room full; message comes back later", "alert_id", res.Alert.ID)
		sleep(ctx, min(res.RetryAfter, 10*time.Second))
		m.Nack()
	default:
		s.failing.reset()
		log.Info("alert taken", "alert_id", res.Alert.ID, "envelopes", res.Envelopes, "identity", res.Identity.Key, "outcome", res.Outcome.Kind, "workflow_id", res.Outcome.WorkflowID)
		m.Ack()
	}
}

// deadLetter publishes a message to the dead-letter topic (deadLetterCopy).
func (s *PubSub) deadLetter(ctx context.Context, m *pubsub.Message, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	publish := s.publish
	if publish == nil {
		publish = s.Clients.Publish
	}
	_, err := publish(ctx, s.DeadLetterTopic, deadLetterCopy(m, s.Subscription, reason))
	return err
}

// deadLetterCopy is a message as it came, with the reason it was refused
// and where it came from, always within Pub/Sub's limits: a copy Pub/Sub
// refuses would have the message nacked and back for ever. So the original
// attributes (up to 100, of 256-byte keys, and Pub/Sub's own "googclient_"
// ones, which no publisher may send) are folded into one, "attributes": a JSON
// object of the first that fit, each clipped, with "attributes_left_out"
// counting the rest; data past maxDeadLetterData is cut ("data_bytes" is
// its length).
func deadLetterCopy(m *pubsub.Message, subscription, reason string) *pubsub.Message {
	attrs := map[string]string{
		"reason":       clip.String(reason, maxAttributeBytes),
		"subscription": clip.String(subscription, maxAttributeBytes),
		"message_id":   clip.String(m.ID, maxAttributeBytes),
	}
	if m.DeliveryAttempt != nil {
		attrs["delivery_attempt"] = strconv.Itoa(*m.DeliveryAttempt)
	}
	if !m.PublishTime.IsZero() {
		attrs["publish_time"] = m.PublishTime.UTC().Format(time.RFC3339Nano)
	}
	if len(m.Attributes) > 0 {
		folded, left := foldAttributes(m.Attributes)
		attrs["attributes"] = folded
		if left > 0 {
			attrs["attributes_left_out"] = strconv.Itoa(left)
		}
	}
	data := m.Data
	if len(data) > maxDeadLetterData {
		data = data[:maxDeadLetterData]
		attrs["data_bytes"] = strconv.Itoa(len(m.Data))
	}
	return &pubsub.Message{Data: data, Attributes: attrs}
}

// foldAttributes writes attributes as one JSON object of at most
// maxAttributeBytes: in key order, each key and value clipped, those that
// no longer fit left out and counted.
func foldAttributes(attrs map[string]string) (string, int) {
	var b strings.Builder
	b.WriteByte('{')
	left := 0
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		key, _ := json.Marshal(clip.String(k, maxFoldedKey))
		value, _ := json.Marshal(clip.String(attrs[k], maxFoldedValue))
		sep := ","
		if b.Len() == 1 {
			sep = ""
		}
		if b.Len()+len(sep)+len(key)+1+len(value)+1 > maxAttributeBytes {
			left++
			continue
		}
		b.WriteString(sep)
		b.Write(key)
		b.WriteByte(':')
		b.Write(value)
	}
	b.WriteByte('}')
	return b.String(), left
}

// pause waits before a nack, longer while failures go on.
func (s *PubSub) pause(ctx context.Context) {
	sleep(ctx, s.failing.next(s.Backoff))
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
