package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/gemini/standin"
	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/investigation"
)

// malformed are messages the intake must dead-letter, each for its reason.
func malformed() [][]byte {
	push := `{"message":{"data":"%%%","messageId":"9"},"subscription":"projects/p/subscriptions/s"}`
	return [][]byte{
		[]byte(`{"title": "cut short`),
		[]byte(`[{"id": 1}]`),
		[]byte(`{}`),
		[]byte(push),
		append([]byte(`{"id":"big","pad":"`), append(bytes.Repeat([]byte("a"), alerts.MaxBytes), '"', '}')...),
	}
}

// TestIntakeBurstTwoIntakesOneKilled is the held-out check's shape: a burst
// published to alerts, two intakes on alerts-intake with --no-group and
// --max-running 10, one of them killed (SIGKILL) in the middle of the
// burst. It ends with exactly one investigation per distinct identity
// (repeats, new counts and other envelopes of one identity included),
// every malformed message in the dead-letter topic with its reason, one
// verdicts message per conclusion, and nothing lost: every message was
// acknowledged only once its alert was stored and its outcome recorded.
func TestIntakeBurstTwoIntakesOneKilled(t *testing.T) {
	model.use(t, standin.Handler())
	e := newIntakeEnv(t, withAckDeadline(10*time.Second))
	args := []string{"--subscription", e.sub(intake.SubscriptionIntake), "--dead-letter-topic", e.topic(intake.TopicDeadLetter),
		"--results-topic", e.topic(intake.TopicVerdicts), "--max-running", "10", "--no-group", "--max-outstanding", "8"}
	a := e.startIntake(args...)
	e.startIntake(args...)

	const distinct = 40
	var findings []guardDuty
	var msgs [][]byte
	for i := range distinct {
		g := guardDuty{Account: "123456789012", ID: fmt.Sprintf("%s%028d", e.nonce, i), RemoteIP: fmt.Sprintf("203.0.113.%d", i+1),
			Instance: fmt.Sprintf("i-%s%08d", e.nonce, i), Title: fmt.Sprintf("SSH brute force %d", i), Count: 10, Severity: 5}
		findings = append(findings, g)
		msgs = append(msgs, g.json())
	}
	valid := distinct
	for i := range 16 { // exact repeats, some inside an EventBridge envelope
		g := findings[i%distinct]
		m := g.json()
		if i%2 == 0 {
			m = eventBridge(m, fmt.Sprint("event-", i))
		}
		msgs = append(msgs, m)
		valid++
	}
	for i := range 8 { // the same findings with a new count
		g := findings[i*3]
		g.Count = 214 + i
		msgs = append(msgs, g.json())
		valid++
	}
	bad := malformed()
	msgs = append(msgs, bad...)
	rand.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })

	published := time.Now()
	go e.publish(msgs...)
	// Kill one intake in the middle of the burst.
	require.Eventually(t, func() bool { st, err := e.status(); return err == nil && st.Alerts >= 15 }, 2*time.Minute, 20*time.Millisecond)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	killedAt := time.Since(published)

	// The killed intake's messages come back once their ack deadline
	// passes; the admission workflow counts redeliveries too.
	var runs map[string]int
	require.Eventually(t, func() bool { runs = e.investigations(); return len(runs) >= distinct }, 4*time.Minute, time.Second,
		"investigations: %d of %d", len(runs), distinct)
	st := e.waitSettled(int64(valid), 2*time.Minute)
	time.Sleep(3 * time.Second) // anything more would show now
	runs = e.investigations()
	require.Len(t, runs, distinct, "one investigation per distinct identity")
	for _, g := range findings {
		require.Equal(t, 1, runs[intake.WorkflowID(g.identity())], "identity %s: runs", g.identity())
	}
	require.Equal(t, int64(distinct), st.Started)
	require.Equal(t, distinct, st.Concluded)

	dead := e.pull(intake.SubscriptionDeadLetters, 3*time.Second)
	require.Len(t, dead, len(bad), "every malformed message is in the dead-letter topic")
	for _, m := range dead {
		require.NotEmpty(t, m.Attributes["reason"], "the reason is an attribute")
		require.Equal(t, e.sub(intake.SubscriptionIntake), m.Attributes["subscription"])
	}

	verdicts := e.pull(intake.SubscriptionVerdicts, 3*time.Second)
	keys := map[string]bool{}
	for _, m := range verdicts {
		keys[m.Attributes["idempotency_key"]] = true
		require.NotContains(t, string(m.Data), "e2e-secret-hook", "no secret in a delivered result")
	}
	require.Len(t, keys, distinct, "one verdicts message per conclusion")
	require.Len(t, verdicts, distinct, "and no duplicate")

	// Nothing lost: every valid alert is stored, and no message is left
	// on the intake's subscription.
	require.Empty(t, e.pull(intake.SubscriptionIntake, 3*time.Second), "messages left unacknowledged")
	require.GreaterOrEqual(t, st.Alerts, int64(valid))
	t.Logf("REPORT intake burst: %d messages (%d distinct identities, %d repeats, %d malformed), two intakes, one killed after %s; %d investigations, %d dead letters, %d verdicts; admission: %d alerts taken (redeliveries included), %d seen again",
		len(msgs), distinct, valid-distinct, len(bad), killedAt.Round(time.Millisecond), len(runs), len(dead), len(verdicts), st.Alerts, st.SeenAgain)
}

// TestIntakeGroupsABurstFromOneAddress: with grouping on, 50 alerts of
// different identities from one source address make one investigation
// with 50 alerts; --no-group makes 50 (TestIntakeBurstTwoIntakesOneKilled).
func TestIntakeGroupsABurstFromOneAddress(t *testing.T) {
	model.use(t, standin.Handler())
	e := newIntakeEnv(t)
	e.startIntake("--subscription", e.sub(intake.SubscriptionIntake), "--results-topic", e.topic(intake.TopicVerdicts), "--max-outstanding", "20")
	var msgs [][]byte
	for i := range 50 {
		msgs = append(msgs, guardDuty{Account: "123456789012", ID: fmt.Sprintf("%s-%d", e.nonce, i), RemoteIP: "198.51.100.77",
			Instance: fmt.Sprintf("i-%s-%d", e.nonce, i), Count: 3, Severity: 5, Title: "probe"}.json())
	}
	e.publish(msgs...)
	st := e.waitSettled(50, 3*time.Minute)
	runs := e.investigations()
	require.Len(t, runs, 1, "one investigation for the address")
	require.Equal(t, int64(49), st.Grouped+st.FollowUps)
	var id string
	for id = range runs {
	}
	require.Eventually(t, func() bool {
		s := starterEnv(t, e.env, nil, "status", "--json", id)
		var got investigation.Status
		return json.Unmarshal([]byte(s.stdout), &got) == nil && got.Intake != nil && got.Intake.Arrived == 49
	}, time.Minute, 500*time.Millisecond, "the investigation knows of the 49 related alerts")
	text := starterEnv(t, e.env, nil, "status", id)
	require.Contains(t, text.stdout, "Alerts that arrived since it began: 49 (the latest 20)")
	require.Contains(t, text.stdout, "shares ip:198.51.100.77")
	t.Logf("REPORT grouping: 50 alerts from one address → 1 investigation (%s), %d grouped, %d follow-ups", id, st.Grouped, st.FollowUps)
}

// TestIntakeWebhook: POST /v1/alerts answers 202 with the alert and
// workflow IDs once the alert is stored and admitted, 400 with the reason
// for what starter investigate would refuse, 401 without the token, 429
// with Retry-After when more calls are in flight than it takes.
func TestIntakeWebhook(t *testing.T) {
	model.use(t, standin.Handler())
	e := newIntakeEnv(t)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret-e2e-token\n"), 0o600))
	port, err := testenv.FreePort()
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	e.startIntake("--listen", addr, "--token-file", token, "--max-outstanding", "1")
	url := "http://" + addr + "/v1/alerts"
	post := func(body []byte, bearer string) (int, http.Header, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		raw, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(raw, &out)
		return resp.StatusCode, resp.Header, out
	}
	g := guardDuty{Account: "210987654321", ID: e.nonce + "-web", RemoteIP: "192.0.2.10", Instance: "i-web", Count: 1, Severity: 8, Title: "web"}
	status, _, out := post(g.json(), "s3cret-e2e-token")
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	al, err := alerts.Parse(g.json())
	require.NoError(t, err)
	require.Equal(t, al.ID, out["alert_id"])
	require.Equal(t, intake.WorkflowID(g.identity()), out["workflow_id"])
	require.Equal(t, intake.OutcomeStarted, out["outcome"])

	// A Pub/Sub push body around the same finding is the same identity.
	push, _ := json.Marshal(map[string]any{"message": map[string]any{"data": base64.StdEncoding.EncodeToString(eventBridge(g.json(), "e1")), "messageId": "1"},
		"subscription": "projects/p/subscriptions/push"})
	status, _, out = post(push, "s3cret-e2e-token")
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	require.Equal(t, intake.OutcomeSeenAgain, out["outcome"])

	for _, body := range malformed() {
		status, _, out = post(body, "s3cret-e2e-token")
		require.Equal(t, http.StatusBadRequest, status, "%.60q: %v", body, out)
		require.NotEmpty(t, out["error"])
	}
	status, _, out = post([]byte(`{"title": "x"`), "s3cret-e2e-token")
	require.Contains(t, out["error"], "not valid JSON", "the reason, as starter investigate gives it")
	status, hdr, _ := post(g.json(), "")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, hdr.Get("WWW-Authenticate"), "Bearer")
	status, _, _ = post(g.json(), "wrong")
	require.Equal(t, http.StatusUnauthorized, status)

	// A burst over --max-outstanding 1: some are shed with 429 and
	// Retry-After, none is lost (every 202 names its workflow).
	var mu sync.Mutex
	codes := map[int]int{}
	retryAfter := ""
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 20 {
		wg.Go(func() {
			<-start
			gi := g
			gi.ID = fmt.Sprintf("%s-burst-%d", e.nonce, i)
			status, hdr, _ := post(gi.json(), "s3cret-e2e-token")
			mu.Lock()
			codes[status]++
			if status == http.StatusTooManyRequests {
				retryAfter = hdr.Get("Retry-After")
			}
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	require.Positive(t, codes[http.StatusTooManyRequests], "load shed: %v", codes)
	require.NotEmpty(t, retryAfter)
	require.Equal(t, 20, codes[http.StatusAccepted]+codes[http.StatusTooManyRequests], "%v", codes)
	t.Logf("REPORT webhook: 202 %d, 429 %d (Retry-After %s) of 20 at once with --max-outstanding 1", codes[http.StatusAccepted], codes[http.StatusTooManyRequests], retryAfter)
}
