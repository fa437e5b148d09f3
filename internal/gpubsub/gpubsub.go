// Package gpubsub holds what the intake, the worker and the starter share
// of Google Cloud Pub/Sub: resource names, one client per project
// (PUBSUB_EMULATOR_HOST selects the emulator, as the client library
// reads it, and the emulator's streams get their pings answered),
// publishing with a bounded wait, and typed errors.
package gpubsub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/internal/upstream"
)

// A resource ID is 3 to 255 characters; the length is checked apart from
// the pattern, whose {2,254} repetition would compile to a program large
// enough to cost every binary that links this package milliseconds at start.
var (
	topicRe        = regexp.MustCompile(`^projects/([a-z][a-z0-9-]{4,28}[a-z0-9])/topics/([A-Za-z][A-Za-z0-9._~+%-]+)$`)
	subscriptionRe = regexp.MustCompile(`^projects/([a-z][a-z0-9-]{4,28}[a-z0-9])/subscriptions/([A-Za-z][A-Za-z0-9._~+%-]+)$`)
)

// parseName matches a resource name and returns its project, or "" when it
// does not match or its ID's length is outside 3..255.
func parseName(re *regexp.Regexp, name string) string {
	m := re.FindStringSubmatch(name)
	if m == nil || len(m[2]) < 3 || len(m[2]) > 255 {
		return ""
	}
	return m[1]
}

// ParseTopic checks a topic name, "projects/P/topics/T", and returns its project.
func ParseTopic(name string) (project string, err error) {
	project = parseName(topicRe, name)
	if project == "" {
		return "", fmt.Errorf("%q is not a Pub/Sub topic name of the form projects/PROJECT/topics/TOPIC", name)
	}
	return project, nil
}

// ParseSubscription checks a subscription name,
// "projects/P/subscriptions/S", and returns its project.
func ParseSubscription(name string) (project string, err error) {
	project = parseName(subscriptionRe, name)
	if project == "" {
		return "", fmt.Errorf("%q is not a Pub/Sub subscription name of the form projects/PROJECT/subscriptions/SUBSCRIPTION", name)
	}
	return project, nil
}

// Clients holds one client per project, made on first use.
type Clients struct {
	mu      sync.Mutex
	clients map[string]*pubsub.Client
	pubs    map[string]*pubsub.Publisher
	options []option.ClientOption // tests: more client options
}

// Client returns the project's client.
func (c *Clients) Client(ctx context.Context, project string) (*pubsub.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[project]; ok {
		return cl, nil
	}
	var opts []option.ClientOption
	if os.Getenv("PUBSUB_EMULATOR_HOST") != "" {
		opts = append(opts, option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(answerPings)))
	}
	opts = append(opts, c.options...)
	// The client outlives ctx (a call's context): it is made with its own.
	cl, err := pubsub.NewClient(context.WithoutCancel(ctx), project, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot open Pub/Sub (project %s): %w", project, err)
	}
	if c.clients == nil {
		c.clients, c.pubs = map[string]*pubsub.Client{}, map[string]*pubsub.Publisher{}
	}
	c.clients[project] = cl
	return cl, nil
}

// Publisher returns the publisher of a topic ("projects/P/topics/T").
func (c *Clients) Publisher(ctx context.Context, topic string) (*pubsub.Publisher, error) {
	project, err := ParseTopic(topic)
	if err != nil {
		return nil, err
	}
	cl, err := c.Client(ctx, project)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pubs[topic]; ok {
		return p, nil
	}
	p := cl.Publisher(topic)
	c.pubs[topic] = p
	return p, nil
}

// Publish publishes one message to topic and waits until Pub/Sub stored it
// (or ctx ends), returning its message ID.
func (c *Clients) Publish(ctx context.Context, topic string, msg *pubsub.Message) (string, error) {
	p, err := c.Publisher(ctx, topic)
	if err != nil {
		return "", &upstream.Error{Service: "Pub/Sub", Kind: upstream.BadRequest, Message: err.Error()}
	}
	id, err := p.Publish(ctx, msg).Get(ctx)
	if err != nil {
		return "", Error("publish to "+topic, err)
	}
	return id, nil
}

// Close stops the publishers and closes the clients.
func (c *Clients) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pubs {
		p.Stop()
	}
	for _, cl := range c.clients {
		_ = cl.Close()
	}
	c.clients, c.pubs = nil, nil
}

// Error types a Pub/Sub failure: a missing topic, refused permission or
// bad request is not worth retrying; unavailability, a deadline and
// exhausted quota are.
func Error(what string, err error) error {
	kind := upstream.Unavailable
	switch status.Code(err) {
	case codes.NotFound:
		kind = upstream.NotFound
	case codes.PermissionDenied, codes.Unauthenticated:
		kind = upstream.CredentialsRejected
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		kind = upstream.BadRequest
	case codes.DeadlineExceeded:
		kind = upstream.Timeout
	case codes.ResourceExhausted:
		kind = upstream.RateLimited
	}
	if errors.Is(err, context.DeadlineExceeded) {
		kind = upstream.Timeout
	}
	return &upstream.Error{Service: "Pub/Sub", Kind: kind, Message: fmt.Sprintf("%s: %s (%v)", what, kind, status.Convert(err).Message()), Cause: err}
}

// EnsureTopic creates a topic unless it exists.
func (c *Clients) EnsureTopic(ctx context.Context, topic string) error {
	project, err := ParseTopic(topic)
	if err != nil {
		return err
	}
	cl, err := c.Client(ctx, project)
	if err != nil {
		return err
	}
	if _, err := cl.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil && status.Code(err) != codes.AlreadyExists {
		return Error("create topic "+topic, err)
	}
	return nil
}

// EnsureSubscription creates a pull subscription to topic unless it exists.
func (c *Clients) EnsureSubscription(ctx context.Context, subscription, topic string, ackDeadline time.Duration) error {
	project, err := ParseSubscription(subscription)
	if err != nil {
		return err
	}
	cl, err := c.Client(ctx, project)
	if err != nil {
		return err
	}
	_, err = cl.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: subscription, Topic: topic, AckDeadlineSeconds: int32(ackDeadline / time.Second),
	})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return Error("create subscription "+subscription, err)
	}
	return nil
}

// Drain receives and acknowledges every message of a subscription
// ("projects/P/subscriptions/S") until none came for quiet, and returns
// them (tests, the bench).
func (c *Clients) Drain(ctx context.Context, subscription string, quiet time.Duration) ([]*pubsub.Message, error) {
	project, err := ParseSubscription(subscription)
	if err != nil {
		return nil, err
	}
	cl, err := c.Client(ctx, project)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var got []*pubsub.Message
	last := time.Now()
	go func() {
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			idle := time.Since(last) > quiet
			mu.Unlock()
			if idle {
				cancel()
			}
		}
	}()
	err = cl.Subscriber(subscription).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		mu.Lock()
		got, last = append(got, m), time.Now()
		mu.Unlock()
		m.Ack()
	})
	if err != nil && ctx.Err() == nil {
		return got, Error("receive from "+subscription, err)
	}
	return got, nil
}
