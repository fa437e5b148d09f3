package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const shippedInventory = "../../examples/mcp/inventory.json"

// connect serves a responder over the SDK's in-memory transports and
// returns a client session on it and the state directory.
func connect(t *testing.T, opts options) (*mcp.ClientSession, string) {
	t.Helper()
	inv, err := loadInventory(shippedInventory)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := newStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(&responder{inv: inv, store: st, opts: opts, log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ct, st2 := mcp.NewInMemoryTransports()
	ctx := t.Context()
	ss, err := srv.Connect(ctx, st2, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, dir
}

// call returns the tool's structured result decoded into a map, or its
// error text when the result is a tool error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", tool, err)
	}
	if res.IsError {
		if len(res.Content) != 1 {
			t.Fatalf("%s: error result with %d contents", tool, len(res.Content))
		}
		return nil, res.Content[0].(*mcp.TextContent).Text
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out, ""
}

func mustOK(t *testing.T, cs *mcp.ClientSession, tool string, args any) map[string]any {
	t.Helper()
	out, errText := call(t, cs, tool, args)
	if errText != "" {
		t.Fatalf("%s(%v): unexpected tool error %q", tool, args, errText)
	}
	return out
}

// mustRefuse asserts a tool error of one bounded, printable sentence that
// contains want.
func mustRefuse(t *testing.T, cs *mcp.ClientSession, tool string, args any, want string) {
	t.Helper()
	out, errText := call(t, cs, tool, args)
	if errText == "" {
		t.Fatalf("%s(%q): want a tool error, got %v", tool, args, out)
	}
	if !strings.Contains(errText, want) {
		t.Errorf("%s(%q): error %q does not contain %q", tool, args, errText, want)
	}
	if len(errText) > 400 || strings.ContainsFunc(errText, unicode.IsControl) {
		t.Errorf("%s(%q): error is not one bounded line: %q", tool, args, errText)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestToolsAreAnnotatedAndDescribed(t *testing.T) {
	cs, _ := connect(t, options{})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		got[tool.Name] = tool
	}
	for name, readOnly := range map[string]bool{"lookup_host": true, "list_blocked": true, "block_ip": false, "disable_user": false} {
		tool := got[name]
		if tool == nil {
			t.Errorf("tool %s is missing", name)
			continue
		}
		a := tool.Annotations
		if a == nil || a.ReadOnlyHint != readOnly {
			t.Errorf("%s: readOnlyHint is not %v: %+v", name, readOnly, a)
			continue
		}
		if !readOnly && (a.DestructiveHint == nil || !*a.DestructiveHint || !a.IdempotentHint) {
			t.Errorf("%s: an action must be destructive and idempotent: %+v", name, a)
		}
		if tool.Description == "" || tool.OutputSchema == nil {
			t.Errorf("%s: no description or output schema", name)
		}
		schema := tool.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		for p, v := range props {
			if d, _ := v.(map[string]any)["description"].(string); d == "" {
				t.Errorf("%s: input %s has no description", name, p)
			}
		}
	}
	if len(got) != 4 {
		t.Errorf("want 4 tools, got %d", len(got))
	}
}

// The shipped inventory must answer for the hosts of the example alerts.
func TestLookupHostFindsTheExampleAlertsHosts(t *testing.T) {
	cs, _ := connect(t, options{})
	var alert struct {
		Resource struct {
			InstanceDetails struct {
				InstanceID        string `json:"instanceId"`
				NetworkInterfaces []struct {
					PrivateIPAddress string `json:"privateIpAddress"`
					PublicIP         string `json:"publicIp"`
				} `json:"networkInterfaces"`
			} `json:"instanceDetails"`
		} `json:"resource"`
	}
	data, err := os.ReadFile("../../examples/alerts/guardduty-ssh-bruteforce.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &alert); err != nil {
		t.Fatal(err)
	}
	d := alert.Resource.InstanceDetails
	for _, q := range []string{d.InstanceID, d.NetworkInterfaces[0].PrivateIPAddress, d.NetworkInterfaces[0].PublicIP,
		"WEB-SERVER-PROD-01", " web-server-prod-01 ", "web-server-prod-01.", "::ffff:10.0.1.25", "ip-10-0-1-25.ec2.internal"} {
		out := mustOK(t, cs, "lookup_host", map[string]any{"host": q})
		host, _ := out["host"].(map[string]any)
		if out["found"] != true || host["hostname"] != "web-server-prod-01" {
			t.Errorf("lookup_host(%q) = %v", q, out)
		}
	}
	for q, want := range map[string]string{"192.168.10.21": "app01", "batch-worker-7": "batch-worker-7", "10.128.0.14": "etl-runner-2", "oa.internal.example.cn": "oa01"} {
		out := mustOK(t, cs, "lookup_host", map[string]any{"host": q})
		if host, _ := out["host"].(map[string]any); host["hostname"] != want {
			t.Errorf("lookup_host(%q) = %v, want %s", q, out, want)
		}
	}
	out := mustOK(t, cs, "lookup_host", map[string]any{"host": "198.51.100.23"})
	if out["found"] != false || out["host"] != nil || out["message"] == "" {
		t.Errorf("an unknown address: %v", out)
	}
}

func TestLookupHostRefusesHostileInput(t *testing.T) {
	cs, _ := connect(t, options{})
	for q, want := range map[string]string{
		"":                         "host is required",
		strings.Repeat("a", 254):   "longer than 253",
		strings.Repeat("a", 1<<16): "longer than 253",
		"web; rm -rf /":            "must be a hostname",
		"web\nserver":              "must be a hostname",
		"../../etc/passwd":         "must be a hostname",
		"-rf":                      "must be a hostname",
		"web\u202eserver":          "must be a hostname",
	} {
		mustRefuse(t, cs, "lookup_host", map[string]any{"host": q}, want)
	}
	mustRefuse(t, cs, "lookup_host", map[string]any{}, "input schema")
	mustRefuse(t, cs, "lookup_host", map[string]any{"host": 42}, "input schema")
}

func TestBlockIPIsIdempotent(t *testing.T) {
	cs, dir := connect(t, options{})
	file := filepath.Join(dir, blockedFile)
	out := mustOK(t, cs, "block_ip", map[string]any{"ip": "198.51.100.23", "reason": "SSH brute force against web-server-prod-01"})
	if out["status"] != "blocked" || out["ip"] != "198.51.100.23" {
		t.Fatalf("first block: %v", out)
	}
	lines := readLines(t, file)
	if len(lines) != 1 {
		t.Fatalf("file after one block: %q", lines)
	}
	f := strings.Split(lines[0], "\t")
	if len(f) != 3 || f[0] != "198.51.100.23" || f[1] != out["at"] || f[2] != "SSH brute force against web-server-prod-01" || !strings.HasSuffix(f[1], "Z") {
		t.Errorf("line %q", lines[0])
	}
	// The same address, also spelled as IPv4-mapped IPv6, changes nothing.
	for _, ip := range []string{"198.51.100.23", "::ffff:198.51.100.23", " 198.51.100.23 "} {
		again := mustOK(t, cs, "block_ip", map[string]any{"ip": ip, "reason": "again"})
		if again["status"] != "already_blocked" || again["reason"] != "SSH brute force against web-server-prod-01" || again["at"] != out["at"] {
			t.Errorf("block_ip(%q) again: %v", ip, again)
		}
	}
	if got := readLines(t, file); len(got) != 1 || got[0] != lines[0] {
		t.Errorf("file changed by repeated blocks: %q", got)
	}
	// NAT64 and 6to4 addresses of public IPv4 ones are blockable.
	for _, ip := range []string{"64:ff9b::198.51.100.24", "2002:c633:6419::1"} {
		if out := mustOK(t, cs, "block_ip", map[string]any{"ip": ip, "reason": "embedded"}); out["status"] != "blocked" {
			t.Errorf("block_ip(%q): %v", ip, out)
		}
	}
	// IPv6 is canonicalised.
	v6 := mustOK(t, cs, "block_ip", map[string]any{"ip": "2001:DB8:0:0::1", "reason": "scanner"})
	if v6["ip"] != "2001:db8::1" || v6["status"] != "blocked" {
		t.Errorf("IPv6: %v", v6)
	}
	if got := readLines(t, file); len(got) != 4 {
		t.Errorf("file after a second address: %q", got)
	}
}

func TestBlockIPRefusesHostileInput(t *testing.T) {
	cs, dir := connect(t, options{})
	for ip, want := range map[string]string{
		"":                      "ip is required",
		"not-an-ip":             "not an IP address",
		"198.51.100.0/24":       "not an IP address",
		"198.51.100.23:22":      "not an IP address",
		"198.51.100.23\n10.0.0": "not an IP address",
		strings.Repeat("1", 65): "not an IP address",
		"fe80::1%eth0":          "zone",
		"10.0.0.1":              "--allow-private",
		"192.168.1.1":           "--allow-private",
		"172.16.0.1":            "--allow-private",
		"127.0.0.1":             "--allow-private",
		"::1":                   "--allow-private",
		"::":                    "--allow-private",
		"0.0.0.0":               "--allow-private",
		"169.254.169.254":       "--allow-private",
		"224.0.0.1":             "--allow-private",
		"255.255.255.255":       "--allow-private",
		"100.64.0.1":            "--allow-private",
		"fd00::1":               "--allow-private",
		"::ffff:127.0.0.1":      "--allow-private",
		"::10.0.0.1":            "--allow-private",
		"64:ff9b::10.0.0.1":     "--allow-private",
		"2002:a00:1::1":         "--allow-private",
		"100::1":                "--allow-private",
		"203.0.113.10":          "belongs to web-server-prod-01",
	} {
		mustRefuse(t, cs, "block_ip", map[string]any{"ip": ip, "reason": "test"}, want)
	}
	long := strings.Repeat("x", maxReasonBytes+1)
	for reason, want := range map[string]string{
		"":                        "reason is required",
		"   ":                     "reason is required",
		"line one\nline two":      "control",
		"tab\there":               "control",
		"red \x1b[31malert":       "control",
		"evil \u202eoverride":     "formatting",
		"zero\u200bwidth":         "formatting",
		"line\u2028separator":     "formatting",
		long:                      "longer than 300",
		strings.Repeat("é", 151):  "longer than 300",
		"fine\x00then null bytes": "control",
	} {
		mustRefuse(t, cs, "block_ip", map[string]any{"ip": "198.51.100.23", "reason": reason}, want)
	}
	mustRefuse(t, cs, "block_ip", map[string]any{"ip": "198.51.100.23"}, "input schema")
	mustRefuse(t, cs, "block_ip", map[string]any{"ip": []string{"198.51.100.23"}, "reason": "x"}, "input schema")
	if _, err := os.Stat(filepath.Join(dir, blockedFile)); !os.IsNotExist(err) {
		t.Errorf("a refused block wrote the file: %v", err)
	}
}

func TestAllowPrivateStillSparesTheInventory(t *testing.T) {
	cs, _ := connect(t, options{allowPrivate: true})
	if out := mustOK(t, cs, "block_ip", map[string]any{"ip": "10.9.9.9", "reason": "lab"}); out["status"] != "blocked" {
		t.Errorf("--allow-private: %v", out)
	}
	mustRefuse(t, cs, "block_ip", map[string]any{"ip": "10.0.1.25", "reason": "lab"}, "belongs to web-server-prod-01")
}

func TestDisableUser(t *testing.T) {
	cs, dir := connect(t, options{})
	out := mustOK(t, cs, "disable_user", map[string]any{"user": "svc-batch", "reason": "ran a cryptominer on batch-worker-7"})
	if out["status"] != "disabled" || out["user"] != "svc-batch" {
		t.Fatalf("disable: %v", out)
	}
	again := mustOK(t, cs, "disable_user", map[string]any{"user": "svc-batch", "reason": "again"})
	if again["status"] != "already_disabled" || again["at"] != out["at"] {
		t.Errorf("again: %v", again)
	}
	mustOK(t, cs, "disable_user", map[string]any{"user": "zhang.wei@example.cn", "reason": "phished"})
	lines := readLines(t, filepath.Join(dir, disabledFile))
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "svc-batch\t") || !strings.HasPrefix(lines[1], "zhang.wei@example.cn\t") {
		t.Errorf("file: %q", lines)
	}
	for user, want := range map[string]string{
		"":                         "user is required",
		"../etc/passwd":            "letters, digits",
		"-rf":                      "letters, digits",
		"alice bob":                "letters, digits",
		"alice\nbob":               "letters, digits",
		"CORP\\alice":              "letters, digits",
		"alice;id":                 "letters, digits",
		strings.Repeat("a", 129):   "letters, digits",
		strings.Repeat("a", 1<<16): "letters, digits",
		"root":                     "built-in administrative account",
		"Administrator":            "built-in administrative account",
	} {
		mustRefuse(t, cs, "disable_user", map[string]any{"user": user, "reason": "test"}, want)
	}
	mustRefuse(t, cs, "disable_user", map[string]any{"user": "mallory", "reason": "x\r\ny"}, "control")
	if got := readLines(t, filepath.Join(dir, disabledFile)); len(got) != 2 {
		t.Errorf("refused calls changed the file: %q", got)
	}
}

func TestListBlocked(t *testing.T) {
	cs, dir := connect(t, options{})
	out := mustOK(t, cs, "list_blocked", map[string]any{})
	if out["blocked_ips_total"] != 0.0 || len(out["blocked_ips"].([]any)) != 0 || len(out["disabled_users"].([]any)) != 0 {
		t.Errorf("empty state: %v", out)
	}
	mustOK(t, cs, "block_ip", map[string]any{"ip": "198.51.100.23", "reason": "brute force"})
	mustOK(t, cs, "disable_user", map[string]any{"user": "svc-batch", "reason": "miner"})
	out = mustOK(t, cs, "list_blocked", nil)
	ips := out["blocked_ips"].([]any)
	users := out["disabled_users"].([]any)
	if len(ips) != 1 || ips[0].(map[string]any)["ip"] != "198.51.100.23" || ips[0].(map[string]any)["reason"] != "brute force" {
		t.Errorf("blocked_ips: %v", ips)
	}
	if len(users) != 1 || users[0].(map[string]any)["user"] != "svc-batch" || out["disabled_users_total"] != 1.0 {
		t.Errorf("disabled_users: %v", out)
	}

	// The answer is bounded however long the list is; hand-added comments
	// and blank lines are skipped.
	var b strings.Builder
	b.WriteString("# added by hand\n\nodd\x1b[2J\t\t" + strings.Repeat("r", 5000) + "\n")
	for i := range maxListed + 5 {
		fmt.Fprintf(&b, "2001:db8::%x\t2026-01-01T00:00:00Z\tbulk\n", i+1)
	}
	if err := os.WriteFile(filepath.Join(dir, blockedFile), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out = mustOK(t, cs, "list_blocked", nil)
	ips = out["blocked_ips"].([]any)
	if out["blocked_ips_total"] != float64(maxListed+6) || len(ips) != maxListed || ips[len(ips)-1].(map[string]any)["ip"] != fmt.Sprintf("2001:db8::%x", maxListed+5) {
		t.Errorf("long list: total %v, %d listed, last %v", out["blocked_ips_total"], len(ips), ips[len(ips)-1])
	}
	// A hand-written line comes back bounded and without escapes.
	if err := os.WriteFile(filepath.Join(dir, blockedFile), []byte(b.String()[:strings.Index(b.String(), "2001:")]), 0o600); err != nil {
		t.Fatal(err)
	}
	out = mustOK(t, cs, "list_blocked", nil)
	odd := out["blocked_ips"].([]any)[0].(map[string]any)
	if odd["ip"] != "odd" || len(odd["reason"].(string)) > maxReasonBytes {
		t.Errorf("hand-written line: %v", odd)
	}
	mustRefuse(t, cs, "list_blocked", map[string]any{"x": 1}, "input schema")
}

// The SDK's schema errors quote the arguments; what goes back is bounded.
func TestSchemaErrorsAreBounded(t *testing.T) {
	cs, _ := connect(t, options{})
	mustRefuse(t, cs, "block_ip", map[string]any{"ip": "198.51.100.23", "reason": "x", strings.Repeat("\x1b[2J", 5000): 1}, "input schema")
}

func TestFullListRefusesMore(t *testing.T) {
	cs, dir := connect(t, options{})
	var b strings.Builder
	for i := range maxEntries {
		fmt.Fprintf(&b, "u%d\t2026-01-01T00:00:00Z\tbulk\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, disabledFile), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, cs, "disable_user", map[string]any{"user": "one-more", "reason": "x"}, "already holds 10000 entries")
	// An entry already there is still reported as such.
	if out := mustOK(t, cs, "disable_user", map[string]any{"user": "u7", "reason": "x"}); out["status"] != "already_disabled" {
		t.Errorf("existing entry: %v", out)
	}
}

// Two stores on one directory stand for two server processes: the lock file
// keeps every entry exactly once.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	dir := t.TempDir()
	a, err := newStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	added := make(chan bool, 200)
	for i := range 100 {
		for _, s := range []*store{a, b} {
			wg.Go(func() {
				_, ok, err := s.add(blockedFile, fmt.Sprintf("192.0.2.%d", i), "r")
				if err != nil {
					t.Error(err)
				}
				added <- ok
			})
		}
	}
	wg.Wait()
	close(added)
	n := 0
	for ok := range added {
		if ok {
			n++
		}
	}
	es, err := a.list(blockedFile)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range es {
		seen[e.Subject] = true
	}
	if n != 100 || len(es) != 100 || len(seen) != 100 {
		t.Errorf("added %d, file holds %d entries (%d distinct), want 100", n, len(es), len(seen))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".blocked-ips.txt.*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestInventoryValidation(t *testing.T) {
	for name, doc := range map[string]string{
		"not JSON":        `{"hosts": [`,
		"unknown field":   `{"hosts": [{"hostname": "a", "ips": [], "password": "x"}]}`,
		"bad IP":          `{"hosts": [{"hostname": "a", "ips": ["10.0.0.300"]}]}`,
		"bad hostname":    `{"hosts": [{"hostname": "a b", "ips": []}]}`,
		"duplicate name":  `{"hosts": [{"hostname": "a", "ips": []}, {"hostname": "b", "aliases": ["A"], "ips": []}]}`,
		"duplicate IP":    `{"hosts": [{"hostname": "a", "ips": ["10.0.0.1"]}, {"hostname": "b", "ips": ["10.0.0.1"]}]}`,
		"control in role": `{"hosts": [{"hostname": "a", "ips": [], "role": "x\u001b[31m"}]}`,
	} {
		if _, err := parseInventory([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := loadInventory(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "cannot open the inventory") {
		t.Errorf("missing file: %v", err)
	}
}
