package gpubsub

import (
	"context"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The client (v2.5+) pings a streaming pull every 30 s and reopens the
// stream when the server does not answer within 15 s. Pub/Sub does; the
// emulator answers only from 0.8.32 (gcloud 568). Against an older one an
// idle subscriber's stream is torn down and reopened every 10–30 s, and
// messages the emulator hands to a stream being torn down stay leased to
// no one: measured here (emulator 0.8.20), a killed subscriber's messages
// reached the other one after 10 s to 4 minutes instead of one ack
// deadline (googleapis/google-cloud-go#14358). With PUBSUB_EMULATOR_HOST
// set, answerPings answers each ping on the emulator's behalf.
const (
	streamingPullMethod = "/google.pubsub.v1.Subscriber/StreamingPull"
	// pongDelay keeps the answer after the client's record of its ping,
	// which it writes once the send returned: an answer recorded first
	// would read as no answer.
	pongDelay = 100 * time.Millisecond
)

// answerPings is a stream interceptor that gives each streaming pull an
// empty response for every ping it sends, as Pub/Sub does.
func answerPings(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != streamingPullMethod {
		return s, err
	}
	return newPingAnswerer(ctx, s), nil
}

// pingAnswerer receives from the real stream in one goroutine, so that
// RecvMsg can return either what the emulator sent or an answer to a ping.
type pingAnswerer struct {
	grpc.ClientStream
	ctx   context.Context
	pongs chan struct{}
	recv  chan received
	once  sync.Once
}

type received struct {
	msg *pubsubpb.StreamingPullResponse
	err error
}

func newPingAnswerer(ctx context.Context, s grpc.ClientStream) *pingAnswerer {
	return &pingAnswerer{ClientStream: s, ctx: ctx, pongs: make(chan struct{}, 1), recv: make(chan received)}
}

// isPing: a ping is a request with nothing in it but, at times, a new
// stream ack deadline.
func isPing(r *pubsubpb.StreamingPullRequest) bool {
	return r.Subscription == "" && len(r.AckIds) == 0 && len(r.ModifyDeadlineAckIds) == 0 && len(r.ModifyDeadlineSeconds) == 0
}

func (p *pingAnswerer) SendMsg(m any) error {
	if err := p.ClientStream.SendMsg(m); err != nil {
		return err
	}
	if r, ok := m.(*pubsubpb.StreamingPullRequest); ok && isPing(r) {
		time.AfterFunc(pongDelay, func() {
			select {
			case p.pongs <- struct{}{}:
			default: // an answer is already waiting
			}
		})
	}
	return nil
}

func (p *pingAnswerer) RecvMsg(m any) error {
	p.once.Do(func() { go p.receive() })
	select {
	case r := <-p.recv:
		if r.err != nil {
			return r.err
		}
		proto.Merge(m.(proto.Message), r.msg)
		return nil
	case <-p.pongs:
		return nil // m stays empty: the answer to a ping
	case <-p.ctx.Done():
		// The stream was cancelled (the client reopens streams so): as
		// gRPC says it, so that the client's retry policy reads it alike.
		return status.FromContextError(p.ctx.Err()).Err()
	}
}

// receive forwards what the emulator sends until the stream ends or its
// context does.
func (p *pingAnswerer) receive() {
	for {
		msg := new(pubsubpb.StreamingPullResponse)
		err := p.ClientStream.RecvMsg(msg)
		select {
		case p.recv <- received{msg, err}:
		case <-p.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}
