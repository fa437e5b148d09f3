package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/internal/upstream"
)

// Slack posts results to an incoming webhook. The URL is a secret: it is
// read from SLACK_WEBHOOK_URL by the worker, never put in history, and
// never named in an error.
type Slack struct {
	URL  string
	HTTP *http.Client
}

// Post sends the result's message. A 429 carries Retry-After; 5xx and
// network failures are Unavailable; other 4xx (a revoked or mistyped
// webhook, a refused payload) are not worth retrying.
func (s *Slack) Post(ctx context.Context, r Result) error {
	return s.post(ctx, SlackMessage(r))
}

// PostApproval sends the message that an action waits for the analyst.
func (s *Slack) PostApproval(ctx context.Context, a Approval) error {
	return s.post(ctx, SlackApprovalMessage(a))
}

func (s *Slack) post(ctx context.Context, msg map[string]any) error {
	body, err := encode(msg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return &upstream.Error{Service: "Slack", Kind: upstream.BadRequest, Message: "the Slack webhook URL (SLACK_WEBHOOK_URL) is not a valid URL"}
	}
	req.Header.Set("Content-Type", "application/json")
	hc := s.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		kind := upstream.Unavailable
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			kind = upstream.Timeout
		}
		// The URL (the secret) is in *url.Error's text: say only what failed.
		return &upstream.Error{Service: "Slack", Kind: kind, Message: "the Slack webhook did not answer: " + kind.String()}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	kind, ok := upstream.StatusKind(resp.StatusCode)
	if !ok {
		kind = upstream.BadRequest
	}
	return &upstream.Error{Service: "Slack", Kind: kind, Status: resp.StatusCode,
		RetryAfter: upstream.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
		Message:    fmt.Sprintf("the Slack webhook answered %d %s", resp.StatusCode, slackReason(answer))}
}

// encode writes JSON without Go's HTML escapes (\u003c for <): the text is
// escaped for Slack already, and stays readable in Slack's logs.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return bytes.TrimSpace(b.Bytes()), err
}

// slackReason is Slack's one-word error ("invalid_payload", "no_service"),
// or nothing when the answer is something else.
func slackReason(b []byte) string {
	s := strings.TrimSpace(string(b))
	if regexp.MustCompile(`^[a-z_]{1,40}$`).MatchString(s) {
		return "(" + s + ")"
	}
	return ""
}

// Verdict words for people.
var verdictWords = map[string]string{
	"true_positive": "True positive", "benign": "Benign", "false_positive": "False positive", "undetermined": "Undetermined",
}

func verdictWord(v string) string {
	if w, ok := verdictWords[v]; ok {
		return w
	}
	return "Unknown verdict"
}

// SlackMessage is the result as a Block Kit message: a header with the
// verdict and confidence, the alert's title, severity and source, the top
// findings, the summary, a button to the Web UI and the idempotency key.
// Every text from an alert or a model is a plain_text object, cleaned by
// plain and clipped to Slack's bound (plainText); the only mrkdwn holds the
// message's own labels.
func SlackMessage(r Result) map[string]any {
	head := fmt.Sprintf("%s (%s confidence)", verdictWord(r.Verdict), r.Confidence)
	if r.Previous != "" && r.Previous != r.Verdict {
		head = fmt.Sprintf("Verdict changed: %s → %s (%s confidence)", verdictWord(r.Previous), verdictWord(r.Verdict), r.Confidence)
	}
	label := func(s string) map[string]any { return map[string]any{"type": "mrkdwn", "text": s, "verbatim": true} }
	blocks := []any{
		map[string]any{"type": "header", "text": plainText(head, maxHeaderText)},
		map[string]any{"type": "section", "text": plainText(r.Title, maxSectionText)},
		map[string]any{"type": "section", "fields": []any{
			label("*Verdict*"), plainText(verdictWord(r.Verdict), maxFieldText),
			label("*Confidence*"), plainText(r.Confidence, maxFieldText),
			label("*Severity*"), plainText(r.Severity, maxFieldText),
			label("*Alert*"), plainText(r.AlertID, maxFieldText),
		}},
	}
	if len(r.Findings) > 0 {
		var b strings.Builder
		for i, f := range r.Findings {
			fmt.Fprintf(&b, "%d. %s\n", i+1, oneLine(f.Fact))
		}
		blocks = append(blocks, map[string]any{"type": "section", "text": label("*Top findings*")},
			map[string]any{"type": "section", "text": plainText(b.String(), maxSectionText)})
	}
	if r.Summary != "" {
		blocks = append(blocks, map[string]any{"type": "section", "text": plainText(r.Summary, maxSectionText)})
	}
	if r.Alerts > 1 {
		blocks = append(blocks, map[string]any{"type": "context", "elements": []any{plainText(fmt.Sprintf("%d alerts in this investigation", r.Alerts), maxSectionText)}})
	}
	if strings.HasPrefix(r.URL, "http://") || strings.HasPrefix(r.URL, "https://") {
		blocks = append(blocks, map[string]any{"type": "actions", "elements": []any{map[string]any{
			"type": "button", "text": plainText("Open in the Temporal Web UI", maxButtonText), "url": r.URL, "action_id": "open_web_ui"}}})
	}
	blocks = append(blocks, map[string]any{"type": "context", "elements": []any{plainText("workflow "+r.WorkflowID+" · idempotency key "+r.Key, maxSectionText)}})
	return map[string]any{
		// The notification text: the same words, for clients without blocks.
		"text":   plainClipped(head+": "+oneLine(r.Title), maxSectionText),
		"blocks": blocks,
		// No automatic linking of names or URLs anywhere in the message.
		"unfurl_links": false, "unfurl_media": false,
	}
}

// Slack's bounds on a plain_text object, in characters (Block Kit): a
// header's, a section's (and a context element's), a field's, a button's.
const (
	maxHeaderText  = 150
	maxSectionText = 3000
	maxFieldText   = 2000
	maxButtonText  = 75
)

// plainText is s, cleaned by plain, as a plain_text object within n
// characters.
func plainText(s string, n int) map[string]any {
	return map[string]any{"type": "plain_text", "text": plainClipped(s, n), "emoji": false}
}

// plainClipped is plain(s) in at most n bytes, so n characters. It clips
// after escaping, which makes text up to five times longer ("&" is
// "&amp;"): clipped first, a summary of 2,000 "&" was 10,000 characters and Slack
// refused the message. The cut never falls inside an escape.
func plainClipped(s string, n int) string {
	return clip.StringAt(plain(s), n, outsideEscape)
}

// outsideEscape says a cut before s[i] leaves plain's escapes whole: each
// is at most 5 bytes and begins with an "&", and plain's text has no other.
func outsideEscape(s string, i int) bool {
	from := max(0, i-4)
	amp := strings.LastIndexByte(s[from:i], '&')
	return amp < 0 || strings.IndexByte(s[from+amp:i], ';') >= 0
}

// plain makes untrusted text harmless in a Slack message: &, < and > are
// escaped (Slack's control characters for links and mentions, <!channel>,
// <@U123>, <https://x|y>), and URLs are defanged (termtext.Defang: https://x
// becomes hxxps[://]x), so nothing in an alert or a conclusion is a link, a
// mention or formatting, whatever the text object.
func plain(s string) string {
	return termtext.Defang(strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s))
}

// oneLine keeps a finding on its line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Approval is an action that waits for the analyst: a call of a tool that
// acts (an MCP tool not marked read-only), with how to decide it.
type Approval struct {
	WorkflowID string `json:"workflow_id"`
	URL        string `json:"url"`
	AlertID    string `json:"alert_id"`
	Title      string `json:"title"`
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	// Args and Reason come from the model: shown as plain text only.
	Args   string `json:"args"`
	Reason string `json:"reason"`
}

// SlackApprovalMessage says that an action waits: the tool, its arguments,
// the step's reason, the alert, and the commands that approve or deny it.
// Model and alert text is plain_text, cleaned by plain.
func SlackApprovalMessage(a Approval) map[string]any {
	label := func(s string) map[string]any { return map[string]any{"type": "mrkdwn", "text": s, "verbatim": true} }
	head := "Action awaits approval: " + a.Tool
	blocks := []any{
		map[string]any{"type": "header", "text": plainText(head, maxHeaderText)},
		map[string]any{"type": "section", "text": plainText(a.Title, maxSectionText)},
		map[string]any{"type": "section", "fields": []any{
			label("*Tool*"), plainText(a.Tool, maxFieldText),
			label("*Call*"), plainText(a.CallID, maxFieldText),
			label("*Alert*"), plainText(a.AlertID, maxFieldText),
		}},
		map[string]any{"type": "section", "text": label("*Arguments*")},
		// Invisible characters shown escaped. Never clipped: the workflow
		// refuses arguments over 2 KiB as shown (workflows.maxActionArgs),
		// and plain grows JSON (no &, <, >) by at most 7/5 ("ab://").
		map[string]any{"type": "section", "text": plainText(termtext.Reveal(a.Args), maxSectionText)},
		map[string]any{"type": "section", "text": label("*Why (the plan's step)*")},
		map[string]any{"type": "section", "text": plainText(a.Reason, maxSectionText)},
		map[string]any{"type": "section", "text": plainText(fmt.Sprintf("starter approve-call %s %s\nstarter deny-call %s %s \"reason\"", a.WorkflowID, a.CallID, a.WorkflowID, a.CallID), maxSectionText)},
	}
	if strings.HasPrefix(a.URL, "http://") || strings.HasPrefix(a.URL, "https://") {
		blocks = append(blocks, map[string]any{"type": "actions", "elements": []any{map[string]any{
			"type": "button", "text": plainText("Open in the Temporal Web UI", maxButtonText), "url": a.URL, "action_id": "open_web_ui"}}})
	}
	return map[string]any{"text": plainClipped(head+": "+oneLine(a.Title), maxSectionText), "blocks": blocks, "unfurl_links": false, "unfurl_media": false}
}
