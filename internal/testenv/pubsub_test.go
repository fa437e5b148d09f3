package testenv

import (
	"context"
	"net"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/gpubsub"
)

func TestStartPubSubPublishReceiveAndStop(t *testing.T) {
	host, stop, err := StartPubSub(Project)
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	t.Setenv("PUBSUB_EMULATOR_HOST", host)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	clients := &gpubsub.Clients{}
	defer clients.Close()
	topic, sub := "projects/"+Project+"/topics/things", "projects/"+Project+"/subscriptions/things-sub"
	require.NoError(t, clients.EnsureTopic(ctx, topic))
	require.NoError(t, clients.EnsureTopic(ctx, topic), "a second EnsureTopic is harmless")
	require.NoError(t, clients.EnsureSubscription(ctx, sub, topic, 10*time.Second))
	id, err := clients.Publish(ctx, topic, &pubsub.Message{Data: []byte("hello"), Attributes: map[string]string{"k": "v"}})
	require.NoError(t, err)
	client, err := clients.Client(ctx, Project)
	require.NoError(t, err)
	rctx, rcancel := context.WithCancel(ctx)
	var got *pubsub.Message
	err = client.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		got = m
		m.Ack()
		rcancel()
	})
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, id, got.ID)
	assert.Equal(t, "hello", string(got.Data))
	assert.Equal(t, "v", got.Attributes["k"])
	clients.Close()

	_, port, err := net.SplitHostPort(host)
	require.NoError(t, err)
	require.NotEmpty(t, liveProcessesMentioning(t, port), "the emulator's JVM should be found before stop")
	stop()
	stopped = true
	assert.Empty(t, liveProcessesMentioning(t, port), "emulator processes left after stop")
	l, err := net.Listen("tcp", host)
	require.NoError(t, err, "the emulator port should be free after stop")
	require.NoError(t, l.Close())
}
