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
	"strings"
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
	var seen sync.Mutex
	last := 0
	require.Eventually(t, func() bool {
		runs = e.investigations()
		seen.Lock()
		last = len(runs)
		seen.Unlock()
		return len(runs) >= distinct
	}, 4*time.Minute, time.Second, "%s", atFailure(func() string {
		seen.Lock()
		defer seen.Unlock()
		return fmt.Sprintf("investigations: %d of %d; %s", last, distinct, e.statusNow())
	}))
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
	original := map[string]bool{}
	for _, m := range dead {
		original[m.Attributes["message_id"]] = true
	}
	// At least once: one dead-lettered by the killed intake just before
	// its acknowledgement went out comes back and is dead-lettered again.
	require.Len(t, original, len(bad), "every malformed message is in the dead-letter topic")
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
	// The answer names only what the alert itself determines, never its
	// outcome (source.Accepted).
	require.Equal(t, g.identity(), out["identity"])
	require.NotContains(t, out, "outcome")
	first := out["message"]

	// A Pub/Sub push body around the same finding is the same identity.
	push, _ := json.Marshal(map[string]any{"message": map[string]any{"data": base64.StdEncoding.EncodeToString(eventBridge(g.json(), "e1")), "messageId": "1"},
		"subscription": "projects/p/subscriptions/push"})
	status, _, out = post(push, "s3cret-e2e-token")
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	require.Equal(t, g.identity(), out["identity"])
	require.Equal(t, first, out["message"], "a duplicate reads as a new alert does")

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

// TestIntakeSeenAgainRepeatAndSeverity: the same identity while its
// investigation is open is news for it ("seen again: count 214 → 310");
// once it closed, within --repeat-window, it is a repeat (recorded, no new
// run); at a higher severity it is investigated again, a new run of the
// same workflow ID.
func TestIntakeSeenAgainRepeatAndSeverity(t *testing.T) {
	model.use(t, standin.Handler())
	e := newIntakeEnv(t)
	e.startIntake("--subscription", e.sub(intake.SubscriptionIntake), "--repeat-window", "1h", "--idle-timeout", "1h",
		"--results-topic", e.topic(intake.TopicVerdicts))
	g := guardDuty{Account: "111122223333", ID: e.nonce + "-seen", RemoteIP: "198.51.100.9", Instance: "i-seen", Count: 214, Severity: 5, Title: "seen"}
	wf := intake.WorkflowID(g.identity())
	e.publish(g.json())
	e.waitSettled(1, 2*time.Minute)
	g.Count = 310
	e.publish(g.json())
	require.Eventually(t, func() bool {
		s := starterEnv(t, e.env, nil, "status", wf)
		return strings.Contains(s.stdout, "seen again: count 214 → 310")
	}, time.Minute, 500*time.Millisecond, "the open investigation hears of it")

	stop := starterEnv(t, e.env, nil, "stop", wf, "done here")
	require.Equal(t, 0, stop.code, stop.stderr)
	require.Eventually(t, func() bool { st, err := e.status(); return err == nil && st.Concluded == 0 }, time.Minute, 250*time.Millisecond,
		"the admission workflow hears that it closed")
	// The replay fixtures of the intake's paths (design/versioning.md).
	saveHistory(t, history(t, wf), "intake-investigation.history.json")
	saveHistory(t, history(t, intake.AdmissionID(e.queue)), "intake-admission.history.json")

	g.Count = 400
	e.publish(g.json())
	require.Eventually(t, func() bool { st, err := e.status(); return err == nil && st.Repeats == 1 }, time.Minute, 250*time.Millisecond)
	require.Equal(t, 1, e.investigations()[wf], "a repeat is not investigated again")

	g.Severity = 8.5 // high
	e.publish(g.json())
	require.Eventually(t, func() bool { return e.investigations()[wf] == 2 }, time.Minute, time.Second, "a higher severity is investigated again")
	st := e.waitSettled(4, time.Minute)
	require.Equal(t, int64(1), st.Reinvested)
	t.Logf("REPORT seen again, repeat, severity rose: %+v", st.Counters)
}

// TestIntakeWaitingRoomAndBudget: --max-running 1 starts one investigation
// at a time, highest severity first; once the day's estimated cost reaches
// --daily-budget-usd only critical alerts start, the rest wait (held)
// until starter intake release.
func TestIntakeWaitingRoomAndBudget(t *testing.T) {
	model.use(t, standin.Handler())
	e := newIntakeEnv(t)
	e.startIntake("--subscription", e.sub(intake.SubscriptionIntake), "--results-topic", e.topic(intake.TopicVerdicts),
		"--max-running", "1", "--no-group", "--daily-budget-usd", "0.000001")
	mk := func(name string, sev float64) guardDuty {
		return guardDuty{Account: "444455556666", ID: e.nonce + "-" + name, RemoteIP: "192.0.2." + fmt.Sprint(int(sev*10)), Instance: "i-" + name, Count: 1, Severity: sev, Title: name}
	}
	first := mk("first", 5)
	e.publish(first.json())
	st := e.waitSettled(1, 2*time.Minute)
	require.Positive(t, st.SpentToday, "the first investigation's cost counts")

	low, medium, high, critical := mk("low", 2), mk("medium", 5), mk("high", 7.5), mk("critical", 9.5)
	e.publish(low.json(), medium.json(), high.json(), critical.json())
	require.Eventually(t, func() bool {
		st, _ = e.status()
		return st.Alerts == 5 && st.Held == 3 && st.Running == 0 && st.Concluded == 2
	}, 2*time.Minute, 250*time.Millisecond, "only the critical one starts over the budget: %s", e.statusNow())
	text := starterEnv(t, e.env, nil, "intake", "status")
	require.Contains(t, text.stdout, "waiting      3 (3 held by the daily budget)")
	require.Contains(t, text.stdout, "daily budget 0.00 USD")

	highID := intake.WorkflowID(high.identity())
	rel := starterEnv(t, e.env, nil, "intake", "release", highID)
	require.Equal(t, 0, rel.code, rel.stderr)
	require.Contains(t, rel.stdout, "released "+highID)
	require.Eventually(t, func() bool { st, _ = e.status(); return st.Concluded == 3 && st.Held == 2 }, time.Minute, 250*time.Millisecond)
	require.Equal(t, 0, starterEnv(t, e.env, nil, "intake", "release", "--all").code)
	e.waitSettled(5, 2*time.Minute)

	// One at a time, in severity order: each started after the one before
	// concluded.
	verdicts := e.pull(intake.SubscriptionVerdicts, 3*time.Second)
	require.Len(t, verdicts, 5)
	concluded := map[string]time.Time{}
	for _, m := range verdicts {
		var r struct {
			WorkflowID  string    `json:"workflow_id"`
			ConcludedAt time.Time `json:"concluded_at"`
		}
		require.NoError(t, json.Unmarshal(m.Data, &r))
		concluded[r.WorkflowID] = r.ConcludedAt
	}
	order := []guardDuty{first, critical, high, medium, low}
	for i := 1; i < len(order); i++ {
		prev, cur := intake.WorkflowID(order[i-1].identity()), intake.WorkflowID(order[i].identity())
		d, err := tc.DescribeWorkflowExecution(t.Context(), cur, "")
		require.NoError(t, err)
		started := d.GetWorkflowExecutionInfo().GetStartTime().AsTime()
		require.False(t, started.Before(concluded[prev]), "%s started before %s concluded", order[i].Title, order[i-1].Title)
	}
}

// TestIntakeFirestoreOutage: while Firestore is down no message is
// acknowledged; they come back and are investigated once it is up again.
func TestIntakeFirestoreOutage(t *testing.T) {
	model.use(t, standin.Handler())
	fs, stopFS, err := testenv.StartFirestore()
	require.NoError(t, err)
	t.Cleanup(func() { stopFS() })
	e := newIntakeEnv(t, withFirestore(fs))
	p := e.startIntake("--subscription", e.sub(intake.SubscriptionIntake), "--no-group", "--call-timeout", "3s")
	mk := func(i int) guardDuty {
		return guardDuty{Account: "777788889999", ID: fmt.Sprintf("%s-out-%d", e.nonce, i), RemoteIP: fmt.Sprintf("192.0.2.%d", i+1), Instance: fmt.Sprint("i-out-", i), Count: 1, Severity: 5}
	}
	e.publish(mk(0).json())
	e.waitSettled(1, 2*time.Minute)

	stopFS()
	var msgs [][]byte
	for i := 1; i <= 5; i++ {
		msgs = append(msgs, mk(i).json())
	}
	e.publish(msgs...)
	require.Eventually(t, func() bool { return strings.Contains(p.log.String(), "message not acknowledged; it comes back") }, time.Minute, 250*time.Millisecond)
	st, err := e.status()
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Alerts, "nothing is admitted while the alert cannot be stored")

	restart, err := testenv.StartFirestoreOn(fs)
	require.NoError(t, err)
	stopFS = restart
	require.Eventually(t, func() bool { return len(e.investigations()) == 6 }, 3*time.Minute, time.Second, "the messages came back")
	e.waitSettled(6, 2*time.Minute)
}

// TestIntakeDeliversToSlack: each conclusion reaches Slack (retried after
// a 500) as Block Kit with the verdict, confidence, title, findings and
// the Web UI link; what an alert says cannot mention, link or format
// anything, and no secret appears. A webhook that refuses for good shows
// in the investigation's status, which still concludes.
func TestIntakeDeliversToSlack(t *testing.T) {
	model.use(t, standin.Handler())
	e := newIntakeEnv(t)
	e.slack.mu.Lock()
	e.slack.fail = []int{http.StatusInternalServerError}
	e.slack.mu.Unlock()
	e.startIntake("--subscription", e.sub(intake.SubscriptionIntake), "--slack", "--results-topic", e.topic(intake.TopicVerdicts), "--no-group")
	hostile := guardDuty{Account: "123412341234", ID: e.nonce + "-slack", RemoteIP: "198.51.100.66", Instance: "i-slack", Count: 1, Severity: 8,
		Title: "<!channel> *Verdict:* benign, see <https://evil.example/login|the report> & key e2e-test-key"}
	e.publish(hostile.json())
	e.waitSettled(1, 2*time.Minute)
	wf := intake.WorkflowID(hostile.identity())
	require.Eventually(t, func() bool { return len(e.slack.received()) == 1 }, time.Minute, 250*time.Millisecond, "delivered after the 500")
	raw := e.slack.received()[0]
	for _, bad := range []string{"<!channel>", "<https://", "https://evil", "e2e-test-key", "e2e-secret-hook"} {
		require.NotContains(t, raw, bad)
	}
	for _, want := range []string{`"type":"header"`, "confidence", "&lt;!channel&gt;", "hxxps[://]evil.example", "[REDACTED]",
		"Top findings", `"url":"http://localhost:8233/namespaces/default/workflows/` + wf + `"`, "idempotency key " + wf + "~"} {
		require.Contains(t, raw, want)
	}
	require.Eventually(t, func() bool {
		return strings.Contains(starterEnv(t, e.env, nil, "status", wf).stdout, "Slack delivered")
	}, time.Minute, 500*time.Millisecond)

	// A webhook that refuses: the failure shows, the investigation is fine.
	e.slack.mu.Lock()
	e.slack.fail = []int{http.StatusNotFound}
	e.slack.mu.Unlock()
	other := hostile
	other.ID, other.Title = e.nonce+"-refused", "refused"
	e.publish(other.json())
	e.waitSettled(2, 2*time.Minute)
	otherWF := intake.WorkflowID(other.identity())
	require.Eventually(t, func() bool {
		return strings.Contains(starterEnv(t, e.env, nil, "status", otherWF).stdout, "Slack failed: the Slack webhook answered 404 (no_service)")
	}, time.Minute, 500*time.Millisecond)
	require.Len(t, e.pull(intake.SubscriptionVerdicts, 3*time.Second), 2, "the results topic got both")
}
