package intake

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/secops-agent/investigator/alerts"
)

// Envelope kinds an alert can arrive in.
const (
	EnvelopeBare        = "bare"             // the alert itself
	EnvelopePubSubPush  = "pubsub-push"      // a Pub/Sub push request body around one of the others
	EnvelopeSCC         = "scc-notification" // {"finding": {...}, "resource": {...}}
	EnvelopeEventBridge = "eventbridge"      // {"detail-type": "...", "detail": {...}}
)

// MaxBodyBytes is the largest message body Unwrap reads: a Pub/Sub push
// body holds the alert in base64, a third larger than the alert itself.
const MaxBodyBytes = alerts.MaxBytes*4/3 + 64<<10

// ErrTooLarge is wrapped by Unwrap when the alert is over alerts.MaxBytes.
var ErrTooLarge = errors.New("the alert is larger than the 1 MiB limit")

// Unwrapped is the alert found in a message: the bytes alerts.Parse gets
// and the envelopes it came in, outermost first.
type Unwrapped struct {
	Alert     []byte
	Envelopes []string
}

// Unwrap takes the alert out of a message body. A Pub/Sub push body
// ({"message": {"data": BASE64, "messageId": ...}, "subscription": ...})
// is transport: its data is the alert. A Security Command Center
// notification and an EventBridge event stay whole, since their outer
// fields (the resource, the account, the region) are evidence too;
// alerts.Parse recognises both, and Identify and Keys read the finding
// inside. Anything else is a bare alert. Unwrap only refuses what is too
// large or a push body whose data is not base64; alerts.Parse does the
// rest of the validation, the same as for `starter investigate`.
func Unwrap(body []byte) (Unwrapped, error) {
	var u Unwrapped
	if len(body) > MaxBodyBytes {
		return u, ErrTooLarge
	}
	if data, ok, err := pushData(body); ok {
		if err != nil {
			return u, err
		}
		if len(data) > alerts.MaxBytes {
			return u, ErrTooLarge
		}
		u.Envelopes = append(u.Envelopes, EnvelopePubSubPush)
		body = data
	}
	if len(body) > alerts.MaxBytes {
		return u, ErrTooLarge
	}
	u.Alert = body
	u.Envelopes = append(u.Envelopes, innerKind(body))
	return u, nil
}

// pushData recognises a Pub/Sub push body and returns its decoded data.
// An alert of its own that happens to have a "message" field is not one:
// a push body's message is an object with string data and a message ID,
// beside the subscription's name.
func pushData(body []byte) (data []byte, ok bool, err error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, []byte(`"message"`)) {
		return nil, false, nil
	}
	var push struct {
		Message *struct {
			Data       *string `json:"data"`
			MessageID  string  `json:"messageId"`
			MessageID2 string  `json:"message_id"`
		} `json:"message"`
		Subscription string `json:"subscription"`
	}
	if json.Unmarshal(trimmed, &push) != nil || push.Message == nil || push.Message.Data == nil {
		return nil, false, nil
	}
	if push.Subscription == "" && push.Message.MessageID == "" && push.Message.MessageID2 == "" {
		return nil, false, nil
	}
	s := strings.TrimSpace(*push.Message.Data)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if data, err := enc.DecodeString(s); err == nil {
			return data, true, nil
		}
	}
	return nil, true, fmt.Errorf("the Pub/Sub push body's message.data is not base64")
}

// innerKind names the envelope of an alert body (EnvelopeBare when none).
func innerKind(body []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return EnvelopeBare
	}
	isObject := func(raw json.RawMessage) bool {
		t := bytes.TrimSpace(raw)
		return len(t) > 0 && t[0] == '{'
	}
	if _, ok := top["detail-type"]; ok && isObject(top["detail"]) {
		return EnvelopeEventBridge
	}
	if isObject(top["finding"]) {
		return EnvelopeSCC
	}
	return EnvelopeBare
}

// finding is the part of an alert's data that describes the finding
// itself: an EventBridge event's detail, an SCC notification's finding
// (with its resource beside it), the one finding of the AWS CLI's
// {"Findings": [...]}, or the data itself.
func finding(data map[string]any) (f, resource map[string]any) {
	if _, ok := field(data, "detail-type").(string); ok {
		if d, ok := field(data, "detail").(map[string]any); ok {
			return d, nil
		}
	}
	if fd, ok := field(data, "finding").(map[string]any); ok {
		res, _ := field(data, "resource").(map[string]any)
		return fd, res
	}
	if list, ok := field(data, "Findings").([]any); ok && len(list) == 1 {
		if fd, ok := list[0].(map[string]any); ok {
			return fd, nil
		}
	}
	return data, nil
}

// field returns m[name], or the value of the first key (in sorted order)
// equal to name ignoring case.
func field(m map[string]any, name string) any {
	if v, ok := m[name]; ok {
		return v
	}
	best := ""
	for k := range m {
		if strings.EqualFold(k, name) && (best == "" || k < best) {
			best = k
		}
	}
	if best == "" {
		return nil
	}
	return m[best]
}
