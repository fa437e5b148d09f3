package intake

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/secops-agent/investigator/alerts"
)

// Identity rules, in the order Identify tries them.
const (
	RuleGuardDuty = "guardduty" // account ID and finding ID
	RuleSCC       = "scc"       // the finding's resource name
	RuleID        = "id"        // a generic id field
	RuleContent   = "content"   // the content hash (the alert ID)
)

// maxIdentityValue bounds each source value in an identity: a longer one
// is replaced by its hash, so no alert can make the key (and the workflow
// ID derived from it) grow without limit; MaxIdentityBytes bounds the key.
const (
	maxIdentityValue = 128
	MaxIdentityBytes = 300
)

// Identity is what makes two alerts the same alert: GuardDuty updates one
// finding (same account and finding ID) with a new count and last-seen
// time; SCC re-publishes a finding under its name.
type Identity struct {
	// Key is the identity in the source's own terms, such as
	// "guardduty:123456789012:7ab2...": the same alert always has the same key.
	Key string `json:"key"`
	// Rule is the rule that made it (RuleGuardDuty ... RuleContent).
	Rule string `json:"rule"`
	// Count is how many times the source says it saw the finding
	// (GuardDuty's service.count, or a count field), 0 when it does not say.
	Count int64 `json:"count,omitempty"`
}

// Identify returns the alert's identity: for GuardDuty the account and
// finding ID, for SCC the finding's name, else a generic "id" field of the
// finding, else the content hash (the alert ID itself, so an exact repeat
// is the same alert).
func Identify(al alerts.Alert) Identity {
	f, _ := finding(al.Data)
	id := Identity{Count: count(f)}
	switch account, fid := scalar(field(f, "accountId")), scalar(field(f, "id")); {
	case al.Source == alerts.SourceGuardDuty && account != "" && fid != "":
		id.Rule, id.Key = RuleGuardDuty, "guardduty:"+bounded(account)+":"+bounded(fid)
	case al.Source == alerts.SourceSCC && sccName(f) != "":
		id.Rule, id.Key = RuleSCC, "scc:"+bounded(sccName(f))
	case fid != "":
		id.Rule, id.Key = RuleID, al.Source+":id:"+bounded(fid)
	default:
		id.Rule, id.Key = RuleContent, "content:"+al.ID
	}
	id.Key = PlainIdentity(id.Key)
	return id
}

// Plain says whether JSON writes s as itself: valid UTF-8 without control
// characters, '"', '\\', '<', '>', '&', U+2028 or U+2029, which Go's encoder
// (and so Temporal's payloads) writes as escapes of up to 6 bytes. The
// admission workflow keeps only plain text, so its state's encoded size is
// bounded by its byte bounds (design/intake.md, "Bounds").
func Plain(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == '"' || r == '\\' || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}

// PlainIdentity is key when it is Plain, else its rule's prefix and its
// SHA-256 ("generic:sha256:<hex>"): Identify ends with it, since
// Alert.Check refuses an identity that is not plain (its parts are plain
// already: bounded).
func PlainIdentity(key string) string {
	if Plain(key) {
		return key
	}
	prefix, _, _ := strings.Cut(key, ":")
	if prefix == "" || len(prefix) > 32 || !Plain(prefix) {
		prefix = "hashed"
	}
	sum := sha256.Sum256([]byte(key))
	return prefix + ":sha256:" + hex.EncodeToString(sum[:])
}

// sccName is an SCC finding's resource name
// ("organizations/1/sources/2/findings/3"), or its canonical name.
func sccName(f map[string]any) string {
	if s := scalar(field(f, "name")); strings.Contains(s, "/findings/") {
		return s
	}
	return scalar(field(f, "canonicalName"))
}

// count reads how many times the source saw the finding.
func count(f map[string]any) int64 {
	if svc, ok := field(f, "service").(map[string]any); ok {
		if n, ok := integer(field(svc, "count")); ok {
			return n
		}
	}
	n, _ := integer(field(f, "count"))
	return n
}

func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, x >= 0
	case float64:
		if x >= 0 && x < 1<<62 && x == float64(int64(x)) {
			return int64(x), true
		}
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil && n >= 0
	}
	return 0, false
}

// scalar is a string or integer value as text ("" for anything else).
func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
	}
	return ""
}

// bounded keeps a value of an identity short and plain: a long one, one
// that is not Plain, and one that starts with "sha256" becomes
// "sha256:<hex>". A value kept never has the hashed form, so an alert
// whose literal id is another's hash cannot take its identity; and a key
// of bounded parts is plain, so PlainIdentity (whose "<rule>:sha256:<hex>"
// a GuardDuty account "sha256" could spell) keeps it as it is.
func bounded(s string) string {
	if len(s) <= maxIdentityValue && Plain(s) && !strings.HasPrefix(s, "sha256") {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// WorkflowID is the investigation workflow ID of an identity:
// "intake-<readable part>-<12 hex of its SHA-256>", the readable part
// being the rule's prefix and the identity's last 48 characters (where a
// finding's own ID is). The same identity always gets the same ID, so
// Temporal itself refuses a second running investigation of it, whichever
// intake process asks.
func WorkflowID(identityKey string) string {
	sum := sha256.Sum256([]byte(identityKey))
	readable := unsafeID.ReplaceAllString(identityKey, "_")
	if len(readable) > 64 {
		prefix, _, _ := strings.Cut(identityKey, ":")
		readable = unsafeID.ReplaceAllString(prefix, "_") + "_" + readable[len(readable)-48:]
	}
	return fmt.Sprintf("intake-%s-%s", strings.Trim(readable, "_"), hex.EncodeToString(sum[:6]))
}
