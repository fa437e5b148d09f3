package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/gemini/standin"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/secops-agent/investigator/investigation"
)

// The last field, in key order, of the large alert: only paging reaches it.
const lastFieldValue = "exfiltration to 203.0.113.250 confirmed by the proxy"

// largeAlertFile writes an alert of over 200 KiB whose compact JSON ends
// with the field zz_last, and returns its path and parsed form.
func largeAlertFile(t *testing.T) (string, alerts.Alert) {
	t.Helper()
	var events []any
	for i := range 2000 {
		events = append(events, map[string]any{
			"src": fmt.Sprintf("10.3.%d.%d", i/256, i%256),
			"msg": fmt.Sprintf("event %d: routine connection to host-%d.corp.example.com, \"nothing\" of note", i, i),
		})
	}
	raw, err := json.Marshal(map[string]any{"rule": "beaconing", "severity": "high", "events": events, "zz_last": lastFieldValue})
	require.NoError(t, err)
	require.Greater(t, len(raw), 200<<10)
	al, err := alerts.Parse(raw)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "large-alert.json")
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	return path, al
}

// TestLargeAlertIsReadToItsLastFieldThroughPaging: a 200 KiB alert, whose
// prompt shows its indicators and says get_alert pages the rest, is read
// page by page through the real worker (CallTool with the run's 16 KiB
// cap) by a model that follows next_offset, to its last field; no page is
// cut, and the pages put together are the alert's data.
func TestLargeAlertIsReadToItsLastFieldThroughPaging(t *testing.T) {
	file, al := largeAlertFile(t)
	whole, err := prompt.MarshalJSON(al.Data, "")
	require.NoError(t, err)

	var (
		mu         sync.Mutex
		pages      strings.Builder
		pageSizes  []int
		planPrompt string
		truncated  bool
	)
	model.use(t, func(r *geminitest.Request) geminitest.Reply {
		switch r.Phase() {
		case geminitest.PhasePlan:
			planPrompt = r.Text()
			return geminitest.JSON(map[string]any{
				"objective": "Find what the alert's last field says.",
				"steps": []map[string]any{{"id": "s1", "description": "Read the whole alert, page by page.",
					"tools": []string{"get_alert"}, "expected": "the alert's last field"}},
			})
		case geminitest.PhaseToolCall, geminitest.PhaseToolResult:
			mu.Lock()
			defer mu.Unlock()
			args := map[string]any{"id": al.ID}
			for _, fr := range r.FunctionResponses() {
				raw, _ := json.Marshal(fr.Response)
				pageSizes = append(pageSizes, len(raw))
				truncated = truncated || fr.Response["truncated"] == true
				p, _ := fr.Response["page"].(string)
				pages.WriteString(p)
				next, more := fr.Response["next_offset"].(float64)
				if !more {
					_, last, _ := strings.Cut(pages.String(), `"zz_last":"`)
					return geminitest.Text("The alert's last field, zz_last, says: " + strings.TrimSuffix(last, `"}`))
				}
				args["offset"] = next
			}
			return geminitest.Calls(&genai.FunctionCall{Name: "get_alert", Args: args})
		case geminitest.PhaseReflect:
			return geminitest.JSON(map[string]any{"achieved": true, "insights": []string{"The last field was read."}, "plan_updates": []any{}})
		case geminitest.PhaseConclude:
			return geminitest.Conclusion("## Summary\nThe last field says: "+lastFieldValue, "true_positive", "medium")
		}
		return geminitest.Error(500, "e2e: unexpected phase "+r.Phase(), "")
	})
	res := starter(t, nil, "investigate", "--alert", file, "--max-iterations", "40")
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)

	require.Contains(t, planPrompt, "Call get_alert with the alert ID for the complete data: it comes in pages")
	require.NotContains(t, planPrompt, "<<<DATA alert>>>", "a 200 KiB alert is not shown whole")
	require.False(t, truncated, "no page was cut by the tool-result cap")
	require.Equal(t, string(whole), pages.String(), "the pages put together are the alert's data")
	for i, n := range pageSizes {
		require.LessOrEqual(t, n, investigation.DefaultMaxToolResultBytes, "page %d fits the cap", i+1)
	}
	require.Contains(t, res.stdout, "The alert's last field, zz_last, says: "+lastFieldValue)
	require.Contains(t, res.stdout, "-> get_alert "+al.ID+" offset ")
	require.Contains(t, res.stdout, "VERDICT  true_positive (medium confidence)")
	t.Logf("REPORT large alert: %d bytes of data read in %d get_alert pages (largest result %d bytes)", len(whole), len(pageSizes), slicesMax(pageSizes))
}

func slicesMax(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// TestRealWorldAlertIsInvestigatedToAConclusion: a Chinese WAF export (an
// anonymised attacker address, an HTTP request with CR LF, a token in the
// URL) is accepted, recognised, stored with its indicator keys, and
// investigated to a verdict by the offline stand-in.
func TestRealWorldAlertIsInvestigatedToAConclusion(t *testing.T) {
	const file = "examples/alerts/waf-sqli-cn.json"
	raw, err := os.ReadFile(filepath.Join("..", file))
	require.NoError(t, err)
	al, err := alerts.Parse(raw)
	require.NoError(t, err)
	require.NoError(t, testenv.ResetFirestore(fsHost, testenv.Project))
	model.use(t, standin.Handler())
	res := starter(t, nil, "investigate", "--alert", file)
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	t.Logf("REPORT real-world alert stdout:\n%s", res.stdout)
	require.Contains(t, res.stdout, "Investigating alert "+al.ID)
	require.Contains(t, res.stdout, "==================== CONCLUSION ====================")
	require.Regexp(t, `VERDICT  (true_positive|benign|false_positive|undetermined) \(\w+ confidence\)`, res.stdout)

	show := starter(t, nil, "alert", "show", al.ID)
	require.Equal(t, 0, show.code, show.stderr)
	require.Contains(t, show.stdout, `"source": "generic"`)
	require.Contains(t, show.stdout, `"title": "SQL注入攻击"`)
	require.Contains(t, show.stdout, `"ipmask:*.*.7.82"`, "the anonymised address is stored as a partial key, not an IP")
	require.NotContains(t, show.stdout, `"ip:7.82`)
}

// TestDeeplyNestedAlertIsRefusedAtOnce: a 1 MiB alert nested 10,000 deep
// (98-byte keys), which made the starter peak at 4.4 GiB before it
// answered, is refused with one sentence; no workflow starts.
func TestDeeplyNestedAlertIsRefusedAtOnce(t *testing.T) {
	var b bytes.Buffer
	open := `{"` + strings.Repeat("k", 98) + `":`
	for range 10000 {
		b.WriteString(open)
	}
	b.WriteString("1" + strings.Repeat("}", 10000))
	require.LessOrEqual(t, b.Len(), alerts.MaxBytes)
	file := filepath.Join(t.TempDir(), "deep.json")
	require.NoError(t, os.WriteFile(file, b.Bytes(), 0o644))
	model.use(t, nil)

	res := starter(t, nil, "investigate", "--alert", file)
	require.Equal(t, 1, res.code, res.stdout)
	require.True(t, strings.HasPrefix(res.stderr, "error: "+file+": the alert is nested more than 20 levels deep at "), res.stderr)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(res.stderr), "\n")+1, "one line: %q", res.stderr)
	require.Less(t, len(res.stderr), 400+len(file))
	require.NotContains(t, res.stdout, "Workflow ID")
	t.Logf("REPORT deep alert: %d bytes refused in %s: %s", b.Len(), res.took.Round(1e6), strings.TrimSpace(res.stderr))
}
