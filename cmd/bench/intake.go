package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/gemini/standin"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/gpubsub"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/investigation"
)

// The intake scenario (-intake): a burst of messages published at once to
// the alerts topic, taken in by two `starter intake` processes (one killed
// with SIGKILL in the middle of the burst) with --max-running, on the real
// Temporal dev server, Firestore and Pub/Sub emulators, with the offline
// stand-in as the model.

const intakeQueue = "bench-intake"

// burst is the messages of the scenario and what they must come to.
type burst struct {
	msgs                                           [][]byte
	unique, repeats, newCounts, attacker, malformd int
	groups                                         int // investigations the burst must start
}

// makeBurst builds n messages: 30 % exact repeats and 10 % new counts of
// unique findings, 20 % findings of different identities from one
// attacker address, 5 % malformed, the rest unique findings (each its own
// address, instance and identity), shuffled.
func makeBurst(n int, noGroup bool) burst {
	b := burst{repeats: n * 30 / 100, newCounts: n * 10 / 100, attacker: n * 20 / 100, malformd: n * 5 / 100}
	b.unique = n - b.repeats - b.newCounts - b.attacker - b.malformd
	tag := fmt.Sprintf("%x", time.Now().UnixNano())
	finding := func(id, ip, instance string, count int) []byte {
		raw, _ := json.Marshal(map[string]any{
			"schemaVersion": "2.0", "accountId": "123456789012", "region": "us-east-1", "id": id, "type": "UnauthorizedAccess:EC2/SSHBruteForce",
			"severity": 5, "title": "SSH brute force against " + instance,
			"resource": map[string]any{"resourceType": "Instance", "instanceDetails": map[string]any{"instanceId": instance}},
			"service": map[string]any{"serviceName": "guardduty", "count": count, "action": map[string]any{"networkConnectionAction": map[string]any{
				"remoteIpDetails": map[string]any{"ipAddressV4": ip}}}},
		})
		return raw
	}
	ip := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", 1+i/65536, (i/256)%256, i%256) }
	for i := range b.unique {
		b.msgs = append(b.msgs, finding(fmt.Sprintf("%s-u%d", tag, i), ip(i), fmt.Sprintf("i-u%d", i), 1))
	}
	for i := range b.repeats {
		b.msgs = append(b.msgs, b.msgs[i%b.unique])
	}
	for i := range b.newCounts {
		j := (i * 7) % b.unique
		b.msgs = append(b.msgs, finding(fmt.Sprintf("%s-u%d", tag, j), ip(j), fmt.Sprintf("i-u%d", j), 2+i))
	}
	for i := range b.attacker {
		b.msgs = append(b.msgs, finding(fmt.Sprintf("%s-a%d", tag, i), "203.0.113.66", fmt.Sprintf("i-a%d", i), 1))
	}
	bad := [][]byte{[]byte(`{"cut": "short`), []byte(`[1,2,3]`), []byte(`{}`), []byte(`"a string"`), []byte(`{"a":{"b":[[1]]}}`)}
	for i := range b.malformd {
		b.msgs = append(b.msgs, bad[i%len(bad)])
	}
	rand.Shuffle(len(b.msgs), func(i, j int) { b.msgs[i], b.msgs[j] = b.msgs[j], b.msgs[i] })
	b.groups = b.unique + 1
	if noGroup {
		b.groups = b.unique + b.attacker
	}
	return b
}

// ackLog reads an intake's log as it is written: the first time each
// message was taken (acknowledged, or dead-lettered then acknowledged).
type ackLog struct {
	mu    sync.Mutex
	first map[string]time.Time
	tail  bytes.Buffer
	rest  []byte
	// nacks counts messages not acknowledged (a failure, a full waiting
	// room); why is the first such line.
	nacks int
	why   string
}

var ackLine = regexp.MustCompile(`msg="(alert taken|malformed message dead-lettered)" message_id=(\S+)`)

func (l *ackLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.rest = append(l.rest, p...)
	for {
		i := bytes.IndexByte(l.rest, '\n')
		if i < 0 {
			break
		}
		line := l.rest[:i]
		if m := ackLine.FindSubmatch(line); m != nil {
			if _, ok := l.first[string(m[2])]; !ok {
				l.first[string(m[2])] = now
			}
		} else if bytes.Contains(line, []byte("comes back")) {
			l.nacks++
			if l.why == "" {
				l.why = string(line)
			}
		} else if l.tail.Len() < 16<<10 {
			l.tail.Write(line)
			l.tail.WriteByte('\n')
		}
		l.rest = l.rest[i+1:]
	}
	return len(p), nil
}

// intakeProc is one starter intake of the scenario.
type intakeProc struct {
	cmd  *exec.Cmd
	log  *ackLog
	done chan struct{}
}

// runIntakeBench runs the intake scenario and prints its table.
func runIntakeBench(ctx context.Context, o options, out io.Writer) error {
	rep, err := measureIntake(ctx, o)
	if err != nil {
		return err
	}
	if o.json {
		return rep.writeJSON(out)
	}
	return rep.writeTable(out)
}

func measureIntake(ctx context.Context, o options) (*report, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "investigator-bench-intake-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "./worker", "./starter")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the worker and the starter: %v: %s", err, firstLine(string(b)))
	}
	srv, err := testenv.StartTemporal(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	fsHost, stopFS, err := testenv.StartFirestore()
	if err != nil {
		return nil, err
	}
	defer stopFS()
	psHost, stopPS, err := testenv.StartPubSub(testenv.Project)
	if err != nil {
		return nil, err
	}
	defer stopPS()
	model := geminitest.NewServer(standin.Handler())
	defer model.Close()
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	tc, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Logger: logger})
	if err != nil {
		return nil, err
	}
	defer tc.Close()
	if err := os.Setenv("PUBSUB_EMULATOR_HOST", psHost); err != nil {
		return nil, err
	}
	clients := &gpubsub.Clients{}
	defer clients.Close()
	name := func(kind, id string) string { return "projects/" + testenv.Project + "/" + kind + "/" + id }
	for _, t := range []string{intake.TopicAlerts, intake.TopicDeadLetter, intake.TopicVerdicts} {
		if err := clients.EnsureTopic(ctx, name("topics", t)); err != nil {
			return nil, err
		}
	}
	for sub, topic := range map[string]string{intake.SubscriptionIntake: intake.TopicAlerts, intake.SubscriptionDeadLetters: intake.TopicDeadLetter, intake.SubscriptionVerdicts: intake.TopicVerdicts} {
		// A short ack deadline: the killed intake's messages come back soon.
		if err := clients.EnsureSubscription(ctx, name("subscriptions", sub), name("topics", topic), 10*time.Second); err != nil {
			return nil, err
		}
	}
	env := append(os.Environ(),
		"TEMPORAL_ADDRESS="+srv.FrontendHostPort(), "TEMPORAL_NAMESPACE=default", "TEMPORAL_TASK_QUEUE="+intakeQueue,
		"TEMPORAL_API_KEY=", "TEMPORAL_TLS=", "TEMPORAL_TLS_CLIENT_CERT_PATH=", "TEMPORAL_TLS_CLIENT_KEY_PATH=", "PAYLOAD_KEY_FILE=",
		"FIRESTORE_EMULATOR_HOST="+fsHost, "GOOGLE_CLOUD_PROJECT="+testenv.Project, "FIRESTORE_DATABASE=", "PUBSUB_EMULATOR_HOST="+psHost,
		"GOOGLE_GEMINI_BASE_URL="+model.URL, "GEMINI_API_KEY=bench-key", "GOOGLE_API_KEY=", "GOOGLE_GENAI_USE_VERTEXAI=",
		"BIGQUERY_TABLES_CONFIG=", "SLACK_WEBHOOK_URL=", "LOG_LEVEL=warn")
	var workers []*workerProc
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	for range o.workers {
		w, err := startWorker(filepath.Join(dir, "worker"), env)
		if err != nil {
			return nil, err
		}
		workers = append(workers, w)
	}
	args := []string{"intake", "--log-level", "info", "--subscription", name("subscriptions", intake.SubscriptionIntake),
		"--dead-letter-topic", name("topics", intake.TopicDeadLetter), "--results-topic", name("topics", intake.TopicVerdicts),
		"--max-running", fmt.Sprint(o.intakeMaxRunning), "--max-outstanding", "100"}
	if o.intakeNoGroup {
		args = append(args, "--no-group")
	}
	var procs []*intakeProc
	defer func() {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				_ = p.cmd.Process.Kill()
			}
		}
	}()
	for range 2 {
		p := &intakeProc{cmd: exec.Command(filepath.Join(dir, "starter"), args...), log: &ackLog{first: map[string]time.Time{}}, done: make(chan struct{})}
		p.cmd.Env = env
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
		if err := p.cmd.Start(); err != nil {
			return nil, err
		}
		go func() { _ = p.cmd.Wait(); close(p.done) }()
		procs = append(procs, p)
	}
	for _, p := range procs {
		if err := waitFor(ctx, time.Minute, func() bool {
			p.log.mu.Lock()
			defer p.log.mu.Unlock()
			return strings.Contains(p.log.tail.String(), "intake: taking alerts")
		}); err != nil {
			return nil, fmt.Errorf("an intake did not start: %s", lastLine(p.log.tail.String()))
		}
	}

	b := makeBurst(o.intakeMessages, o.intakeNoGroup)
	pub, err := clients.Publisher(ctx, name("topics", intake.TopicAlerts))
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var results []*pubsub.PublishResult
	for _, m := range b.msgs {
		results = append(results, pub.Publish(ctx, &pubsub.Message{Data: m}))
	}
	ids := map[string]bool{}
	for _, r := range results {
		id, err := r.Get(ctx)
		if err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		ids[id] = true
	}
	published := time.Since(start)

	// SIGKILL one intake once a third of the burst was taken.
	acked := func() map[string]time.Time {
		all := map[string]time.Time{}
		for _, p := range procs {
			p.log.mu.Lock()
			for id, at := range p.log.first {
				if old, ok := all[id]; !ok || at.Before(old) {
					all[id] = at
				}
			}
			p.log.mu.Unlock()
		}
		return all
	}
	killAfter := len(b.msgs) / 3
	if err := waitFor(ctx, o.timeout, func() bool { return len(acked()) >= killAfter }); err != nil {
		return nil, fmt.Errorf("the intakes took %d of %d messages within %s", len(acked()), len(b.msgs), o.timeout)
	}
	_ = procs[0].cmd.Process.Signal(syscall.SIGKILL)
	killedAt := time.Since(start)
	killedTook := len(acked())

	if err := waitFor(ctx, o.timeout, func() bool { return len(acked()) >= len(ids) }); err != nil {
		return nil, fmt.Errorf("%d of %d messages were taken within %s", len(acked()), len(ids), o.timeout)
	}
	var taken []time.Duration
	for _, at := range acked() {
		taken = append(taken, at.Sub(start))
	}
	takenAll, _ := percentile(taken, 100)
	taken50, _ := percentile(taken, 50)
	taken95, _ := percentile(taken, 95)
	acceptRate := float64(len(ids)) / takenAll.Seconds()

	var st intake.Status
	settled := func() bool {
		v, err := tc.QueryWorkflow(ctx, intake.AdmissionID(intakeQueue), "", intake.StatusQuery)
		if err != nil || v.Get(&st) != nil {
			return false
		}
		return st.Running == 0 && st.Waiting == 0
	}
	if err := waitFor(ctx, o.timeout, settled); err != nil {
		return nil, fmt.Errorf("the investigations did not all conclude within %s: %+v", o.timeout, st.Counters)
	}
	allDone := time.Since(start)
	startsAt, err := investigationStarts(ctx, tc)
	if err != nil {
		return nil, err
	}
	var latencies []time.Duration
	for _, t := range startsAt {
		latencies = append(latencies, t.Sub(start))
	}
	dead := drain(ctx, clients, name("subscriptions", intake.SubscriptionDeadLetters))
	verdicts := drain(ctx, clients, name("subscriptions", intake.SubscriptionVerdicts))
	left := drain(ctx, clients, name("subscriptions", intake.SubscriptionIntake))

	nacks, why := 0, ""
	for _, p := range procs {
		p.log.mu.Lock()
		nacks += p.log.nacks
		if why == "" {
			why = p.log.why
		}
		p.log.mu.Unlock()
	}
	if os.Getenv("BENCH_INTAKE_LOG") != "" {
		fmt.Fprintf(os.Stderr, "first nack: %s\n", why)
	}
	rep := &report{
		Date: time.Now().UTC().Format("2006-01-02"),
		Settings: fmt.Sprintf("intake scenario: %d messages published at once (%d unique findings, %d exact repeats, %d with a new count, %d of other identities from one attacker address, %d malformed); two intakes (--max-running %d, --max-outstanding 100%s), one killed with SIGKILL after %d messages were taken; %d worker process(es); the offline stand-in as the model; %s",
			len(b.msgs), b.unique, b.repeats, b.newCounts, b.attacker, b.malformd, o.intakeMaxRunning, map[bool]string{true: ", --no-group"}[o.intakeNoGroup], killedTook, o.workers, machine()),
	}
	p50, _ := percentile(latencies, 50)
	p95, _ := percentile(latencies, 95)
	check := func(name string, got, want int, detail string) row {
		r := figure(name, float64(got), unitCount, fmt.Sprintf("%s; must be %d", detail, want))
		if got != want {
			r.Detail += fmt.Sprintf(" — OFF BY %d", got-want)
		}
		return r
	}
	rep.Rows = []row{
		figure("publish the burst", published.Seconds(), unitSec, fmt.Sprintf("%d messages, Publish to the last PublishResult", len(b.msgs))),
		figure("alerts accepted per second", acceptRate, unitCount, "distinct messages acknowledged (stored and admitted, or dead-lettered) ÷ first publish → last first acknowledgement, across both intakes"),
		figure("half of the messages taken after", taken50.Seconds(), unitSec, "first publish → the first acknowledgement of the median message"),
		figure("95 % taken after", taken95.Seconds(), unitSec, ""),
		figure("all taken after", takenAll.Seconds(), unitSec, "the killed intake's messages come back once their lease (extended 20 s at a time) runs out"),
		figure("publish → investigation start, p50", ms(p50), unitMs, "first publish → each Investigation's start time (waiting room included)"),
		figure("publish → investigation start, p95", ms(p95), unitMs, ""),
		check("investigations started", len(startsAt), b.groups, "Investigation workflows on the queue; the distinct groups of the burst"),
		check("dead letters", distinctAttr(dead, "message_id"), b.malformd, fmt.Sprintf("malformed messages on alerts-dead-letter (by their message_id attribute), each with its reason; %d copies in all: a message dead-lettered by the killed intake just before its acknowledgement went out comes back and is dead-lettered again", len(dead))),
		check("messages left unacknowledged", len(left), 0, "alerts-intake pulled after the run: nothing lost"),
		figure("verdicts published", float64(distinctAttr(verdicts, "idempotency_key")), unitCount, fmt.Sprintf("distinct idempotency keys: one per conclusion (%d investigations; follow-ups add conclusions); %d messages in all", len(startsAt), len(verdicts))),
		figure("admissions", float64(st.Alerts), unitCount, fmt.Sprintf("alerts the admission workflow decided (redeliveries of the killed intake's messages included): %d seen again, %d grouped, %d follow-ups, %d repeats, %d shed", st.SeenAgain, st.Grouped, st.FollowUps, st.Repeats, st.Shed)),
		figure("messages nacked", float64(nacks), unitCount, "not acknowledged by an intake (a store or admission failure, a full waiting room): they came back"),
		figure("intake killed at", killedAt.Seconds(), unitSec, fmt.Sprintf("SIGKILL after %d messages were taken", killedTook)),
		figure("all concluded after", allDone.Seconds(), unitSec, "first publish → no investigation running or waiting"),
	}
	rep.Notes = []string{
		"Alerts accepted per second counts each message once, at the first log line of an intake saying it took it (the intake writes it after the admission workflow recorded the outcome, then acknowledges).",
		"The investigation start is the workflow's start time on the server; with --max-running the later ones wait in the admission workflow, so p95 includes the wait for a slot.",
		"Nothing lost: every distinct identity (or group) has exactly one investigation, every malformed message is in the dead-letter topic, and the intake's subscription holds nothing once the run ends.",
	}
	return rep, nil
}

// investigationStarts lists the start times of the queue's Investigation workflows.
func investigationStarts(ctx context.Context, tc client.Client) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`TaskQueue = %q AND WorkflowType = %q`, intakeQueue, investigation.WorkflowName), PageSize: 1000, NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, ex := range resp.GetExecutions() {
			id := ex.GetExecution().GetWorkflowId()
			if t := ex.GetStartTime().AsTime(); out[id].IsZero() || t.Before(out[id]) {
				out[id] = t
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// distinctAttr counts the distinct values of a message attribute.
func distinctAttr(msgs []*pubsub.Message, name string) int {
	seen := map[string]bool{}
	for _, m := range msgs {
		seen[m.Attributes[name]] = true
	}
	return len(seen)
}

// drain reads a subscription until it is quiet for three seconds.
func drain(ctx context.Context, clients *gpubsub.Clients, sub string) []*pubsub.Message {
	got, _ := clients.Drain(ctx, sub, 3*time.Second)
	return got
}

// waitFor polls cond until it holds, timeout passes or ctx ends.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
