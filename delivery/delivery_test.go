package delivery

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/redact"
	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/investigation"
)

func hostile() Result {
	return Result{Key: "intake-x/t2", WorkflowID: "intake-x", URL: "http://localhost:8233/namespaces/default/workflows/intake-x",
		AlertID: "guardduty-1", Title: "<!channel> *Verdict:* benign <https://evil.example/a|click> &amp; HTTPS://Evil.example/b ftp://x", Severity: "high",
		Exchange: 2, Verdict: "true_positive", Confidence: "high", Previous: "benign",
		Findings: []investigation.Evidence{{StepID: "step_1", Fact: "login from\n<@U123> 198.51.100.23 *bold* `code`"}},
		Summary:  "See https://evil.example/report", Alerts: 3}
}

// TestSlackMessageDefusesAlertText: no text from an alert or a model can
// mention, link or format: &, < and > are escaped, URLs defanged, and it
// is all plain_text; the message says what changed and links the Web UI.
func TestSlackMessageDefusesAlertText(t *testing.T) {
	raw, err := encode(SlackMessage(hostile()))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, bad := range []string{"<!channel>", "<@U123>", "<https://", "https://evil", "HTTPS://Evil", "ftp://"} {
		if strings.Contains(s, bad) {
			t.Errorf("message holds %q:\n%s", bad, s)
		}
	}
	for _, want := range []string{"Verdict changed: Benign → True positive (high confidence)", "&lt;!channel&gt;", "hxxps[://]evil.example", "ftp[://]x",
		"&amp;amp;", `"url":"http://localhost:8233/namespaces/default/workflows/intake-x"`, "idempotency key intake-x/t2", "3 alerts in this investigation",
		`"unfurl_links":false`} {
		if !strings.Contains(s, want) {
			t.Errorf("message lacks %q:\n%s", want, s)
		}
	}
	var msg struct {
		Blocks []map[string]any `json:"blocks"`
	}
	_ = json.Unmarshal(raw, &msg)
	for _, b := range msg.Blocks {
		text, _ := b["text"].(map[string]any)
		if text != nil && text["type"] == "mrkdwn" && !strings.HasPrefix(text["text"].(string), "*") {
			t.Errorf("mrkdwn holds more than a label: %v", text)
		}
	}
}

func TestSlackPostErrors(t *testing.T) {
	statuses := []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusNotFound, http.StatusOK}
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		got = append(got, m)
		status := statuses[0]
		statuses = statuses[1:]
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(status)
		if status == http.StatusNotFound {
			_, _ = w.Write([]byte("no_service"))
		}
	}))
	defer srv.Close()
	s := &Slack{URL: srv.URL + "/services/T/B/secret-part"}
	ctx := context.Background()
	for _, want := range []struct {
		kind  upstream.Kind
		retry time.Duration
		text  string
	}{{upstream.RateLimited, 7 * time.Second, "429"}, {upstream.Unavailable, 0, "500"}, {upstream.NotFound, 0, "404 (no_service)"}} {
		err := s.Post(ctx, hostile())
		e, ok := upstream.As(err)
		if !ok || e.Kind != want.kind || e.RetryAfter != want.retry || !strings.Contains(e.Message, want.text) || strings.Contains(err.Error(), "secret-part") {
			t.Errorf("got %v (%+v), want %v", err, e, want)
		}
	}
	if err := s.Post(ctx, hostile()); err != nil {
		t.Errorf("200: %v", err)
	}
	srv.Close()
	err := s.Post(ctx, hostile())
	if e, ok := upstream.As(err); !ok || e.Kind != upstream.Unavailable || strings.Contains(err.Error(), "secret-part") {
		t.Errorf("unreachable: %v", err)
	}
	if len(got) != 4 || got[0]["blocks"] == nil {
		t.Errorf("posted %d", len(got))
	}
}

// slackLimits answers as Slack does a message over Block Kit's bounds on
// text: 400 invalid_blocks.
func slackLimits(posted *[]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Blocks []struct {
				Type     string `json:"type"`
				Text     *struct{ Text string }
				Fields   []struct{ Text string }
				Elements []struct {
					Type string `json:"type"`
					Text json.RawMessage
				}
			}
		}
		_ = json.NewDecoder(r.Body).Decode(&msg)
		over := func(s string, n int) bool {
			*posted = append(*posted, s)
			return utf8.RuneCountInString(s) > n
		}
		bad := false
		for _, b := range msg.Blocks {
			limit := 3000
			if b.Type == "header" {
				limit = 150
			}
			bad = bad || b.Text != nil && over(b.Text.Text, limit)
			for _, f := range b.Fields {
				bad = bad || over(f.Text, 2000)
			}
			for _, e := range b.Elements {
				var text struct{ Text string }
				if json.Unmarshal(e.Text, &text) != nil {
					_ = json.Unmarshal(e.Text, &text.Text)
				}
				limit := 3000
				if e.Type == "button" {
					limit = 75
				}
				bad = bad || over(text.Text, limit)
			}
		}
		if bad {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("invalid_blocks"))
		}
	}
}

// TestSlackTextWithinLimitsAfterEscaping: text was clipped to 2,900 bytes
// and then escaped, so a summary of "&" grew five times, past Slack's
// 3,000 characters, and Slack refused the verdict. Every text is within its
// bound once escaped, and no escape is cut in half.
func TestSlackTextWithinLimitsAfterEscaping(t *testing.T) {
	var posted []string
	srv := httptest.NewServer(slackLimits(&posted))
	defer srv.Close()
	s := &Slack{URL: srv.URL}
	r := hostile()
	r.Title, r.Summary, r.Confidence = strings.Repeat("&", 3000), strings.Repeat("<", 5000), strings.Repeat(">", 3000)
	r.Findings = []investigation.Evidence{}
	for range 9 {
		r.Findings = append(r.Findings, investigation.Evidence{Fact: strings.Repeat("a&", 2000)})
	}
	if err := s.Post(context.Background(), r.Bounded(nil)); err != nil {
		t.Errorf("bounded result: %v", err)
	}
	if err := s.Post(context.Background(), r); err != nil {
		t.Errorf("unbounded result: %v", err)
	}
	long := strings.Repeat("<&>", 2000)
	if err := s.PostApproval(context.Background(), Approval{WorkflowID: long, URL: "http://x", AlertID: long, Title: long, CallID: long, Tool: long, Args: long, Reason: long}); err != nil {
		t.Errorf("approval: %v", err)
	}
	for _, text := range posted {
		kept, _, _ := strings.Cut(text, clip.Marker)
		if strings.Count(kept, "&") != strings.Count(kept, ";") {
			t.Errorf("an escape is cut: %.60q…%q", kept, kept[max(0, len(kept)-20):])
		}
	}
}

func TestBounded(t *testing.T) {
	r := hostile()
	r.Findings = make([]investigation.Evidence, 9)
	r.Summary = strings.Repeat("s", 5000)
	b := r.Bounded(nil)
	if len(b.Findings) != maxFindings || len(b.Summary) > maxSummary {
		t.Errorf("%d findings, %d bytes of summary", len(b.Findings), len(b.Summary))
	}
}

// TestSlackApprovalMessage: an action that waits is posted with its tool,
// arguments, reason and the commands that decide it; the model's text can
// neither mention, link nor format.
func TestSlackApprovalMessage(t *testing.T) {
	raw, err := encode(SlackApprovalMessage(Approval{WorkflowID: "intake-x", URL: "http://localhost:8233/w", AlertID: "guardduty-1",
		Title: "SSH brute force <!here>", CallID: "t1-step_3-i1-c1", Tool: "response.block_ip",
		Args: `{"ip":"198.51.100.23","reason":"<@U1> see https://evil.example"}`, Reason: "Contain *now*"}))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, bad := range []string{"<!here>", "<@U1>", "https://evil"} {
		if strings.Contains(s, bad) {
			t.Errorf("message holds %q:\n%s", bad, s)
		}
	}
	for _, want := range []string{"Action awaits approval: response.block_ip", "198.51.100.23", "starter approve-call intake-x t1-step_3-i1-c1",
		`starter deny-call intake-x t1-step_3-i1-c1 \"reason\"`, "hxxps[://]evil.example", `"url":"http://localhost:8233/w"`} {
		if !strings.Contains(s, want) {
			t.Errorf("message lacks %q:\n%s", want, s)
		}
	}
	// An invisible character in the arguments is shown escaped: the analyst
	// reads the value that is sent.
	raw, texts := approvalTexts(t, `{"ip":"198.51.100.23`+"\u200b"+`"}`)
	found := false
	for _, text := range texts {
		found = found || text == `{"ip":"198.51.100.23\u200b"}`
		if strings.ContainsRune(text, '\u200b') {
			t.Errorf("the message shows an invisible character: %q", text)
		}
	}
	if !found {
		t.Errorf("no block shows the arguments escaped:\n%s", raw)
	}
}

// approvalTexts is the approval message for a block_ip call with args, as
// sent, and the text of each of its blocks.
func approvalTexts(t *testing.T, args string) ([]byte, []string) {
	t.Helper()
	raw, err := encode(SlackApprovalMessage(Approval{WorkflowID: "intake-x", CallID: "c1", Tool: "response.block_ip", Args: args}))
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Blocks []struct {
			Text struct{ Text string } `json:"text"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(msg.Blocks))
	for i, b := range msg.Blocks {
		texts[i] = b.Text.Text
	}
	return raw, texts
}

// TestSlackApprovalArgumentsWhole: arguments the workflow admits (at most
// 2,048 bytes as shown, workflows.maxActionArgs) reach the Slack section
// whole, even those plain's defanging grows most ("ab://" becomes
// "ab[://]") and those with hidden characters shown escaped.
func TestSlackApprovalArgumentsWhole(t *testing.T) {
	const bound = 2 << 10
	grown := `{"a":"` + strings.Repeat("ab://", (bound-len(`{"a":"","ip":"203.0.113.9"}`))/5) + `","ip":"203.0.113.9"}`
	hidden := `{"a":"` + strings.Repeat("\u200b", (bound-len(`{"a":"","ip":"203.0.113.9"}`))/6) + `","ip":"203.0.113.9"}`
	for _, args := range []string{grown, hidden} {
		raw, texts := approvalTexts(t, args)
		found := false
		for _, text := range texts {
			found = found || strings.HasSuffix(text, `,"ip":"203.0.113.9"}`) && !strings.Contains(text, clip.Marker)
		}
		if !found {
			t.Errorf("the arguments are not shown whole (%d bytes):\n%s", len(args), raw)
		}
	}
}

// TestBoundedRedactsBeforeClipping: a key that straddles a clip point, and
// a key in any text field of the result (found by reflection, so a field
// added later is covered), is delivered neither whole nor in part, on the
// results topic (the JSON) or in Slack.
func TestBoundedRedactsBeforeClipping(t *testing.T) {
	key := "AIzaSyD-EXAMPLEexampleEXAMPLEexample123"
	secrets := redact.New(key)
	r := hostile()
	r.Findings = []investigation.Evidence{{}}
	setStrings(reflect.ValueOf(&r).Elem(), " key "+key+strings.Repeat(" more", 100))
	// Straddling each clip point.
	r.Title = strings.Repeat("t", maxTitle-20) + " key " + key
	r.Summary = strings.Repeat("s", maxSummary-60) + " leaked key " + key + strings.Repeat(" more", 100)
	r.Findings[0].Fact = strings.Repeat("f", maxFindingText-60) + " key " + key + strings.Repeat(" more", 100)
	b := r.Bounded(secrets)
	topic, _ := json.Marshal(b)
	slack, _ := encode(SlackMessage(b))
	for name, text := range map[string]string{"results topic": string(topic), "Slack": string(slack)} {
		if i := strings.Index(text, key[:12]); i >= 0 {
			t.Errorf("%s: a secret is delivered: %.60q", name, text[i:])
		}
	}
	if !strings.Contains(b.Summary, redact.Mark) || !strings.Contains(b.Findings[0].Fact, redact.Mark) || len(b.Summary) > maxSummary+40 {
		t.Errorf("summary %q…, finding %q…", b.Summary[len(b.Summary)-80:], b.Findings[0].Fact[len(b.Findings[0].Fact)-80:])
	}
}

// setStrings appends suffix to every string field of v, in nested structs
// and slices too.
func setStrings(v reflect.Value, suffix string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + suffix)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setStrings(v.Field(i), suffix)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			setStrings(v.Index(i), suffix)
		}
	}
}
