package gpubsub

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/internal/testenv"
)

// fakeStream is a streaming pull whose server sends what the test puts
// into in, and records what the client sent.
type fakeStream struct {
	grpc.ClientStream
	in   chan *pubsubpb.StreamingPullResponse
	sent []*pubsubpb.StreamingPullRequest
}

func (f *fakeStream) SendMsg(m any) error {
	f.sent = append(f.sent, m.(*pubsubpb.StreamingPullRequest))
	return nil
}

func (f *fakeStream) RecvMsg(m any) error {
	r, ok := <-f.in
	if !ok {
		return errors.New("stream ended")
	}
	m.(*pubsubpb.StreamingPullResponse).ReceivedMessages = r.ReceivedMessages
	return nil
}

// recvWithin calls RecvMsg and fails the test when it has not returned in d.
func recvWithin(t *testing.T, s grpc.ClientStream, d time.Duration) (*pubsubpb.StreamingPullResponse, error) {
	t.Helper()
	type result struct {
		r   *pubsubpb.StreamingPullResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		r := new(pubsubpb.StreamingPullResponse)
		err := s.RecvMsg(r)
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		return res.r, res.err
	case <-time.After(d):
		t.Fatalf("RecvMsg did not return within %s", d)
		return nil, nil
	}
}

func TestAnswerPingsAnswersPingsOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	fake := &fakeStream{in: make(chan *pubsubpb.StreamingPullResponse)}
	s := newPingAnswerer(ctx, fake)

	// The opening request and an acknowledgement are no pings: nothing
	// answers them, and what the emulator sends comes through whole.
	require.NoError(t, s.SendMsg(&pubsubpb.StreamingPullRequest{Subscription: "projects/p/subscriptions/s", StreamAckDeadlineSeconds: 20}))
	require.NoError(t, s.SendMsg(&pubsubpb.StreamingPullRequest{AckIds: []string{"a1"}}))
	require.NoError(t, s.SendMsg(&pubsubpb.StreamingPullRequest{ModifyDeadlineAckIds: []string{"a2"}, ModifyDeadlineSeconds: []int32{10}}))
	go func() {
		time.Sleep(3 * pongDelay) // after any (wrong) answer would have come
		fake.in <- &pubsubpb.StreamingPullResponse{ReceivedMessages: []*pubsubpb.ReceivedMessage{{AckId: "m1"}}}
	}()
	r, err := recvWithin(t, s, 5*time.Second)
	require.NoError(t, err)
	require.Len(t, r.ReceivedMessages, 1, "the emulator's response, not an answer to a non-ping")
	require.Equal(t, "m1", r.ReceivedMessages[0].AckId)
	require.Len(t, fake.sent, 3, "every request reaches the emulator")

	// A ping, with or without a new stream ack deadline, gets one empty
	// response; two pings before a read get one (as a late server's would).
	require.NoError(t, s.SendMsg(&pubsubpb.StreamingPullRequest{}))
	r, err = recvWithin(t, s, 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, r.ReceivedMessages)
	require.NoError(t, s.SendMsg(&pubsubpb.StreamingPullRequest{StreamAckDeadlineSeconds: 30}))
	r, err = recvWithin(t, s, 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, r.ReceivedMessages)
	require.Len(t, fake.sent, 5, "pings reach the emulator too")

	// The stream's end reaches the reader as it came.
	close(fake.in)
	_, err = recvWithin(t, s, 5*time.Second)
	require.EqualError(t, err, "stream ended")
}

// An idle subscriber on the emulator keeps its one stream, and a message
// published after the idle time arrives. Without answerPings the
// client reopens the stream within 50 s (a ping at 30 s, unanswered for
// 15 s, checked every 10 s).
func TestEmulatorIdleSubscriberKeepsItsStream(t *testing.T) {
	testenv.PubSub(t, testenv.Project)
	var opens atomic.Int32
	count := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if method == streamingPullMethod {
			opens.Add(1)
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	c := &Clients{options: []option.ClientOption{option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(count))}}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	topic, sub := "projects/"+testenv.Project+"/topics/idle", "projects/"+testenv.Project+"/subscriptions/idle-sub"
	require.NoError(t, c.EnsureTopic(ctx, topic))
	require.NoError(t, c.EnsureSubscription(ctx, sub, topic, 10*time.Second))
	cl, err := c.Client(ctx, testenv.Project)
	require.NoError(t, err)

	got := make(chan struct{}, 1)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go func() {
		_ = cl.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			select {
			case got <- struct{}{}:
			default:
			}
		})
	}()
	time.Sleep(65 * time.Second)
	require.Equal(t, int32(1), opens.Load(), "streaming pulls opened while idle")

	_, err = c.Publish(ctx, topic, &pubsub.Message{Data: []byte("after the idle time")})
	require.NoError(t, err)
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the message published after the idle time did not arrive within 30 s")
	}
}

// The client cancels a stream's context when it opens another: a read
// waiting on the old stream ends with gRPC's Canceled, which the client
// retries on the new one, and never waits for ever.
func TestAnswerPingsCancelledStreamEndsTheRead(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	fake := &fakeStream{in: make(chan *pubsubpb.StreamingPullResponse)} // the emulator sends nothing
	s := newPingAnswerer(ctx, fake)
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := recvWithin(t, s, 5*time.Second)
	require.Equal(t, codes.Canceled, status.Code(err), "%v", err)
}
