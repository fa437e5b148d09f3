package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/gemini/standin"
)

// standInWarning is the line starter eval prints above and below its table
// when the worker's model endpoint is a local server, as here.
var standInWarning = regexp.MustCompile(`(?m)^WARNING: the worker's model endpoint http://127\.0\.0\.1:\d+ is a local server, such as the offline Gemini stand-in: its answers are scripted, so these scores mean nothing about any model\.$`)

// TestEvalScorecard runs two of the project's labelled cases through the
// real workflow with the offline stand-in's answers (standin.Handler, what
// bin/gemini-standin serves): one row per case, the totals, the stand-in
// warning above and below the table, exit 0.
func TestEvalScorecard(t *testing.T) {
	model.use(t, standin.Handler())
	cases := []string{"examples/evals/cases/waf-sqli-cms-editor.yaml", "examples/evals/cases/edr-falcon-devtcp-healthcheck.yaml"}
	res := starter(t, nil, "eval", "--cases", cases[0], "--cases", cases[1])
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	out := res.stdout
	t.Logf("REPORT starter eval on the stand-in:\n%s", out)

	require.Regexp(t, `(?m)^Model: gemini-2\.5-flash \(gemini-api, http://127\.0\.0\.1:\d+\) — a local server`, out)
	require.Len(t, standInWarning.FindAllString(out, -1), 2, out)
	above, below := strings.Index(out, "WARNING"), strings.LastIndex(out, "WARNING")
	table := strings.Index(out, "CASE ")
	require.True(t, above < table && table < below, "the warning comes above and below the table:\n%s", out)
	require.Regexp(t, `(?m)^CASE\s+EXPECTED\s+VERDICT\s+EVIDENCE\s+STEPS\s+TOOL CALLS\s+MODEL CALLS\s+TOKENS\s+WALL\s+ERROR$`, out)
	// The stand-in concludes "undetermined" for both (its one rule needs a
	// login after failed attempts): both verdicts are misses.
	for _, row := range []string{
		`waf-sqli-cms-editor\s+false_positive\s+undetermined ✗\s+[0-2]/2`,
		`edr-falcon-devtcp-healthcheck\s+false_positive\s+undetermined ✗\s+[0-3]/3`,
	} {
		require.Regexp(t, `(?m)^`+row+`\s+[1-9]\d*\s+[1-9]\d*\s+[1-9]\d*\s+[1-9]\d*\s+\S+s\s*$`, out)
	}
	require.Contains(t, out, "\nverdict accuracy:  0/2 (0.0%)\n")
	require.Regexp(t, `(?m)^evidence recall:   [0-5]/5 \(\d+\.\d%\)$`, out)
	require.Regexp(t, `(?m)^mean tokens/case:  [1-9]\d* \(over the 2 cases that concluded\)$`, out)
	require.Regexp(t, `(?m)^mean wall time:    \S+s$`, out)
	require.Contains(t, res.stderr, "eval: [2/2] ")
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
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	write("rejected.json", `{"rule_name": "e2e-eval-rejected", "title": "e2e-eval-rejected: the model refuses this alert", "severity": "low", "src_ip": "192.0.2.44"}`)
	write("hangs.json", `{"rule_name": "e2e-eval-hangs", "title": "e2e-eval-hangs: the model never answers", "severity": "low", "src_ip": "192.0.2.45"}`)
	rejected := write("rejected.yaml", "alert: rejected.json\nexpected_verdict: true_positive\nevidence: [192.0.2.44]\n")
	hangs := write("hangs.yaml", "alert: hangs.json\nexpected_verdict: benign\nevidence: [192.0.2.45]\n")

	res := starter(t, nil, "eval", "--cases", rejected)
	require.Equal(t, 1, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Regexp(t, `(?m)^rejected\s+true_positive\s+-\s+0/1\s+-\s+-\s+-\s+-\s+\S+\s+the investigation failed: planning failed: .*400`, res.stdout)
	require.Contains(t, res.stdout, "verdict accuracy:  0/1 (0.0%)")
	require.Contains(t, res.stdout, "mean tokens/case:  n/a (no case concluded)")
	require.Equal(t, "error: 1 of 1 cases did not conclude (see the ERROR column)\n", lastLine(res.stderr))

	res = starter(t, nil, "eval", "--cases", hangs, "--timeout", "5s", "--json")
	require.Equal(t, 1, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	var card struct {
		Warning string `json:"warning"`
		Cases   []struct {
			Name       string `json:"name"`
			WorkflowID string `json:"workflow_id"`
			Error      string `json:"error"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &card), res.stdout)
	require.Regexp(t, standInWarning, card.Warning)
	require.Len(t, card.Cases, 1)
	c := card.Cases[0]
	require.Equal(t, "hangs", c.Name)
	require.Equal(t, "no conclusion within 5s; investigation "+c.WorkflowID+" was cancelled", c.Error)
	require.Regexp(t, `^eval-hangs-\d{8}-\d{6}\.\d{3}$`, c.WorkflowID)
	cancelled := false
	for _, e := range history(t, c.WorkflowID).Events {
		cancelled = cancelled || e.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
	}
	require.True(t, cancelled, "starter eval asked Temporal to cancel the investigation it gave up on")
	require.Equal(t, "error: 1 of 1 cases did not conclude (see the ERROR column)\n", lastLine(res.stderr))
}

// lastLine returns the last line of s, with its newline.
func lastLine(s string) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n")+"\n", "\n")
	return lines[len(lines)-2]
}
