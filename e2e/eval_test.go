package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"google.golang.org/api/iterator"

	"github.com/secops-agent/investigator/activities/bigquery/bqtools"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/gemini/standin"
	"github.com/secops-agent/investigator/internal/testenv"
)

// standInWarning is the line starter eval prints above and below its report
// when the worker's model endpoint is a local server, as here.
var standInWarning = regexp.MustCompile(`(?m)^WARNING: the worker's model endpoint http://127\.0\.0\.1:\d+ is a local server, such as the offline Gemini stand-in: its answers are scripted, so these scores mean nothing about any model\.$`)

// Where the eval's own worker keeps its alerts, memories and transcripts,
// and the queue it serves, as go tool task eval sets them up.
const (
	evalDatabase = "investigator-eval"
	evalQueue    = "investigations-eval"
)

// evalWorker starts a worker on the eval's database and task queue (the
// shared scripted model behind it) and returns the environment the starter
// needs to reach it; the worker stops when the test ends.
func evalWorker(t *testing.T) []string {
	t.Helper()
	env := append(append([]string{}, stack...), "FIRESTORE_DATABASE="+evalDatabase, "TEMPORAL_TASK_QUEUE="+evalQueue)
	cmd := exec.Command(filepath.Join(bin, "worker"))
	cmd.Env = env
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("eval worker log:\n%s", log.String())
		}
	})
	return env
}

// envValue is a variable of env.
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// TestEvalScorecard runs two of the project's labelled cases, twice each
// and twice as the alert-only baseline, through the real workflow with the
// offline stand-in's answers (standin.Handler, what bin/gemini-standin
// serves), on the eval's own worker and Firestore database:
//   - the report has a row per case, the confusion matrices, the agent's
//     and the baseline's totals side by side, the spread over the repeats,
//     and the stand-in warning above and below it, exit 0;
//   - the log rows the injection case declares reach the worker's
//     BigQuery sub-agent (the stand-in finds the login after failures in
//     them and says true_positive, while the baseline, without tools, says
//     undetermined), and are gone afterwards;
//   - each case starts on an emptied eval project, and the analyst's own
//     project is never touched.
func TestEvalScorecard(t *testing.T) {
	model.use(t, standin.Handler())
	env := evalWorker(t)
	ctx := t.Context()
	t.Setenv("FIRESTORE_EMULATOR_HOST", fsHost)

	// An alert of the analyst's own database, which the eval must leave alone.
	own, err := firestore.NewClient(ctx, testenv.Project)
	require.NoError(t, err)
	defer own.Close()
	mine, err := alerts.Parse([]byte(`{"rule_name": "e2e-eval-keep-me", "title": "the analyst's own alert", "src_ip": "192.0.2.99"}`))
	require.NoError(t, err)
	require.NoError(t, alerts.NewStore(own).Put(ctx, mine))
	// A stale alert in the eval database: the first case must not see it.
	evalFS, err := firestore.NewClientWithDatabase(ctx, testenv.Project, evalDatabase)
	require.NoError(t, err)
	defer evalFS.Close()
	stale, err := alerts.Parse([]byte(`{"rule_name": "e2e-eval-stale", "title": "left by an earlier eval", "src_ip": "198.51.100.23"}`))
	require.NoError(t, err)
	require.NoError(t, alerts.NewStore(evalFS).Put(ctx, stale))

	cases := []string{"examples/evals/cases/waf-sqli-cms-editor.yaml", "examples/evals/cases/guardduty-ssh-api-server-username-injection.yaml"}
	res := starterEnv(t, env, nil, "eval", "--cases", cases[0], "--cases", cases[1], "--repeat", "2", "--concurrency", "4")
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	out := res.stdout
	t.Logf("REPORT starter eval on the stand-in:\n%s", out)

	require.Regexp(t, `(?m)^Model: gemini-2\.5-flash \(gemini-api, http://127\.0\.0\.1:\d+\) — a local server`, out)
	require.Len(t, standInWarning.FindAllString(out, -1), 2, out)
	require.Regexp(t, `(?m)^Setup: starter .*, task queue investigations-eval, Firestore database investigator-eval, tools: `, out)
	above, below := strings.Index(out, "WARNING"), strings.LastIndex(out, "WARNING")
	table := strings.Index(out, "CASE ")
	require.True(t, above < table && table < below, "the warning comes above and below the report:\n%s", out)
	require.Regexp(t, `(?m)^CASE\s+EXPECTED\s+VERDICT\s+RIGHT\s+AGREE\s+EVIDENCE\s+BASELINE\s+STEPS\s+TOOL CALLS\s+MODEL CALLS\s+TOKENS\s+WALL\s+ACTIONS PROPOSED\s+ERROR$`, out)
	// The stand-in's one rule: a login after failures from the alert's
	// source is true_positive. The WAF case has no login; the injection
	// case's own rows hold one. The baseline sees no logs: undetermined.
	require.Regexp(t, `(?m)^waf-sqli-cms-editor\s+false_positive\s+undetermined ×2 ✗\s+0/2\s+100\.0%\s+\d\.\d/1\s+undetermined ×2 ✗\s+[1-9]\d*\s+[1-9]\d*\s+[1-9]\d*\s+[1-9]\d*\s+\S+s\s+-\s*$`, out)
	require.Regexp(t, `(?m)^guardduty-ssh-api-server-username-injection\s+true_positive\s+true_positive ×2\s+2/2\s+100\.0%\s+\d\.\d/3\s+undetermined ×2 ✗\s`, out)
	require.Contains(t, out, "confusion matrix, agent (rows: expected verdict; columns: the verdict given, in runs):\n")
	require.Contains(t, out, "confusion matrix, baseline (rows: expected verdict; columns: the verdict given, in runs):\n")
	require.Regexp(t, `(?m)^true_positive\s+2\s+0\s+0\s+0\s+0\s+2/2 \(100\.0%\)$`, out)
	require.Regexp(t, `(?m)^false_positive\s+0\s+0\s+0\s+2\s+0\s+0/2 \(0\.0%\)$`, out)
	require.Regexp(t, `(?m)^\s+AGENT\s+BASELINE \(alert only, no tools\)$`, out)
	require.Regexp(t, `(?m)^verdict accuracy\s+2/4 \(50\.0%\)\s+0/4 \(0\.0%\)$`, out)
	require.Regexp(t, `(?m)^balanced accuracy\s+50\.0% \(mean per-class recall\)\s+0\.0% \(mean per-class recall\)$`, out)
	require.Regexp(t, `(?m)^missed intrusions\s+0 of 2\s+0 of 2$`, out)
	require.Regexp(t, `(?m)^runs proposing actions\s+0 of 4\s+0 of 4$`, out)
	require.Regexp(t, `(?m)^evidence recall\s+\d+/8 \(\d+\.\d%\)\s+0/8 \(0\.0%\)$`, out)
	require.Regexp(t, `(?m)^mean tokens/run\s+[1-9]\d* \(over the 4 runs that concluded\)\s+[1-9]\d* \(over the 4 runs that concluded\)$`, out)
	require.Contains(t, out, "spread over 2 runs of each case (min / median / max over the 2 passes):\n")
	require.Regexp(t, `(?m)^verdict accuracy\s+50\.0% / 50\.0% / 50\.0%\s+0\.0% / 0\.0% / 0\.0%$`, out)
	require.Regexp(t, `(?m)^verdict agreement\s+2 of 2 cases unanimous; mean 100\.0%\s+2 of 2 cases unanimous; mean 100\.0%$`, out)
	require.Contains(t, res.stderr, "eval: 2 cases, 8 runs (4 at a time), each case on an emptied store\n")
	require.Contains(t, res.stderr, "eval: [8/8] ")

	// The baseline ran no step and called no tool: one model call each.
	var card struct {
		Cases []struct {
			Name     string `json:"name"`
			Baseline []struct {
				Steps, ToolCalls, ModelCalls int
				WorkflowID                   string `json:"workflow_id"`
			} `json:"baseline"`
		} `json:"cases"`
	}
	res = starterEnv(t, env, nil, "eval", "--cases", cases[0], "--json")
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &card), res.stdout)
	require.Len(t, card.Cases, 1)
	require.Len(t, card.Cases[0].Baseline, 1)
	b := card.Cases[0].Baseline[0]
	require.Regexp(t, `^eval-waf-sqli-cms-editor-baseline-\d{8}-\d{6}\.\d{3}$`, b.WorkflowID)
	for _, e := range history(t, b.WorkflowID).Events {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			require.Equal(t, "Conclude", a.GetActivityType().GetName(), "the baseline only concludes")
		}
	}

	// Isolation: the eval database holds only the last case's alert; the
	// analyst's database still holds theirs.
	left, err := alerts.NewStore(evalFS).List(ctx, 100)
	require.NoError(t, err)
	var ids []string
	for _, al := range left {
		ids = append(ids, al.ID)
	}
	require.NotContains(t, ids, stale.ID, "the stale alert was emptied away")
	require.Len(t, ids, 1, "only the last case's alert: %v", ids)
	_, err = alerts.NewStore(own).Get(ctx, mine.ID)
	require.NoError(t, err, "the analyst's own database is untouched")

	// The injection case's rows are gone from the BigQuery emulator.
	bq, err := bqtools.NewClient(ctx, testenv.Project, envValue(stack, "BIGQUERY_EMULATOR_HOST"))
	require.NoError(t, err)
	defer bq.Close()
	it, err := bq.Query("SELECT COUNT(*) FROM security_logs.auth_events WHERE host = 'api-server-prod-02' AND source_ip = '198.51.100.23'").Read(ctx)
	require.NoError(t, err)
	var row []bigquery.Value
	require.NoError(t, it.Next(&row))
	require.EqualValues(t, 0, row[0], "the case's rows were removed")
	require.ErrorIs(t, it.Next(&row), iterator.Done)
}

// TestEvalRefusesToWipe: without an eval database, starter eval refuses to
// empty anything and says how to run it; nothing is started.
func TestEvalRefusesToWipe(t *testing.T) {
	res := starter(t, nil, "eval", "--cases", "examples/evals/cases/waf-sqli-cms-editor.yaml")
	require.Equal(t, 1, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Contains(t, res.stderr, `error: --isolate empties Firestore database "(default)" before each case, and it empties only a database whose ID ends in "-eval"`)
	require.Empty(t, res.stdout)
}

// TestEvalFailures: a case whose workflow fails and a case that never
// concludes are rows with their errors, and starter eval exits 1 with one
// sentence; the unfinished investigation is cancelled, not left running.
func TestEvalFailures(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	auto := standin.Handler()
	model.use(t, func(r *geminitest.Request) geminitest.Reply {
		text := r.SystemText() + r.Text()
		switch {
		case strings.Contains(text, "e2e-eval-rejected"):
			return geminitest.Error(400, "Request contains an invalid argument.", "")
		case strings.Contains(text, "e2e-eval-hangs"):
			<-release // the model never answers while the test runs
			// Not retryable: a run the eval failed to cancel ends here instead
			// of retrying into the next test's scripted model.
			return geminitest.Error(400, "e2e: released", "")
		}
		return auto(r)
	})
	env := evalWorker(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	write("rejected.json", `{"rule_name": "e2e-eval-rejected", "title": "e2e-eval-rejected: the model refuses this alert", "severity": "low", "src_ip": "192.0.2.44"}`)
	write("hangs.json", `{"rule_name": "e2e-eval-hangs", "title": "e2e-eval-hangs: the model never answers", "severity": "low", "src_ip": "192.0.2.45"}`)
	rejected := write("rejected.yaml", "alert: rejected.json\nexpected_verdict: true_positive\nwhy: the model refuses it\nevidence: [192.0.2.44]\n")
	hangs := write("hangs.yaml", "alert: hangs.json\nexpected_verdict: benign\nwhy: the model never answers\nevidence: [192.0.2.45]\n")

	res := starterEnv(t, env, nil, "eval", "--cases", rejected)
	require.Equal(t, 1, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Regexp(t, `(?m)^rejected\s+true_positive\s+-\s+-\s+-\s+-\s+-\s+-\s+-\s+\S+\s+-\s+the investigation failed: planning failed: .*400.*; baseline: the investigation failed: writing the conclusion failed: .*400`, res.stdout)
	require.Regexp(t, `(?m)^verdict accuracy\s+0/1 \(0\.0%\)\s+0/1 \(0\.0%\)$`, res.stdout)
	require.Regexp(t, `(?m)^true_positive\s+0\s+0\s+0\s+0\s+1\s+0/1 \(0\.0%\)$`, res.stdout, "a failed run is a column of the confusion matrix")
	require.Regexp(t, `(?m)^mean tokens/run\s+n/a \(no run concluded\)`, res.stdout)
	require.Equal(t, "error: 2 of 2 runs did not conclude (see the ERROR column)\n", lastLine(res.stderr))

	res = starterEnv(t, env, nil, "eval", "--cases", hangs, "--timeout", "5s", "--json", "--baseline=false")
	require.Equal(t, 1, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	var card struct {
		Warning string `json:"warning"`
		Cases   []struct {
			Name string `json:"name"`
			Runs []struct {
				WorkflowID string `json:"workflow_id"`
				Error      string `json:"error"`
			} `json:"runs"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &card), res.stdout)
	require.Regexp(t, standInWarning, card.Warning)
	require.Len(t, card.Cases, 1)
	require.Equal(t, "hangs", card.Cases[0].Name)
	require.Len(t, card.Cases[0].Runs, 1)
	c := card.Cases[0].Runs[0]
	require.Equal(t, "no conclusion within 5s; investigation "+c.WorkflowID+" was cancelled", c.Error)
	require.Regexp(t, `^eval-hangs-\d{8}-\d{6}\.\d{3}$`, c.WorkflowID)
	cancelled := false
	for _, e := range history(t, c.WorkflowID).Events {
		cancelled = cancelled || e.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
	}
	require.True(t, cancelled, "starter eval asked Temporal to cancel the investigation it gave up on")
	require.Equal(t, "error: 1 of 1 runs did not conclude (see the ERROR column)\n", lastLine(res.stderr))
}

// lastLine returns the last line of s, with its newline.
func lastLine(s string) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n")+"\n", "\n")
	return lines[len(lines)-2]
}
