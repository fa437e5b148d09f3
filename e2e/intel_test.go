package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
)

const scanUUID = "0e3b7a52-4c8e-4d7a-9d1f-6b2c3a4e5f60"

// providers is one local HTTP server standing in for OTX, URLScan.io,
// VirusTotal and AbuseIPDB with their documented JSON shapes; it counts
// requests per path and keeps when the last one arrived and was answered.
type providers struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]int
	served map[string]span
	hook   func() // runs before each request is answered, if set
}

// span is when a request arrived and when its answer was written.
type span struct{ arrived, answered time.Time }

// onRequest sets a func run before each request is answered (nil: none).
func (p *providers) onRequest(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = f
}

func newProviders() *providers {
	p := &providers{counts: map[string]int{}, served: map[string]span{}}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) {
		time.Sleep(300 * time.Millisecond) // a provider takes time; parallel calls overlap
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /api/v1/search/", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"total": 1, "took": 12, "has_more": false, "results": []any{map[string]any{
			"task":   map[string]any{"uuid": scanUUID, "time": "2026-11-19T10:00:00.000Z", "url": "https://evil.example.com/login", "visibility": "public", "method": "api"},
			"page":   map[string]any{"url": "https://evil.example.com/login", "domain": "evil.example.com", "ip": "203.0.113.50", "country": "NL", "status": "200", "title": "Sign in", "asnname": "EXAMPLE-HOSTING-AS"},
			"stats":  map[string]any{"uniqIPs": 3, "malicious": 1},
			"result": "https://urlscan.io/api/v1/result/" + scanUUID + "/",
		}}})
	})
	mux.HandleFunc("GET /api/v1/result/{uuid}/", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("uuid") != scanUUID {
			http.Error(w, `{"message":"Scan is not finished yet or does not exist!","status":404}`, http.StatusNotFound)
			return
		}
		reply(w, map[string]any{
			"task":     map[string]any{"uuid": scanUUID, "time": "2026-11-19T10:00:00.000Z", "url": "https://evil.example.com/login"},
			"page":     map[string]any{"url": "https://evil.example.com/login", "domain": "evil.example.com", "ip": "203.0.113.50", "country": "NL", "title": "Sign in", "status": "200"},
			"verdicts": map[string]any{"overall": map[string]any{"score": 100, "malicious": true, "categories": []string{"phishing"}, "brands": []string{"ExampleBank"}, "tags": []string{"phishing"}}},
			"lists":    map[string]any{"ips": []string{"203.0.113.50"}, "domains": []string{"evil.example.com"}, "urls": []string{"https://evil.example.com/login"}},
			"stats":    map[string]any{"malicious": 1},
		})
	})
	mux.HandleFunc("GET /api/v3/domains/{domain}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"data": map[string]any{"id": r.PathValue("domain"), "type": "domain", "attributes": map[string]any{
			"last_analysis_stats": map[string]any{"malicious": 9, "suspicious": 1, "undetected": 60, "harmless": 20, "timeout": 0},
			"last_analysis_date":  1763500000,
			"reputation":          -42,
			"registrar":           "Example Registrar",
			"categories":          map[string]any{"Forcepoint ThreatSeeker": "phishing"},
			"last_analysis_results": map[string]any{
				"EngineA": map[string]any{"category": "malicious", "result": "phishing"},
				"EngineB": map[string]any{"category": "harmless", "result": "clean"},
			},
		}}})
	})
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.counts[r.URL.Path]++
		hook := p.hook
		p.mu.Unlock()
		if hook != nil {
			hook()
		}
		arrived := time.Now()
		mux.ServeHTTP(w, r)
		p.mu.Lock()
		p.served[r.URL.Path] = span{arrived, time.Now()}
		p.mu.Unlock()
	}))
	return p
}

// span returns when the last request for path arrived and was answered.
func (p *providers) span(path string) span {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served[path]
}

func (p *providers) count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[path]
}

// TestIntelPipeline: one model turn asks for three calls, one of which uses
// another's result through ref:; a later step repeats an identical call,
// which is served from the earlier result without reaching the provider.
func TestIntelPipeline(t *testing.T) {
	tl := starter(t, nil, "tools")
	require.Equal(t, 0, tl.code, tl.stderr)
	for _, want := range []string{"urlscan_search enabled", "virustotal_lookup enabled", "query_otx disabled OTX_API_KEY is not set",
		"abuseipdb_check disabled ABUSEIPDB_API_KEY is not set", "get_alert enabled", "search_alerts enabled"} {
		require.Contains(t, strings.Join(strings.Fields(tl.stdout), " "), strings.Join(strings.Fields(want), " "), tl.stdout)
	}

	vtArgs := map[string]any{"resource_type": "domain", "resource": "evil.example.com"}
	var turn2, step2 *geminitest.Request
	model.use(t, geminitest.Script(
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.JSON(map[string]any{"objective": "Decide whether evil.example.com is a phishing site.", "steps": []map[string]any{
				{"id": "1", "description": "Look up the domain in URLScan and VirusTotal.", "tools": []string{"urlscan_search", "urlscan_result", "virustotal_lookup"}, "expected": "verdicts"},
				{"id": "2", "description": "Confirm the VirusTotal verdict.", "tools": []string{"virustotal_lookup"}, "expected": "same verdict"},
			}})
		},
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.Calls(
				&genai.FunctionCall{Name: "urlscan_result", Args: map[string]any{"uuid": "ref:s1.results.0.uuid"}},
				&genai.FunctionCall{Name: "urlscan_search", Args: map[string]any{"ref_id": "s1", "query": "domain:evil.example.com"}},
				&genai.FunctionCall{Name: "virustotal_lookup", Args: vtArgs},
			)
		},
		func(r *geminitest.Request) geminitest.Reply {
			turn2 = r
			return geminitest.Text("URLScan and VirusTotal both flag evil.example.com as phishing.")
		},
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.JSON(map[string]any{"achieved": false, "insights": []string{"Phishing page imitating ExampleBank."}, "plan_updates": []any{}})
		},
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.Calls(&genai.FunctionCall{Name: "virustotal_lookup", Args: vtArgs})
		},
		func(r *geminitest.Request) geminitest.Reply {
			step2 = r
			return geminitest.Text("VirusTotal still flags it.")
		},
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.JSON(map[string]any{"achieved": true, "insights": []string{}, "plan_updates": []any{}})
		},
		func(r *geminitest.Request) geminitest.Reply {
			return geminitest.Conclusion("## Summary\nevil.example.com is a phishing site.", "true_positive", "medium")
		},
	))
	res := starter(t, nil, "investigate", "--alert", exampleAlert, "--question", "Is evil.example.com malicious?")
	require.Equal(t, 0, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Contains(t, res.stdout, "-> urlscan_result uuid=\"ref:s1.results.0.uuid\"")
	require.Contains(t, res.stdout, "<- virustotal_lookup: served from the identical earlier call")

	// The model got the three responses in call order, the ref filled in.
	require.NotNil(t, turn2)
	resps := turn2.FunctionResponses()
	require.Len(t, resps, 3)
	require.Equal(t, []string{"urlscan_result", "urlscan_search", "virustotal_lookup"}, []string{resps[0].Name, resps[1].Name, resps[2].Name})
	require.Contains(t, toJSON(resps[0].Response), "ExampleBank", "urlscan_result ran with the uuid from urlscan_search")
	require.Contains(t, toJSON(resps[1].Response), scanUUID)
	require.Contains(t, toJSON(resps[2].Response), `"malicious":9`)
	// The repeated call in step 2 got the same result, from the first call.
	require.NotNil(t, step2)
	require.Equal(t, toJSON(resps[2].Response), toJSON(step2.FunctionResponses()[0].Response))
	require.Equal(t, 1, intelSrv.count("/api/v3/domains/evil.example.com"), "the repeated call never reached VirusTotal")
	require.Equal(t, 1, intelSrv.count("/api/v1/search/"))
	require.Equal(t, 1, intelSrv.count("/api/v1/result/"+scanUUID+"/"))

	// The calls ran as activities on their provider's task queue (its rate
	// limit), each named in the history; search and VirusTotal at the same
	// time, the dependent result once search had answered (the providers
	// saw when).
	hist := history(t, workflowIDFrom(t, res.stdout))
	var tools []string
	for _, a := range activitiesIn(t, hist, converter.GetDefaultDataConverter()) {
		if a.Type == "CallTool" {
			require.False(t, a.Local, a.Summary)
			provider := "virustotal"
			if strings.Contains(a.Summary, "urlscan") {
				provider = "urlscan"
			}
			require.Equal(t, "investigations-intel-"+provider, a.Queue, a.Summary)
			tools = append(tools, a.Summary)
		}
	}
	require.ElementsMatch(t, []string{`tool urlscan_search query="domain:evil.example.com" ref_id="s1"`, `tool urlscan_result uuid="ref:s1.results.0.uuid"`,
		`tool virustotal_lookup resource="evil.example.com" resource_type="domain"`}, tools)
	search, vt, result := intelSrv.span("/api/v1/search/"), intelSrv.span("/api/v3/domains/evil.example.com"), intelSrv.span("/api/v1/result/"+scanUUID+"/")
	require.True(t, vt.arrived.Before(search.answered) && search.arrived.Before(vt.answered), "independent calls run at the same time")
	require.True(t, result.arrived.After(search.answered), "the ref: call starts after the call it uses")
	first := min(search.arrived.UnixNano(), vt.arrived.UnixNano())
	last := max(result.answered.UnixNano(), vt.answered.UnixNano())
	sum := search.answered.Sub(search.arrived) + vt.answered.Sub(vt.arrived) + result.answered.Sub(result.arrived)
	saveHistory(t, hist, "pipeline.history.json")
	t.Logf("REPORT 3-call turn (search ∥ virustotal, then result) at the providers: wall %s vs sum of the single calls %s",
		time.Duration(last-first).Round(time.Millisecond), sum.Round(time.Millisecond))
}
