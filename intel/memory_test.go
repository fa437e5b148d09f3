package intel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostileBody is a JSON answer just under maxBody: prefix, then the
// filler element repeated as the items of an array, then suffix. A short
// filler ({} or "") is the worst case for decoding: each three bytes of
// answer become an object, a map or a string header in memory. A JSON escape
// in the prefix keeps a redactor from taking the no-escape fast path.
func hostileBody(prefix, filler, suffix string) []byte {
	var b bytes.Buffer
	b.Grow(maxBody)
	b.WriteString(prefix)
	b.WriteString(`[`)
	for b.Len()+2*len(filler)+2+len(suffix) <= maxBody {
		b.WriteString(filler)
		b.WriteString(",")
	}
	b.WriteString(filler)
	b.WriteString(`]`)
	b.WriteString(suffix)
	return b.Bytes()
}

// allocatedBy is the bytes allocated while f runs (MemStats.TotalAlloc: an
// upper bound of the heap f's call can reach, counted whatever the
// collector does meanwhile). It counts the whole process: no test of this
// package runs in parallel.
func allocatedBy(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxCallAlloc bounds what one tool call may allocate on an answer of
// maxBody bytes: the body itself, read once, and a few MiB for what is
// kept. Decoding the answer whole (into map[string]any, or into typed lists
// without caps) allocates many times the body.
const maxCallAlloc = 3 * maxBody

// TestHostileAnswersStayBounded serves, for each provider tool, an 8 MiB
// answer crafted to fill the fields the tool reads with the most elements
// the bytes allow, and checks that one call allocates at most maxCallAlloc.
func TestHostileAnswersStayBounded(t *testing.T) {
	objs := func(prefix, suffix string) []byte { return hostileBody(prefix, "{}", suffix) }
	strs := func(prefix, suffix string) []byte { return hostileBody(prefix, `""`, suffix) }
	nested := func(prefix, suffix string) []byte { return hostileBody(prefix, `{"a":[{},{}]}`, suffix) }
	otx := func(typ, indicator, section string) (string, map[string]any) {
		return "query_otx", map[string]any{"indicator": indicator, "indicator_type": typ, "section": section}
	}
	const esc = `{"x":"\u0041",`
	cases := []struct {
		name   string
		body   []byte
		tool   string
		args   map[string]any
		status int // an error status: the body is the provider's error reply
	}{
		{"otx analysis wide", objs(esc+`"analysis":{"plugins":{"cuckoo":{"result":{"signatures":`, `}}}}}`), "", nil, 0},
		{"otx analysis nested", nested(esc+`"analysis":{"a":`, `}}`), "", nil, 0},
		{"otx general pulses", objs(esc+`"pulse_info":{"pulses":`, `}}`), "", nil, 0},
		{"otx general tags", strs(esc+`"pulse_info":{"pulses":[{"tags":`, `}]}}`), "", nil, 0},
		{"otx general false_positive", objs(esc+`"false_positive":`, `}`), "", nil, 0},
		{"otx general reputation", nested(esc+`"reputation":`, `}`), "", nil, 0},
		{"otx malware", objs(esc+`"data":`, `}`), "", nil, 0},
		{"otx url_list", objs(esc+`"url_list":`, `}`), "", nil, 0},
		{"otx passive_dns", objs(esc+`"passive_dns":`, `}`), "", nil, 0},
		{"otx reputation activities", objs(esc+`"reputation":{"activities":`, `}}`), "", nil, 0},
		{"virustotal names", strs(esc+`"data":{"attributes":{"names":`, `}}}`), "", nil, 0},
		{"abuseipdb hostnames", strs(esc+`"data":{"hostnames":`, `}}`), "", nil, 0},
		{"urlscan search results", objs(esc+`"results":`, `}`), "", nil, 0},
		{"urlscan result ips", strs(esc+`"lists":{"ips":`, `}}`), "", nil, 0},
		{"urlscan result categories", objs(esc+`"verdicts":{"overall":{"categories":`, `}}}`), "", nil, 0},
		{"error reply error list", objs(esc+`"error":`, `}`), "", nil, 500},
		{"error reply errors list", objs(esc+`"errors":`, `}`), "", nil, 422},
		{"error reply error object", nested(esc+`"error":{"message":"no","a":`, `}}`), "", nil, 503},
		{"error reply unrecognised", objs(esc+`"other":`, `}`), "", nil, 500},
	}
	for i := range cases {
		c := &cases[i]
		switch {
		case strings.Contains(c.name, "analysis"):
			c.tool, c.args = otx("file", strings.Repeat("a", 64), "analysis")
		case strings.Contains(c.name, "general"):
			c.tool, c.args = otx("IPv4", "198.51.100.23", "general")
		case strings.HasPrefix(c.name, "otx reputation"):
			c.tool, c.args = otx("IPv4", "198.51.100.23", "reputation")
		case strings.HasPrefix(c.name, "otx "):
			c.tool, c.args = otx("IPv4", "198.51.100.23", strings.TrimPrefix(c.name, "otx "))
		case strings.HasPrefix(c.name, "virustotal"):
			c.tool, c.args = "virustotal_lookup", map[string]any{"resource_type": "file", "resource": strings.Repeat("a", 64)}
		case strings.HasPrefix(c.name, "abuseipdb"):
			c.tool, c.args = "abuseipdb_check", map[string]any{"ip": "198.51.100.23"}
		case strings.HasPrefix(c.name, "urlscan search"):
			c.tool, c.args = "urlscan_search", map[string]any{"query": "domain:evil.example.com"}
		default:
			c.tool, c.args = "urlscan_result", map[string]any{"uuid": "0e5c5a8a-3b0c-4a38-9a6f-1b2c3d4e5f60"}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.True(t, json.Valid(c.body), "the crafted answer is JSON")
			require.LessOrEqual(t, len(c.body), maxBody)
			fc, _ := fakeProvider(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(cmp.Or(c.status, http.StatusOK))
				_, _ = w.Write(c.body)
			})
			p := Provider{APIKey: testAPIKey, BaseURL: fc.baseURL}
			tool := configuredTool(t, Config{OTX: p, VirusTotal: p, AbuseIPDB: p, URLScan: p}, fc.http, c.tool)
			var res any
			var err error
			n := allocatedBy(func() { res, err = tool.Call(context.Background(), c.args) })
			if c.status != 0 {
				require.Error(t, err)
				require.Less(t, len(err.Error()), 1<<10)
			} else {
				require.NoError(t, err)
				require.Less(t, len(toJSON(t, res)), 64<<10)
			}
			t.Logf("%s: %d MiB allocated for a %d MiB answer", c.name, n>>20, len(c.body)>>20)
			require.LessOrEqual(t, n, uint64(maxCallAlloc), "one call allocated %d MiB on a %d MiB answer", n>>20, len(c.body)>>20)
		})
	}
}
