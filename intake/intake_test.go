package intake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/secops-agent/investigator/alerts"
)

func readExample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../examples/alerts/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parse(t *testing.T, raw []byte) alerts.Alert {
	t.Helper()
	u, err := Unwrap(raw)
	if err != nil {
		t.Fatalf("Unwrap: %v", err)
	}
	al, err := alerts.Parse(u.Alert)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return al
}

func pushBody(data []byte) []byte {
	b, _ := json.Marshal(map[string]any{
		"message":      map[string]any{"data": base64.StdEncoding.EncodeToString(data), "messageId": "42", "attributes": map[string]string{"a": "b"}},
		"subscription": "projects/demo-investigator/subscriptions/alerts-push",
	})
	return b
}

func TestUnwrap(t *testing.T) {
	gd := readExample(t, "guardduty-ssh-bruteforce.json")
	scc := readExample(t, "scc-cryptominer.json")
	eb, _ := json.Marshal(map[string]any{"version": "0", "id": "ev-1", "detail-type": "GuardDuty Finding", "source": "aws.guardduty", "detail": json.RawMessage(gd)})
	for _, tc := range []struct {
		name      string
		body      []byte
		envelopes []string
		alert     []byte
	}{
		{"bare", gd, []string{EnvelopeBare}, gd},
		{"scc notification", scc, []string{EnvelopeSCC}, scc},
		{"eventbridge", eb, []string{EnvelopeEventBridge}, eb},
		{"push around eventbridge", pushBody(eb), []string{EnvelopePubSubPush, EnvelopeEventBridge}, eb},
		{"push around bare", pushBody(gd), []string{EnvelopePubSubPush, EnvelopeBare}, gd},
		// An alert of its own with a message field is not a push body.
		{"alert with a message", []byte(`{"id":"a1","message":{"data":"aGk=","text":"x"}}`), []string{EnvelopeBare}, []byte(`{"id":"a1","message":{"data":"aGk=","text":"x"}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := Unwrap(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(u.Envelopes, tc.envelopes) || string(u.Alert) != string(tc.alert) {
				t.Errorf("got %v %.60q, want %v %.60q", u.Envelopes, u.Alert, tc.envelopes, tc.alert)
			}
		})
	}
}

func TestUnwrapRefuses(t *testing.T) {
	big := []byte(`{"x":"` + strings.Repeat("a", alerts.MaxBytes) + `"}`)
	if _, err := Unwrap(append(big, make([]byte, MaxBodyBytes)...)); err != ErrTooLarge {
		t.Errorf("body over MaxBodyBytes: %v", err)
	}
	if _, err := Unwrap(pushBody(big)); err != ErrTooLarge {
		t.Errorf("push body whose data is over the limit: %v", err)
	}
	if _, err := Unwrap(big); err != ErrTooLarge {
		t.Errorf("oversized body: %v", err)
	}
	// A push body under the limit whose data decodes over it.
	if _, err := Unwrap(pushBody(big[:alerts.MaxBytes-100])); err != nil {
		t.Errorf("a push body just under the limit: %v", err)
	}
	if _, err := Unwrap([]byte(`{"message":{"data":"%%%not base64","messageId":"1"},"subscription":"s"}`)); err == nil || !strings.Contains(err.Error(), "base64") {
		t.Errorf("bad base64: %v", err)
	}
}

func TestIdentify(t *testing.T) {
	gd := readExample(t, "guardduty-ssh-bruteforce.json")
	eb, _ := json.Marshal(map[string]any{"detail-type": "GuardDuty Finding", "id": "event-1", "detail": json.RawMessage(gd)})
	eb2, _ := json.Marshal(map[string]any{"detail-type": "GuardDuty Finding", "id": "event-2", "detail": json.RawMessage(gd)})
	cli, _ := json.Marshal(map[string]any{"Findings": []any{map[string]any{
		"SchemaVersion": "2.0", "AccountId": "123456789012", "Id": "c2c6a1f4e8b94a7d9f3e5b6a7c8d9e0f", "Type": "UnauthorizedAccess:EC2/SSHBruteForce",
		"Severity": 5, "Service": map[string]any{"ServiceName": "guardduty", "Count": 310}}}})
	want := "guardduty:123456789012:c2c6a1f4e8b94a7d9f3e5b6a7c8d9e0f"
	for name, raw := range map[string][]byte{"bare": gd, "eventbridge": eb, "another event of the same finding": eb2, "aws cli": cli, "push": pushBody(eb)} {
		id := Identify(parse(t, raw))
		if id.Key != want || id.Rule != RuleGuardDuty {
			t.Errorf("%s: %+v, want %s", name, id, want)
		}
	}
	if id := Identify(parse(t, cli)); id.Count != 310 {
		t.Errorf("count of the AWS CLI finding: %d", id.Count)
	}

	scc := Identify(parse(t, readExample(t, "scc-cryptominer.json")))
	if scc.Rule != RuleSCC || scc.Key != "scc:organizations/123456789012/sources/4417712345678901234/findings/8d2f6c1e0b9a4f3e9c7d5b3a1e0f2d4c" {
		t.Errorf("scc: %+v", scc)
	}

	generic := Identify(parse(t, []byte(`{"id": 1234567, "title": "odd login", "severity": "high", "count": 3}`)))
	if generic.Key != "generic:id:1234567" || generic.Rule != RuleID || generic.Count != 3 {
		t.Errorf("generic id: %+v", generic)
	}
	noID := parse(t, []byte(`{"title": "odd login", "severity": "high"}`))
	if id := Identify(noID); id.Key != "content:"+noID.ID || id.Rule != RuleContent {
		t.Errorf("content: %+v", id)
	}
	// A hostile id of 100 KB does not make a 100 KB identity.
	long := parse(t, []byte(`{"id": "`+strings.Repeat("x", 100<<10)+`"}`))
	if id := Identify(long); len(id.Key) > MaxIdentityBytes || !strings.HasPrefix(id.Key, "generic:id:sha256:") {
		t.Errorf("long id: %d bytes %.40q", len(id.Key), id.Key)
	}
}

func TestWorkflowID(t *testing.T) {
	a := WorkflowID("guardduty:123456789012:c2c6a1f4e8b94a7d9f3e5b6a7c8d9e0f")
	if a != WorkflowID("guardduty:123456789012:c2c6a1f4e8b94a7d9f3e5b6a7c8d9e0f") || !strings.HasPrefix(a, "intake-guardduty_123456789012_c2c6") {
		t.Errorf("workflow ID %s", a)
	}
	// Identities that slug alike still get their own IDs.
	if WorkflowID("generic:id:a/b") == WorkflowID("generic:id:a_b") {
		t.Error("two identities share a workflow ID")
	}
	if id := WorkflowID(strings.Repeat("é", 300)); len(id) > 100 {
		t.Errorf("long identity: %d bytes", len(id))
	}
}

func TestKeys(t *testing.T) {
	gd := Keys(parse(t, readExample(t, "guardduty-ssh-bruteforce.json")).Data)
	// The attacker's address and the instance, never the instance's own
	// addresses (local, private, public).
	if !slices.Contains(gd, "ip:198.51.100.23") || !slices.Contains(gd, "resource:i-0abc1234def567890") {
		t.Errorf("guardduty keys %v", gd)
	}
	for _, k := range gd {
		if strings.HasPrefix(k, "ip:") && k != "ip:198.51.100.23" {
			t.Errorf("guardduty: %s is not where the activity came from (%v)", k, gd)
		}
	}
	scc := Keys(parse(t, readExample(t, "scc-cryptominer.json")).Data)
	if !slices.Contains(scc, "user:svc-batch") || !slices.Contains(scc, "resource://compute.googleapis.com/projects/example-analytics-prod/zones/us-central1-a/instances/4861530274459182345") {
		t.Errorf("scc keys %v", scc)
	}
	generic := Keys(map[string]any{
		"src_ip": "203.0.113.9", "dst_ip": "10.0.0.5", "user": map[string]any{"name": "Alice"}, "host": map[string]any{"name": "db-1"},
		"client": map[string]any{"address": "::ffff:198.51.100.7"}, "sourceIPAddress": "127.0.0.1", "userName": "unknown",
	})
	want := []string{"ip:198.51.100.7", "ip:203.0.113.9", "user:alice", "resource:db-1"}
	if !slices.Equal(generic, want) {
		t.Errorf("generic keys %v, want %v", generic, want)
	}
	for _, tc := range []struct {
		data map[string]any
		want []string
	}{
		{map[string]any{"ip": "203.0.113.20", "id": 1}, []string{"ip:203.0.113.20"}},
		{map[string]any{"srcaddr": "203.0.113.21", "dstaddr": "10.0.0.1"}, []string{"ip:203.0.113.21"}},
		{map[string]any{"event": map[string]any{"sourceip": "203.0.113.22"}}, []string{"ip:203.0.113.22"}},
		{map[string]any{"resource": map[string]any{"ip": "10.0.0.9"}}, nil},
		{map[string]any{"network": map[string]any{"ip": "10.0.0.9"}}, nil},
		{map[string]any{"destination": map[string]any{"ip": "10.0.0.9"}, "source": map[string]any{"address": "203.0.113.23"}}, []string{"ip:203.0.113.23"}},
	} {
		if got := Keys(tc.data); !slices.Equal(got, tc.want) {
			t.Errorf("%v: keys %v, want %v", tc.data, got, tc.want)
		}
	}
}

func TestKeysAreBounded(t *testing.T) {
	data := map[string]any{}
	for i := range 50 {
		data["src_ip_"+string(rune('a'+i%26))+string(rune('a'+i/26))] = "198.51.100." + string(rune('0'+i%10))
		data["user_"+string(rune('a'+i%26))+string(rune('a'+i/26))] = "u"
	}
	data["username"] = strings.Repeat("x", 1000) // too long to be a key
	deep := map[string]any{"src_ip": "203.0.113.1"}
	for range 50 {
		deep = map[string]any{"a": deep}
	}
	data["deep"] = deep
	keys := Keys(data)
	if len(keys) > MaxAlertKeys {
		t.Errorf("%d keys", len(keys))
	}
	for _, k := range keys {
		if len(k) > MaxKeyBytes {
			t.Errorf("key of %d bytes", len(k))
		}
	}
}

// TestKeysFitAfterLowerCase: "Ⱥ" is 2 bytes and its lower case 3, so a
// 256-byte user name passed the length check and became a 389-byte key,
// which made the admission workflow refuse every batch it came in.
func TestKeysFitAfterLowerCase(t *testing.T) {
	grows := strings.Repeat("Ⱥ", maxKeyValue/2)
	fits := strings.Repeat("Ⱥ", maxKeyValue/3)
	keys := Keys(map[string]any{"user": grows, "userName": fits, "title": "x"})
	for _, k := range keys {
		if len(k) > MaxKeyBytes {
			t.Errorf("key of %d bytes", len(k))
		}
	}
	if want := []string{KeyUser + ":" + strings.ToLower(fits)}; !slices.Equal(keys, want) {
		t.Errorf("keys = %.40q, want only the user name that fits", keys)
	}
	if err := (Alert{AlertID: "a-1", Identity: "content:a-1", Keys: keys}).Check(); err != nil {
		t.Errorf("the admission workflow would refuse the alert: %v", err)
	}
}

func TestRank(t *testing.T) {
	order := []string{alerts.SeverityCritical, alerts.SeverityHigh, alerts.SeverityMedium, alerts.SeverityUnknown, alerts.SeverityLow}
	for i := 1; i < len(order); i++ {
		if Rank(order[i-1]) <= Rank(order[i]) {
			t.Errorf("%s should rank above %s", order[i-1], order[i])
		}
	}
	if Higher("low", "high") != "high" || Higher("critical", "high") != "critical" {
		t.Error("Higher")
	}
}

// TestAlertCheckBoundsTheTraceparent: the admission workflow keeps what an
// admit request carries, and anyone who can send the update writes it: an
// oversized traceparent is refused with the alert.
func TestAlertCheckBoundsTheTraceparent(t *testing.T) {
	a := Alert{AlertID: "a-1", Identity: "generic:id:a-1", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	if err := a.Check(); err != nil {
		t.Fatalf("a W3C traceparent: %v", err)
	}
	a.Traceparent = strings.Repeat("0", maxTraceparentBytes+1)
	if err := a.Check(); err == nil || !strings.Contains(err.Error(), "traceparent") {
		t.Errorf("a %d-byte traceparent: err = %v", len(a.Traceparent), err)
	}
}

// TestIdentityIsPlain: an id full of characters JSON escapes would make
// the identity, kept in the admission workflow's state, six times its
// bytes; it becomes its hash (bounded), which PlainIdentity keeps.
func TestIdentityIsPlain(t *testing.T) {
	for _, id := range []string{`<&>`, "a\u0001b", "x\u2028y", `q"\`} {
		raw, _ := json.Marshal(map[string]any{"id": id, "title": "t"})
		got := Identify(parse(t, raw))
		enc, _ := json.Marshal(got.Key)
		if !Plain(got.Key) || len(enc) != len(got.Key)+2 || got.Key != "generic:id:"+bounded(id) || !strings.HasPrefix(got.Key, "generic:id:sha256:") {
			t.Errorf("id %q: identity %q", id, got.Key)
		}
		if PlainIdentity(got.Key) != got.Key {
			t.Errorf("id %q: PlainIdentity changes Identify's %q", id, got.Key)
		}
	}
	for _, s := range []string{"generic:id:1234", "scc:organizations/1/sources/2/findings/3", "é语𝔘", "a'b"} {
		if !Plain(s) || PlainIdentity(s) != s {
			t.Errorf("%q is plain", s)
		}
	}
	if Plain("\xff") {
		t.Error("invalid UTF-8 is not plain")
	}
}

// TestKeysOfEveryBundledExample: every key of every bundled alert names
// the alert's asset or actor (the attacker's or caller's address, the
// user, the instance or host), never the collector, sensor or device that
// reported it. A new example must be added here.
func TestKeysOfEveryBundledExample(t *testing.T) {
	gce := "resource://compute.googleapis.com/projects/example-analytics-prod/zones/"
	want := map[string][]string{
		"guardduty-ssh-bruteforce.json": {"ip:198.51.100.23", "resource:i-0abc1234def567890"},
		"ids-webshell-upload-cn.json":   nil, // Chinese field names: no key is recognised
		"scc-cryptominer.json":          {"user:svc-batch", gce + "us-central1-a/instances/4861530274459182345"},
		// The attacker's address is in the raw log; device.host is the
		// SIEM's collector, asset.name the server attacked (the alert's own
		// keys come before its raw log's).
		"siem-struts2-rce-raw-log.json":                              {"resource:app01", "ip:203.0.113.45"},
		"waf-sqli-cn.json":                                           nil,
		"edr-mde-web-server-prod-01.json":                            {"user:deploy", "resource:web-server-prod-01"},
		"generic-authorized-vuln-scan.json":                          {"ip:203.0.113.200"},
		"guardduty-c2-dns-web-server-prod-01.json":                   {"resource:i-0abc1234def567890"},
		"guardduty-portprobe-web-server-prod-01.json":                {"ip:198.51.100.23", "resource:i-0abc1234def567890"},
		"guardduty-ssh-bruteforce-bastion-01.json":                   {"ip:198.51.100.23", "resource:i-0def5678abc901234"},
		"guardduty-ssh-bruteforce-web-server-prod-01-september.json": {"ip:203.0.113.77", "resource:i-0abc1234def567890"},
		// The instance's own address, where the connection came from.
		"scc-bad-ip-gce-etl-runner-2.json":                 {"ip:10.128.0.14", gce + "us-central1-b/instances/7731902846615503921"},
		"edr-falcon-devtcp-api-server-prod-02.json":        {"user:api", "resource:api-server-prod-02"},
		"edr-mde-db-server-unknown-domain.json":            {"user:postgres", "resource:db-server-prod-03"},
		"edr-mde-sudo-deploy-web-server-prod-01.json":      {"user:deploy", "resource:web-server-prod-01"},
		"guardduty-bitcointool-tag-injection.json":         {"ip:203.0.113.77", "resource:i-0abc1234def567890"},
		"guardduty-bitcointool-web-server-prod-01.json":    {"ip:203.0.113.77", "resource:i-0abc1234def567890"},
		"guardduty-c2-ip-payments-web-server-prod-01.json": {"ip:192.0.2.80", "resource:i-0abc1234def567890"},
		"guardduty-credential-exfiltration-own-address.json": {"ip:203.0.113.10", "user:aroaexamplewebserver1:i-0abc1234def567890",
			"user:web-server-role", "resource:i-0abc1234def567890"},
		"guardduty-credential-exfiltration-web-server-role.json": {"ip:198.51.100.23", "user:aroaexamplewebserver1:i-0abc1234def567890",
			"user:web-server-role", "resource:i-0abc1234def567890"},
		"guardduty-discovery-admin-sso.json":                  {"ip:192.0.2.10", "user:aroaexampleadminsso01:alice@example.com", "user:awsreservedsso_adminaccess_3f2a1b"},
		"guardduty-discovery-ci-terraform.json":               {"ip:10.0.3.40", "user:aroaexampleciterraform:gitlab-ci-48211", "user:ci-terraform"},
		"guardduty-portprobe-scanner-api-server-prod-02.json": {"ip:203.0.113.200", "resource:i-0456def789abc0123"},
		// An outbound probe: GuardDuty's remote address is the host probed.
		"guardduty-portscan-web-server-prod-01.json":       {"ip:10.0.2.14", "resource:i-0abc1234def567890"},
		"guardduty-ssh-bruteforce-api-server-prod-02.json": {"ip:198.51.100.23", "resource:i-0456def789abc0123"},
		"scc-new-geography-etl-deployer.json": {"ip:198.51.100.23", "user:etl-deployer@example-analytics-prod.iam.gserviceaccount.com",
			"resource://iam.googleapis.com/projects/example-analytics-prod/serviceAccounts/etl-deployer@example-analytics-prod.iam.gserviceaccount.com"},
		"siem-impossible-travel-bob.json": {"ip:192.0.2.11", "ip:203.0.113.61", "user:bob@example.com"},
		"siem-sudo-prod-alice.json":       {"ip:10.0.0.10", "user:alice", "resource:i-0abc1234def567890", "resource:web-server-prod-01"},
		"waf-sqli-cms-editor.json":        {"ip:192.0.2.10"},
	}
	var files []string
	for _, dir := range []string{"../examples/alerts/", "../examples/alerts/history/", "../examples/evals/alerts/"} {
		m, _ := filepath.Glob(dir + "*.json")
		files = append(files, m...)
	}
	if len(files) < len(want) {
		t.Fatalf("%d examples found, %d expected", len(files), len(want))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[filepath.Base(f)]
		if !ok {
			t.Errorf("%s: not in the table; add the keys that name its asset and actor", f)
			continue
		}
		if got := Keys(parse(t, raw).Data); !slices.Equal(got, w) {
			t.Errorf("%s: keys %q, want %q", filepath.Base(f), got, w)
		}
	}
}

// TestKeysLeaveOutTheReporter: what sits under the pipeline that reported
// an alert (a SIEM's device, ECS's observer and agent, a collector or
// sensor) is no key; the asset and an address in an embedded raw log are.
func TestKeysLeaveOutTheReporter(t *testing.T) {
	data := map[string]any{
		"device":         map[string]any{"host": "siem-collector-02", "ip": "192.0.2.1"},
		"observer":       map[string]any{"hostname": "fw-edge-1", "source_ip": "192.0.2.2"},
		"agent":          map[string]any{"hostname": "beats-1", "name": "beats-1"},
		"siem_collector": map[string]any{"hostname": "c-3"},
		"sensor":         map[string]any{"host": map[string]any{"name": "ids-probe-3"}},
		"asset":          map[string]any{"name": "hr-db07", "ip": "10.9.8.7"},
		"raw_log":        `{"src_ip": "198.18.0.9", "dst_ip": "10.9.8.7", "inner": "{\"src_ip\": \"198.18.0.10\"}"}`,
	}
	if got, want := Keys(data), []string{"resource:hr-db07", "ip:198.18.0.9"}; !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
}

// TestKeysIgnoreJSONInAnAttackersString: a string the attacker writes (the
// request URI GuardDuty records) that holds a JSON object is not the
// alert's fields. Read as them, its eight addresses sorted first (1.0.0.x)
// and pushed the real attacker address and instance out of the 8 keys,
// and grouped the finding with whatever investigation the attacker chose.
func TestKeysIgnoreJSONInAnAttackersString(t *testing.T) {
	var gd map[string]any
	if err := json.Unmarshal(readExample(t, "guardduty-ssh-bruteforce.json"), &gd); err != nil {
		t.Fatal(err)
	}
	gd["service"].(map[string]any)["action"].(map[string]any)["requestUri"] = `{"src_ip":"1.0.0.1","source_ip":"1.0.0.2","client_ip":"1.0.0.3","remote_ip":"1.0.0.4","caller_ip":"1.0.0.5","peer_ip":"1.0.0.6","origin_ip":"1.0.0.7","actor_ip":"1.0.0.8"}`
	raw, _ := json.Marshal(gd)
	if got, want := Keys(parse(t, raw).Data), []string{"ip:198.51.100.23", "resource:i-0abc1234def567890"}; !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q: the attacker's string chose them", got, want)
	}
}

// TestOnlyEventOriginalIsARawLog: ECS's url.original and
// user_agent.original are the client's text; only event.original is the
// source's raw event.
func TestOnlyEventOriginalIsARawLog(t *testing.T) {
	attacker := `{"src_ip":"10.0.0.5","user":"alice","hostname":"db-prod-1"}`
	for _, data := range []map[string]any{
		{"source": map[string]any{"ip": "203.0.113.9"}, "url": map[string]any{"original": attacker}},
		{"source": map[string]any{"ip": "203.0.113.9"}, "threat": map[string]any{"indicator": map[string]any{"url": map[string]any{"original": attacker}}}},
	} {
		if got, want := Keys(data), []string{"ip:203.0.113.9"}; !slices.Equal(got, want) {
			t.Errorf("keys %q, want %q: the client's URL chose them", got, want)
		}
	}
	data := map[string]any{"source": map[string]any{"ip": "203.0.113.9"}, "event": map[string]any{"original": attacker}}
	if got := Keys(data); !slices.Contains(got, "resource:db-prod-1") {
		t.Errorf("keys %q: event.original is the source's raw event and is read", got)
	}
}

// TestRawLogKeysOnlyFillSlotsLeft: a raw log (read as JSON) full of
// addresses that sort first never pushes out the alert's own keys.
func TestRawLogKeysOnlyFillSlotsLeft(t *testing.T) {
	inner := map[string]any{}
	for i, f := range []string{"src_ip", "source_ip", "client_ip", "remote_ip", "caller_ip", "peer_ip", "origin_ip", "actor_ip", "from_ip"} {
		inner[f] = fmt.Sprintf("1.0.0.%d", i+1)
	}
	rawLog, _ := json.Marshal(inner)
	data := map[string]any{"src_ip": "203.0.113.9", "user": "alice", "hostname": "db-1", "raw_log": string(rawLog)}
	want := []string{"ip:203.0.113.9", "user:alice", "resource:db-1", "ip:1.0.0.1", "ip:1.0.0.2", "ip:1.0.0.3", "ip:1.0.0.4", "ip:1.0.0.5"}
	if got := Keys(data); !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
}

// TestHashedFormIsNoLiteral: an identity value too long to keep becomes
// "sha256:<hex>"; an alert whose literal id (or GuardDuty account) spells
// that form, or PlainIdentity's, must not get the same identity, or it
// would pre-empt the real alert as a repeat.
func TestHashedFormIsNoLiteral(t *testing.T) {
	identify := func(v map[string]any) string {
		raw, _ := json.Marshal(v)
		return Identify(parse(t, raw)).Key
	}
	longID := strings.Repeat("7", maxIdentityValue+1)
	real := identify(map[string]any{"id": longID, "title": "t"})
	if !strings.HasPrefix(real, "generic:id:sha256:") {
		t.Fatalf("long id: %q", real)
	}
	literal := strings.TrimPrefix(real, "generic:id:")
	if forged := identify(map[string]any{"id": literal, "title": "t"}); forged == real {
		t.Errorf("the literal id %q takes the long id's identity %q", literal, real)
	}
	// PlainIdentity's form: "guardduty:sha256:<hex>" from an account
	// "sha256" and a finding ID of 64 hex.
	gd := func(account, id string) string {
		return identify(map[string]any{"schemaVersion": "2.0", "accountId": account, "id": id, "type": "Recon:EC2/PortProbeUnprotectedPort",
			"service": map[string]any{"serviceName": "guardduty", "count": 1}, "title": "t", "severity": 5})
	}
	target := PlainIdentity("guardduty:123456789012:x<y")
	hexPart := strings.TrimPrefix(target, "guardduty:sha256:")
	if got := gd("sha256", hexPart); got == target || strings.HasPrefix(got, "guardduty:sha256:"+hexPart) {
		t.Errorf("account \"sha256\" spells PlainIdentity's form: %q", got)
	}
	if got := gd("123456789012", "x<y"); got == target {
		t.Errorf("the non-plain finding ID's identity is PlainIdentity's form %q", got)
	}
}
