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
// plain; the only mrkdwn holds the message's own labels.
func SlackMessage(r Result) map[string]any {
	head := fmt.Sprintf("%s (%s confidence)", verdictWord(r.Verdict), r.Confidence)
	if r.Previous != "" && r.Previous != r.Verdict {
		head = fmt.Sprintf("Verdict changed: %s → %s (%s confidence)", verdictWord(r.Previous), verdictWord(r.Verdict), r.Confidence)
	}
	plainText := func(s string) map[string]any {
		return map[string]any{"type": "plain_text", "text": plain(s), "emoji": false}
	}
	label := func(s string) map[string]any { return map[string]any{"type": "mrkdwn", "text": s, "verbatim": true} }
	blocks := []any{
		map[string]any{"type": "header", "text": plainText(clip.String(head, 150))},
		map[string]any{"type": "section", "text": plainText(r.Title)},
		map[string]any{"type": "section", "fields": []any{
			label("*Verdict*"), plainText(verdictWord(r.Verdict)),
			label("*Confidence*"), plainText(r.Confidence),
			label("*Severity*"), plainText(r.Severity),
			label("*Alert*"), plainText(r.AlertID),
		}},
	}
	if len(r.Findings) > 0 {
		var b strings.Builder
		for i, f := range r.Findings {
			fmt.Fprintf(&b, "%d. %s\n", i+1, oneLine(f.Fact))
		}
		blocks = append(blocks, map[string]any{"type": "section", "text": label("*Top findings*")},
			map[string]any{"type": "section", "text": plainText(clip.String(b.String(), 2900))})
	}
	if r.Summary != "" {
		blocks = append(blocks, map[string]any{"type": "section", "text": plainText(clip.String(r.Summary, 2900))})
	}
	if r.Alerts > 1 {
		blocks = append(blocks, map[string]any{"type": "context", "elements": []any{plainText(fmt.Sprintf("%d alerts in this investigation", r.Alerts))}})
	}
	if strings.HasPrefix(r.URL, "http://") || strings.HasPrefix(r.URL, "https://") {
		blocks = append(blocks, map[string]any{"type": "actions", "elements": []any{map[string]any{
			"type": "button", "text": plainText("Open in the Temporal Web UI"), "url": r.URL, "action_id": "open_web_ui"}}})
	}
	blocks = append(blocks, map[string]any{"type": "context", "elements": []any{plainText("workflow " + r.WorkflowID + " · idempotency key " + r.Key)}})
	return map[string]any{
		// The notification text: the same words, for clients without blocks.
		"text":   plain(head + ": " + oneLine(r.Title)),
		"blocks": blocks,
		// No automatic linking of names or URLs anywhere in the message.
		"unfurl_links": false, "unfurl_media": false,
	}
}

var schemeRe = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]{1,20})://`)

// plain makes untrusted text harmless in a Slack message: &, < and > are
// escaped (Slack's control characters for links and mentions, <!channel>,
// <@U123>, <https://x|y>), and URLs are defanged (https://x becomes
// hxxps[://]x), so nothing in an alert or a conclusion is a link, a
// mention or formatting, whatever the text object.
func plain(s string) string {
	s = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
	return schemeRe.ReplaceAllStringFunc(s, func(m string) string {
		scheme := strings.TrimSuffix(m, "://")
		switch strings.ToLower(scheme) {
		case "http":
			scheme = "hxxp"
		case "https":
			scheme = "hxxps"
		}
		return scheme + "[://]"
	})
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
	plainText := func(s string) map[string]any {
		return map[string]any{"type": "plain_text", "text": plain(s), "emoji": false}
	}
	label := func(s string) map[string]any { return map[string]any{"type": "mrkdwn", "text": s, "verbatim": true} }
	head := clip.String("Action awaits approval: "+a.Tool, 150)
	blocks := []any{
		map[string]any{"type": "header", "text": plainText(head)},
		map[string]any{"type": "section", "text": plainText(clip.String(a.Title, 2900))},
		map[string]any{"type": "section", "fields": []any{
			label("*Tool*"), plainText(a.Tool),
			label("*Call*"), plainText(a.CallID),
			label("*Alert*"), plainText(a.AlertID),
		}},
		map[string]any{"type": "section", "text": label("*Arguments*")},
		map[string]any{"type": "section", "text": plainText(clip.String(a.Args, 2900))},
		map[string]any{"type": "section", "text": label("*Why (the plan's step)*")},
		map[string]any{"type": "section", "text": plainText(clip.String(a.Reason, 2900))},
		map[string]any{"type": "section", "text": plainText(clip.String(fmt.Sprintf("starter approve-call %s %s\nstarter deny-call %s %s \"reason\"", a.WorkflowID, a.CallID, a.WorkflowID, a.CallID), 2900))},
	}
	if strings.HasPrefix(a.URL, "http://") || strings.HasPrefix(a.URL, "https://") {
		blocks = append(blocks, map[string]any{"type": "actions", "elements": []any{map[string]any{
			"type": "button", "text": plainText("Open in the Temporal Web UI"), "url": a.URL, "action_id": "open_web_ui"}}})
	}
	return map[string]any{"text": plain(head + ": " + oneLine(a.Title)), "blocks": blocks, "unfurl_links": false, "unfurl_media": false}
}
