package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/clip"
)

const examplesDir = "../examples/alerts"

type exampleWant struct {
	file     string
	source   string
	typ      string
	severity string
	title    string
	observed string // RFC 3339
}

var examples = []exampleWant{
	{"guardduty-ssh-bruteforce.json", SourceGuardDuty, "UnauthorizedAccess:EC2/SSHBruteForce", SeverityLow,
		"198.51.100.23 is performing SSH brute force attacks against i-0abc1234def567890.", "2026-11-20T08:05:31.402Z"},
	{"scc-cryptominer.json", SourceSCC, "Execution: Cryptocurrency Mining Hash Match", SeverityHigh,
		"Execution: Cryptocurrency Mining Hash Match on batch-worker-7", "2026-11-19T22:41:05.883Z"},
	{"history/edr-mde-web-server-prod-01.json", SourceEDR, "Execution", SeverityHigh,
		"Suspicious shell script downloaded and executed after SSH logon", "2026-11-20T08:36:44.12Z"},
	{"history/generic-authorized-vuln-scan.json", SourceGeneric, "authorized-vulnerability-scan", SeverityLow,
		"Scheduled vulnerability scan of the production VPC (change CHG-4821)", "2026-11-18T01:00:04Z"},
	{"history/guardduty-c2-dns-web-server-prod-01.json", SourceGuardDuty, "Backdoor:EC2/C&CActivity.B!DNS", SeverityHigh,
		"Command and Control server domain name queried by EC2 instance i-0abc1234def567890.", "2026-11-20T08:47:26.905Z"},
	{"history/guardduty-portprobe-web-server-prod-01.json", SourceGuardDuty, "Recon:EC2/PortProbeUnprotectedPort", SeverityLow,
		"Unprotected port on EC2 instance i-0abc1234def567890 is being probed.", "2026-11-17T14:02:55.118Z"},
	{"history/guardduty-ssh-bruteforce-bastion-01.json", SourceGuardDuty, "UnauthorizedAccess:EC2/SSHBruteForce", SeverityLow,
		"198.51.100.23 is performing SSH brute force attacks against i-0def5678abc901234.", "2026-11-10T02:20:13.53Z"},
	{"history/guardduty-ssh-bruteforce-web-server-prod-01-september.json", SourceGuardDuty, "UnauthorizedAccess:EC2/SSHBruteForce", SeverityLow,
		"203.0.113.77 is performing SSH brute force attacks against i-0abc1234def567890.", "2026-09-22T19:10:02.771Z"},
	{"history/scc-bad-ip-gce-etl-runner-2.json", SourceSCC, "Malware: Bad IP", SeverityMedium,
		"Malware: Bad IP on instances/7731902846615503921", "2026-11-12T16:20:31.447Z"},
	// Exports of WAF, IDS and SIEM appliances, as they come (realworld_test.go).
	{"waf-sqli-cn.json", SourceGeneric, "SQL注入", SeverityHigh, "SQL注入攻击", "2026-11-21T03:14:07Z"},
	{"siem-struts2-rce-raw-log.json", SourceGeneric, "漏洞利用", SeverityHigh, "Apache Struts2 远程代码执行 (S2-045)", "2026-11-21T02:58:41Z"},
	{"ids-webshell-upload-cn.json", SourceGeneric, "WebShell上传", SeverityCritical, "疑似中国菜刀(China Chopper) WebShell 上传", "2026-11-20T23:41:19Z"},
}

var idPattern = regexp.MustCompile(`^(guardduty|scc|edr|generic)-[0-9a-f]{12}$`)

func readExample(t *testing.T, file string) []byte {
	t.Helper()
	raw, err := Read(context.Background(), filepath.Join(examplesDir, file), nil)
	require.NoError(t, err)
	return raw
}

func parseExample(t *testing.T, file string) Alert {
	t.Helper()
	a, err := Parse(readExample(t, file))
	require.NoError(t, err, file)
	return a
}

// reorderedJSON encodes v with every object's keys in reverse order and
// different whitespace from the example files.
func reorderedJSON(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := sortedKeys(x)
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		parts := make([]string, len(keys))
		for i, k := range keys {
			kb, _ := json.Marshal(k)
			parts[i] = string(kb) + " :\t" + reorderedJSON(x[k])
		}
		return "{ " + strings.Join(parts, " ,\n") + " }"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = reorderedJSON(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func TestExamplesAreAllCovered(t *testing.T) {
	var files []string
	for _, pattern := range []string{"*.json", "history/*.json"} {
		m, err := filepath.Glob(filepath.Join(examplesDir, pattern))
		require.NoError(t, err)
		for _, f := range m {
			rel, err := filepath.Rel(examplesDir, f)
			require.NoError(t, err)
			files = append(files, rel)
		}
	}
	var covered []string
	for _, e := range examples {
		covered = append(covered, e.file)
	}
	assert.ElementsMatch(t, files, covered, "every example alert file should have an expectation in this test")
}

func TestParseExamples(t *testing.T) {
	ids := map[string]string{}
	for _, want := range examples {
		t.Run(want.file, func(t *testing.T) {
			raw := readExample(t, want.file)
			a, err := Parse(raw)
			require.NoError(t, err)

			assert.Equal(t, want.source, a.Source)
			assert.Equal(t, want.typ, a.Type)
			assert.Equal(t, want.severity, a.Severity)
			assert.Equal(t, want.title, a.Title)
			wantObserved, err := time.Parse(time.RFC3339Nano, want.observed)
			require.NoError(t, err)
			assert.True(t, wantObserved.Equal(a.ObservedAt), "observed %v, want %v", a.ObservedAt, wantObserved)
			assert.True(t, a.ImportedAt.IsZero(), "Parse must not set ImportedAt")
			assert.Regexp(t, idPattern, a.ID)
			assert.True(t, strings.HasPrefix(a.ID, a.Source+"-"))

			var data map[string]any
			require.NoError(t, json.Unmarshal(raw, &data))
			got, err := json.Marshal(a.Data)
			require.NoError(t, err)
			assert.JSONEq(t, string(raw), string(got), "Data should be the alert object as given")

			again, err := Parse(raw)
			require.NoError(t, err)
			assert.Equal(t, a, again, "parsing the same bytes twice should give the same alert")

			reordered := reorderedJSON(data)
			require.NotEqual(t, string(raw), reordered)
			r, err := Parse([]byte(reordered))
			require.NoError(t, err)
			assert.Equal(t, a.ID, r.ID, "key order and whitespace must not change the ID")
			assert.Equal(t, a.Title, r.Title)

			if other, dup := ids[a.ID]; dup {
				t.Errorf("%s and %s have the same ID %s", want.file, other, a.ID)
			}
			ids[a.ID] = want.file
		})
	}
}

func TestParseIDChangesWithContent(t *testing.T) {
	a, err := Parse([]byte(`{"type":"x","severity":"high","host":"a"}`))
	require.NoError(t, err)
	b, err := Parse([]byte(`{"type":"x","severity":"high","host":"b"}`))
	require.NoError(t, err)
	assert.NotEqual(t, a.ID, b.ID)
	c, err := Parse([]byte("\ufeff  {\"host\": \"a\", \"severity\": \"high\", \"type\": \"x\"}\n"))
	require.NoError(t, err, "a byte order mark and whitespace are accepted")
	assert.Equal(t, a.ID, c.ID)
}

func TestParseRejectsBadInput(t *testing.T) {
	deep := strings.Repeat(`{"d":`, 21) + "1" + strings.Repeat("}", 21)
	okDeep := strings.Repeat(`{"d":`, 20) + "1" + strings.Repeat("}", 20)
	_, err := Parse([]byte(okDeep))
	require.NoError(t, err, "20 levels of nesting fit in Firestore")

	tooManyNumbers := "{\"n\":[" + strings.TrimSuffix(strings.Repeat("1,", 130000), ",") + "]}"
	require.Less(t, len(tooManyNumbers), MaxBytes, "the JSON itself is small; only its Firestore size is too large")

	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "the alert is empty"},
		{"spaces", "   \n\t ", "the alert is empty"},
		{"not JSON", "hello", "the alert is not valid JSON: invalid character 'h' looking for beginning of value (line 1, column 1)"},
		{"trailing comma", "{\n  \"a\": 1,\n}", "the alert is not valid JSON: invalid character '}' looking for beginning of object key string (line 3, column 1)"},
		{"truncated", "{\"a\": [1, 2", "the alert is not valid JSON: unexpected end of JSON input"},
		{"bad literal on line 3", "{\n  \"a\": 1,\n  \"b\": tru\n}", "(line 3, column 11)"},
		{"two values", `{} {}`, "the alert is not valid JSON: invalid character '{' after top-level value (line 1, column 4)"},
		{"array", `[1,2]`, "the alert must be a JSON object, got an array"},
		{"string", `"x"`, "the alert must be a JSON object, got a string"},
		{"number", `42`, "the alert must be a JSON object, got a number"},
		{"boolean", `true`, "the alert must be a JSON object, got a boolean"},
		{"null", `null`, "the alert must be a JSON object, got null"},
		{"empty object", `{}`, "the alert is an empty JSON object"},
		{"empty key", `{"a":1,"":2}`, "the alert has an empty field name at the top level"},
		{"nested empty key", `{"a":{"b":[{"":1}]}}`, `the alert has an empty field name under "a.b[0]"`},
		{"reserved key", `{"a":{"__name__":1}}`, `the alert field "a.__name__" uses a name of the form __name__, which Firestore reserves`},
		{"reserved underscores", `{"____":1}`, "reserves"},
		{"long key", `{"` + strings.Repeat("k", 1501) + `":1}`, "the alert has a field name longer than 1500 bytes at the top level"},
		{"nested array", `{"a":{"b":[1,[2]]}}`, `the alert has an array directly inside an array at "a.b[1]", which Firestore cannot store`},
		{"too deep", deep, "the alert is nested more than 20 levels deep"},
		{"too large for Firestore", tooManyNumbers, "the alert is too large to store"},
		{"over MaxBytes", `{"a":"` + strings.Repeat("x", MaxBytes) + `"}`, "the alert is larger than the 1 MiB limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Parse([]byte(tt.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, Alert{}, a)
		})
	}
}

func TestParseAcceptsOddKeys(t *testing.T) {
	a, err := Parse([]byte(`{"a.b":1,"sp ace":"x","dash-x":true,"__x":1,"x__":2,"_":null,"ünï":"ok"}`))
	require.NoError(t, err)
	assert.Equal(t, SourceGeneric, a.Source)
	assert.Equal(t, SeverityUnknown, a.Severity)
	assert.Equal(t, "", a.Type)
	assert.Nil(t, a.Data["_"])
}

func TestParseRecognisesShapes(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		source   string
		typ      string
		severity string
		title    string
		observed string
	}{
		{
			name:   "GuardDuty as printed by the AWS CLI",
			in:     `{"Findings":[{"SchemaVersion":"2.0","AccountId":"123456789012","Type":"Recon:EC2/Portscan","Severity":5,"Title":"Port scan","CreatedAt":"2026-01-02T03:04:05.678Z"}]}`,
			source: SourceGuardDuty, typ: "Recon:EC2/Portscan", severity: SeverityMedium, title: "Port scan", observed: "2026-01-02T03:04:05.678Z",
		},
		{
			name:   "GuardDuty envelope without createdAt uses the event time",
			in:     `{"detail-type":"GuardDuty Finding","time":"2026-03-04T05:06:07Z","detail":{"type":"Policy:S3/BucketPublicAccessGranted","severity":9.5,"title":"Bucket made public","service":{"serviceName":"guardduty"}}}`,
			source: SourceGuardDuty, typ: "Policy:S3/BucketPublicAccessGranted", severity: SeverityCritical, title: "Bucket made public", observed: "2026-03-04T05:06:07Z",
		},
		{
			name:   "SCC finding with resource name only",
			in:     `{"finding":{"category":"Persistence: IAM Anomalous Grant","severity":"CRITICAL","resourceName":"//cloudresourcemanager.googleapis.com/projects/555","createTime":"2026-05-06T07:08:09Z"}}`,
			source: SourceSCC, typ: "Persistence: IAM Anomalous Grant", severity: SeverityCritical, title: "Persistence: IAM Anomalous Grant on projects/555", observed: "2026-05-06T07:08:09Z",
		},
		{
			name:   "SCC unspecified severity",
			in:     `{"category":"OPEN_FIREWALL","state":"ACTIVE","resourceName":"//compute.googleapis.com/projects/p/global/firewalls/fw-1","severity":"SEVERITY_UNSPECIFIED"}`,
			source: SourceSCC, typ: "OPEN_FIREWALL", severity: SeverityUnknown, title: "OPEN_FIREWALL on firewalls/fw-1",
		},
		{
			name:   "CrowdStrike detection summary",
			in:     `{"metadata":{"eventType":"DetectionSummaryEvent","eventCreationTime":1763600000000},"event":{"ComputerName":"web-server-prod-01","DetectName":"Suspicious Activity","DetectDescription":"A process tried to dump credentials.","Severity":4,"Tactic":"Credential Access","Technique":"OS Credential Dumping"}}`,
			source: SourceEDR, typ: "OS Credential Dumping", severity: SeverityHigh, title: "A process tried to dump credentials.", observed: "2025-11-20T00:53:20Z",
		},
		{
			name:   "generic with priority and epoch seconds",
			in:     `{"rule":{"name":"Impossible travel","severity":"?"},"priority":"P1","timestamp":1763600000.5,"summary":"User logged in from two continents"}`,
			source: SourceGeneric, typ: "Impossible travel", severity: SeverityCritical, title: "User logged in from two continents", observed: "2025-11-20T00:53:20.5Z",
		},
		{
			name:   "generic numeric priority is not a severity",
			in:     `{"name":"Disk nearly full","priority":1,"time":"2026-02-03 04:05:06"}`,
			source: SourceGeneric, typ: "Disk nearly full", severity: SeverityUnknown, title: "Disk nearly full", observed: "2026-02-03T04:05:06Z",
		},
		{
			name:   "generic numeric severity uses the 0-10 scale",
			in:     `{"category":"malware","severity":7.2,"description":"EICAR test file"}`,
			source: SourceGeneric, typ: "malware", severity: SeverityHigh, title: "EICAR test file",
		},
		{
			name:   "generic title falls back to the type",
			in:     `{"alert_type":"beaconing","level":"Warning","@timestamp":"not a time"}`,
			source: SourceGeneric, typ: "beaconing", severity: SeverityMedium, title: "beaconing",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Parse([]byte(tt.in))
			require.NoError(t, err)
			assert.Equal(t, tt.source, a.Source)
			assert.Equal(t, tt.typ, a.Type)
			assert.Equal(t, tt.severity, a.Severity)
			assert.Equal(t, tt.title, a.Title)
			if tt.observed == "" {
				assert.True(t, a.ObservedAt.IsZero(), "observed %v, want none", a.ObservedAt)
				return
			}
			want, err := time.Parse(time.RFC3339Nano, tt.observed)
			require.NoError(t, err)
			assert.True(t, want.Equal(a.ObservedAt), "observed %v, want %v", a.ObservedAt, want)
			assert.Equal(t, time.UTC, a.ObservedAt.Location())
		})
	}
}

func TestGuardDutySeverityScale(t *testing.T) {
	for in, want := range map[any]string{
		0.0: SeverityLow, 3.9: SeverityLow, 4.0: SeverityMedium, 6.9: SeverityMedium, 7.0: SeverityHigh,
		8.9: SeverityHigh, 9.0: SeverityCritical, 10.0: SeverityCritical, 10.5: SeverityUnknown, -1.0: SeverityUnknown,
		"5.5": SeverityMedium, "High": SeverityHigh, "bogus": SeverityUnknown, true: SeverityUnknown, nil: SeverityUnknown,
	} {
		assert.Equal(t, want, guardDutySeverity(in), "severity %v", in)
	}
}

func TestParseTitleIsClipped(t *testing.T) {
	a, err := Parse([]byte(`{"title":"` + strings.Repeat("é", 500) + `"}`))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(a.Title), maxSummaryBytes)
	assert.True(t, clip.Clipped(a.Title), "the cut is marked")
	assert.Equal(t, strings.Repeat("é", 500), a.Data["title"], "Data keeps the full value")
}

func TestObservedTimeIsMicroseconds(t *testing.T) {
	a, err := Parse([]byte(`{"type":"x","createdAt":"2026-01-02T03:04:05.123456789+02:00"}`))
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, 1, 2, 1, 4, 5, 123456000, time.UTC), a.ObservedAt)
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "alert.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"a":1}`), 0o644))
	got, err := Read(t.Context(), p, nil)
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(got))

	exact := filepath.Join(dir, "exact.json")
	require.NoError(t, os.WriteFile(exact, bytes.Repeat([]byte(" "), MaxBytes), 0o644))
	got, err = Read(t.Context(), exact, nil)
	require.NoError(t, err, "a file of exactly MaxBytes is accepted")
	assert.Len(t, got, MaxBytes)
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()

	missing := filepath.Join(dir, "missing.json")
	_, err := Read(t.Context(), missing, nil)
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("cannot read alert file %q: no such file or directory", missing), err.Error())
	assert.ErrorIs(t, err, fs.ErrNotExist)

	_, err = Read(t.Context(), dir, nil)
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("cannot read alert file %q: it is a directory", dir), err.Error())

	_, err = Read(t.Context(), "", nil)
	require.EqualError(t, err, "no alert file was given")

	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(20<<20)) // a sparse 20 MB file
	require.NoError(t, f.Close())
	_, err = Read(t.Context(), big, nil)
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("alert file %q is larger than the 1 MiB limit", big), err.Error())

	if os.Geteuid() != 0 { // root reads files whatever their mode
		locked := filepath.Join(dir, "locked.json")
		require.NoError(t, os.WriteFile(locked, []byte(`{}`), 0o000))
		_, err = Read(t.Context(), locked, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("cannot read alert file %q: permission denied", locked))
	}
}

// endless is an infinite reader that counts what it hands out.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	e.n += int64(len(p))
	return len(p), nil
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestReadStdin(t *testing.T) {
	got, err := Read(t.Context(), "-", strings.NewReader(`{"from":"stdin"}`))
	require.NoError(t, err)
	assert.Equal(t, `{"from":"stdin"}`, string(got))

	src := &endless{}
	_, err = Read(t.Context(), "-", src)
	require.EqualError(t, err, "the alert on standard input is larger than the 1 MiB limit")
	assert.LessOrEqual(t, src.n, int64(MaxBytes+64<<10), "Read must stop soon after MaxBytes, not read 20 MB or forever")

	_, err = Read(t.Context(), "-", failing{})
	require.EqualError(t, err, "cannot read the alert from standard input: broken pipe")

	_, err = Read(t.Context(), "-", nil)
	require.Error(t, err)

	_, err = Read(t.Context(), "-", io.MultiReader())
	require.NoError(t, err, "empty input is read; Parse reports it as empty")
}

func TestDescribe(t *testing.T) {
	a := parseExample(t, "guardduty-ssh-bruteforce.json")
	out := Describe(a, 100)
	lines := strings.Split(out, "\n")

	assert.Equal(t, `Alert `+a.ID+` | source: guardduty | type: "UnauthorizedAccess:EC2/SSHBruteForce" | severity: low | title: "198.51.100.23 is performing SSH brute force attacks against i-0abc1234def567890." | observed: 2026-11-20T08:05:31Z`, lines[0])
	assert.Contains(t, lines, `- service.action.networkConnectionAction.remoteIpDetails.ipAddressV4 (string) = "198.51.100.23"`)
	assert.Contains(t, lines, `- severity (number) = 2`)
	assert.Contains(t, lines, `- service.count (number) = 214`)
	assert.Contains(t, lines, `- service.archived (boolean) = false`)
	assert.Contains(t, lines, `- resource.instanceDetails.platform (null) = null`)
	assert.Contains(t, lines, `- resource.instanceDetails.productCodes (array(0)) = []`)
	assert.Contains(t, out, `- resource.instanceDetails.tags (array(3)) = (126 bytes: not shown here)`, "a long value is named by its size, not cut")
	assert.NotContains(t, out, "... and", "all fields fit in 100")
	assert.Equal(t, out, Describe(a, 100), "Describe is deterministic")

	// Shallow fields come first, and each line stays short.
	top := strings.Index(out, "\n- type (string)")
	deep := strings.Index(out, "\n- service.action.networkConnectionAction.remoteIpDetails.ipAddressV4")
	require.Positive(t, top)
	assert.Less(t, top, deep)
	for _, l := range lines[1:] {
		assert.LessOrEqual(t, len([]rune(l)), 150, "line too long: %s", l)
	}
	assert.Contains(t, out, `- description (string) = (186 bytes: not shown here)`)

	fields := strings.Count(out, "\n- ")
	cut := Describe(a, 5)
	assert.Equal(t, 5, strings.Count(cut, "\n- "))
	assert.True(t, strings.HasSuffix(cut, fmt.Sprintf("\n... and %d more fields", fields-5)), cut)
	assert.True(t, strings.HasPrefix(out, strings.TrimSuffix(cut, fmt.Sprintf("\n... and %d more fields", fields-5))),
		"a cut guide is a prefix of the full one")

	none := Describe(a, -3)
	assert.Equal(t, 0, strings.Count(none, "\n- "))
	assert.Contains(t, none, fmt.Sprintf("... and %d more fields", fields))
}

func TestDescribeOddShapes(t *testing.T) {
	a, err := Parse([]byte(`{"labels":{"app.kubernetes.io/name":"web","back` + "`" + `tick":1},"empty":{},"msg":"line1\nline2 <b>"}`))
	require.NoError(t, err)
	out := Describe(a, 10)
	assert.Contains(t, out, "observed: unknown")
	assert.Contains(t, out, "- labels.`app.kubernetes.io/name` (string) = \"web\"")
	assert.Contains(t, out, "- labels.`back\\`tick` (number) = 1")
	assert.Contains(t, out, "- empty (object) = {}")
	assert.Contains(t, out, `- msg (string) = "line1\nline2 <b>"`, "values stay on one line, without HTML escaping")

	empty := Describe(Alert{ID: "generic-000000000000", Source: SourceGeneric, Severity: SeverityUnknown}, 10)
	assert.Equal(t, `Alert generic-000000000000 | source: generic | type: "" | severity: unknown | title: "" | observed: unknown`+"\nThe alert has no data fields.", empty)
}

// The paths Describe prints are accepted by Search's field syntax.
func TestDescribePathsSplitBack(t *testing.T) {
	a, err := Parse([]byte(`{"labels":{"app.kubernetes.io/name":"web","a` + "`" + `b\\c":1},"x":{"y z":{"w-v":true}}}`))
	require.NoError(t, err)
	want := map[string][]string{
		"labels.`app.kubernetes.io/name`": {"labels", "app.kubernetes.io/name"},
		"labels.`a\\`b\\\\c`":             {"labels", "a`b\\c"},
		"x.y z.w-v":                       {"x", "y z", "w-v"},
	}
	for _, f := range shallowest(a.Data, leafCounts(a.Data), 10) {
		segs, ok := want[f.path]
		require.True(t, ok, "unexpected path %s", f.path)
		got, err := splitPath(f.path)
		require.NoError(t, err)
		assert.Equal(t, segs, got)
	}
}

func TestSearchRejectsInvalidQueries(t *testing.T) {
	s := &Store{} // validation happens before any Firestore call
	tests := []struct {
		name string
		q    Query
		want string
	}{
		{"empty field", Query{Field: " ", Op: "==", Value: "x"}, "the search field is empty"},
		{"empty segment", Query{Field: "a..b", Op: "==", Value: "x"}, `the search field "a..b" has an empty segment`},
		{"leading dot", Query{Field: ".a", Op: "==", Value: "x"}, `the search field ".a" has an empty segment`},
		{"trailing dot", Query{Field: "a.", Op: "==", Value: "x"}, `the search field "a." has an empty segment`},
		{"unclosed backtick", Query{Field: "a.`b.c", Op: "==", Value: "x"}, "the search field \"a.`b.c\" has an unclosed backtick"},
		{"unknown @ field", Query{Field: "@data", Op: "==", Value: "x"}, `unknown field "@data": the fields with @ are @source, @type, @severity and @title`},
		{"unknown operator", Query{Field: "a", Op: "=~", Value: "x"}, `unknown operator "=~": use one of ==, !=, <, <=, >, >=, array-contains, array-contains-any, in, not-in`},
		{"in without list", Query{Field: "a", Op: "in", Value: "x"}, `the "in" operator needs a non-empty list of values`},
		{"in with empty list", Query{Field: "a", Op: "in", Value: []any{}}, `the "in" operator needs a non-empty list of values`},
		{"in with 31 values", Query{Field: "a", Op: "in", Value: make([]any, 31)}, `the "in" operator accepts at most 30 values, got 31`},
		{"not-in with 11 values", Query{Field: "a", Op: "not-in", Value: make([]any, 11)}, `the "not-in" operator accepts at most 10 values, got 11`},
		{"list with an object", Query{Field: "a", Op: "array-contains-any", Value: []any{"x", map[string]any{}}}, `value 2 of the "array-contains-any" list must be a string, number or boolean, got an object`},
		{"list for ==", Query{Field: "a", Op: "==", Value: []any{"x"}}, `the "==" operator needs a single string, number or boolean value, got a list`},
		{"null for <", Query{Field: "a", Op: "<", Value: nil}, `the "<" operator needs a string, number or boolean value, got null`},
		{"negative offset", Query{Field: "a", Op: "==", Value: "x", Offset: -1}, "the offset must not be negative, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Search(t.Context(), tt.q)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidQuery)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

func TestQueryPath(t *testing.T) {
	p, err := queryPath("@severity")
	require.NoError(t, err)
	assert.Equal(t, []string{"severity"}, []string(p))
	p, err = queryPath("service.action.actionType")
	require.NoError(t, err)
	assert.Equal(t, []string{"data", "service", "action", "actionType"}, []string(p))
	p, err = queryPath("detail-type")
	require.NoError(t, err)
	assert.Equal(t, []string{"data", "detail-type"}, []string(p))
}

func TestQueryValueConversions(t *testing.T) {
	v, err := queryValue(">=", 7)
	require.NoError(t, err)
	assert.Equal(t, int64(7), v, "Go ints become int64, as integers in alerts are stored")
	v, err = queryValue("==", int64(1)<<60+1)
	require.NoError(t, err)
	assert.Equal(t, int64(1)<<60+1, v, "no precision is lost")
	v, err = queryValue("<", float32(2.5))
	require.NoError(t, err)
	assert.Equal(t, 2.5, v)
	v, err = queryValue("in", []string{"a", "b"})
	require.NoError(t, err)
	assert.Equal(t, []any{"a", "b"}, v)
	v, err = queryValue("==", nil)
	require.NoError(t, err)
	assert.Nil(t, v)
}

func TestClampLimit(t *testing.T) {
	assert.Equal(t, 10, clampLimit(0, maxSearchLimit))
	assert.Equal(t, 10, clampLimit(-5, maxSearchLimit))
	assert.Equal(t, 42, clampLimit(42, maxSearchLimit))
	assert.Equal(t, 100, clampLimit(1000, maxSearchLimit))
}

func TestCheckID(t *testing.T) {
	require.NoError(t, checkID("guardduty-0123456789ab"))
	for _, bad := range []string{"", "a/b", ".", "..", "__id__", strings.Repeat("x", 1501)} {
		assert.Error(t, checkID(bad), "%q", bad)
	}
}
