package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/internal/testenv"
	progressstore "github.com/secops-agent/investigator/progress"
)

// maxFollowUpHistory is the history 30 follow-ups to the SCC demo may
// hold, every run of the workflow together (design/durability.md, "State
// and its bounds"): no activity input carries the conversation, so
// history grows with the number of follow-ups, not with its square.
const maxFollowUpHistory = 300 << 10

// TestThirtyFollowUps asks the SCC demo investigation 30 follow-up
// questions and measures its history: every run's events, in protobuf as
// the server keeps them (the bench's "history bytes"), and as JSON.
func TestThirtyFollowUps(t *testing.T) {
	_, id := demo(t, sccAlert)
	for i := range 30 {
		ask := starter(t, nil, "ask", id, fmt.Sprintf("Follow-up %d: which user ran the miner, and from where?", i+1))
		require.Equal(t, 0, ask.code, "follow-up %d:\n%s\n%s", i+1, ask.stdout, ask.stderr)
		require.Contains(t, ask.stdout, "user svc-batch", "follow-up %d answered", i+1)
	}
	total, asJSON, events, runs := 0, 0, 0, 0
	byKind := map[string]int{}
	var largest int
	for runID := ""; ; runs++ {
		hist := runHistory(t, id, runID)
		raw, err := protojson.Marshal(hist)
		require.NoError(t, err)
		total += proto.Size(hist)
		asJSON += len(raw)
		events += len(hist.Events)
		next := ""
		for _, e := range hist.Events {
			raw, _ := protojson.Marshal(e)
			kind := e.GetEventType().String()
			if at := e.GetActivityTaskScheduledEventAttributes(); at != nil {
				kind += " " + at.GetActivityType().GetName()
			}
			if at := e.GetMarkerRecordedEventAttributes(); at != nil {
				var data struct{ ActivityType string }
				_ = converter.GetDefaultDataConverter().FromPayloads(at.GetDetails()["data"], &data)
				kind += " " + data.ActivityType
			}
			byKind[kind] += len(raw)
			if at := e.GetActivityTaskScheduledEventAttributes(); at != nil {
				in, _ := protojson.Marshal(at.GetInput())
				largest = max(largest, len(in))
			}
			if at := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); at != nil {
				next = at.GetNewExecutionRunId()
			}
		}
		if next == "" {
			break
		}
		runID = next
	}
	t.Logf("REPORT 30 follow-ups: history %d bytes (%d KB, protobuf as Temporal stores it; %d KB as JSON) in %d events over %d run(s); largest activity input %d bytes",
		total, total/1000, asJSON/1000, events, runs+1, largest)
	t.Logf("REPORT 30 follow-ups, history JSON bytes by event: %v", byKind)
	require.Less(t, total, maxFollowUpHistory, "30 follow-ups hold %d bytes of history", total)
}

// counter counts the gRPC calls (unary calls and streams opened) of the
// clients it is given to.
type counter struct{ calls atomic.Int64 }

func (c *counter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.calls.Add(1)
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *counter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	c.calls.Add(1)
	return streamer(ctx, desc, cc, method, opts...)
}

// followIdle follows the idle investigation id for a while with a client
// whose Temporal and Firestore calls n counts, and returns the calls per
// second after the follower caught up (it printed the events so far).
func followIdle(t *testing.T, id string, withStore bool, n *counter) float64 {
	t.Helper()
	addr := ""
	for _, kv := range stack {
		if v, ok := strings.CutPrefix(kv, "TEMPORAL_ADDRESS="); ok {
			addr = v
		}
	}
	tcl, err := client.Dial(client.Options{HostPort: addr, ConnectionOptions: client.ConnectionOptions{
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(n.unary), grpc.WithChainStreamInterceptor(n.stream)}}})
	require.NoError(t, err)
	t.Setenv("FIRESTORE_EMULATOR_HOST", fsHost)
	o := agentclient.Options{Temporal: config.Temporal{Address: addr, Namespace: "default", TaskQueue: "investigations"}}
	if withStore {
		fs, err := firestore.NewClient(context.Background(), testenv.Project,
			option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(n.unary)), option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(n.stream)))
		require.NoError(t, err)
		o.Progress, o.OnClose = progressstore.NewStore(fs), func() { fs.Close() }
	}
	c, err := agentclient.New(tcl, o)
	require.NoError(t, err)
	defer c.Close()
	const caughtUp, idle = 3 * time.Second, 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), caughtUp+idle)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx, agentclient.NewTextRenderer(io.Discard, id, pricing.Default()), id, 1) }()
	time.Sleep(caughtUp)
	before := n.calls.Load()
	<-ctx.Done()
	calls := n.calls.Load() - before
	<-done
	return float64(calls) / idle.Seconds()
}

// TestIdleFollowerWaits: a follower of an investigation where nothing
// happens waits on the progress store (one listener) and asks Temporal
// only after a growing quiet wait, where it used to call Describe and the
// progress query every 400 ms. The same investigation, the same window.
func TestIdleFollowerWaits(t *testing.T) {
	_, id := demo(t, sccAlert)
	d, err := tc.DescribeWorkflowExecution(context.Background(), id, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus(), "idle, waiting for follow-ups")
	var polling, waiting counter
	before := followIdle(t, id, false, &polling)
	after := followIdle(t, id, true, &waiting)
	t.Logf("REPORT an idle follower: %.2f requests/s polling Temporal, %.2f requests/s waiting on the progress store", before, after)
	require.Less(t, after*4, before, "waiting makes a quarter of the requests polling made, or fewer")
}
