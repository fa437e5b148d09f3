package intel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

// intelTools lists every threat-intelligence tool with the environment
// variable holding its provider's key, a config enabling that provider only,
// and arguments for one valid call.
// okBody is an answer to that call in which the string %s reaches the
// tool's result; provider is the name errors give.
var intelTools = []struct {
	name, env, provider string
	cfg                 func(Provider) Config
	args                map[string]any
	okBody              string
}{
	{"query_otx", "OTX_API_KEY", "AlienVault OTX", func(p Provider) Config { return Config{OTX: p} },
		map[string]any{"indicator": "198.51.100.23", "indicator_type": "IPv4"},
		`{"pulse_info": {"count": 1, "pulses": [{"name": "%s"}]}}`},
	{"urlscan_search", "URLSCAN_API_KEY", "URLScan.io", func(p Provider) Config { return Config{URLScan: p} },
		map[string]any{"query": "domain:evil.example.com"},
		`{"results": [{"task": {"uuid": "0e37e828-a9d9-45c0-ac50-1ca579b86c72"}, "page": {"title": "%s"}}], "total": 1}`},
	{"urlscan_result", "URLSCAN_API_KEY", "URLScan.io", func(p Provider) Config { return Config{URLScan: p} },
		map[string]any{"uuid": "0e37e828-a9d9-45c0-ac50-1ca579b86c72"},
		`{"task": {"uuid": "0e37e828-a9d9-45c0-ac50-1ca579b86c72"}, "page": {"title": "%s"}}`},
	{"virustotal_lookup", "VIRUSTOTAL_API_KEY", "VirusTotal", func(p Provider) Config { return Config{VirusTotal: p} },
		map[string]any{"resource_type": "ip", "resource": "198.51.100.23"},
		`{"data": {"id": "198.51.100.23", "attributes": {"as_owner": "%s"}}}`},
	{"abuseipdb_check", "ABUSEIPDB_API_KEY", "AbuseIPDB", func(p Provider) Config { return Config{AbuseIPDB: p} },
		map[string]any{"ip": "198.51.100.23"},
		`{"data": {"ipAddress": "198.51.100.23", "isp": "%s"}}`},
}

func TestToolsEnabledOnlyWithTheirAPIKey(t *testing.T) {
	key := Provider{APIKey: testAPIKey}
	cases := []struct {
		name string
		cfg  Config
		on   []string
	}{
		{"no keys", Config{}, nil},
		{"OTX only", Config{OTX: key}, []string{"query_otx"}},
		{"URLScan only", Config{URLScan: key}, []string{"urlscan_search", "urlscan_result"}},
		{"VirusTotal only", Config{VirusTotal: key}, []string{"virustotal_lookup"}},
		{"AbuseIPDB only", Config{AbuseIPDB: key}, []string{"abuseipdb_check"}},
		{"base URL without key", Config{OTX: Provider{BaseURL: "http://127.0.0.1:1"}}, nil},
		{"all keys", Config{OTX: key, URLScan: key, VirusTotal: key, AbuseIPDB: key},
			[]string{"query_otx", "urlscan_search", "urlscan_result", "virustotal_lookup", "abuseipdb_check"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			on, off := Tools(tc.cfg, nil)
			var gotOn []string
			for _, tool := range on {
				d := tool.Declaration()
				gotOn = append(gotOn, d.Name)
				b, err := json.Marshal(d)
				require.NoError(t, err)
				require.NotContains(t, string(b), testAPIKey, "declaration of %s", d.Name)
			}
			require.Equal(t, tc.on, gotOn)

			gotOff := map[string]string{}
			for _, d := range off {
				gotOff[d.Name] = d.Reason
				require.NotContains(t, d.Reason, testAPIKey)
			}
			want := map[string]string{}
			for _, it := range intelTools {
				if !slices.Contains(tc.on, it.name) {
					want[it.name] = it.env + " is not set"
				}
			}
			require.Equal(t, want, gotOff)
			require.Len(t, on, len(tc.on), "no tool is both enabled and disabled")
			require.Equal(t, len(intelTools), len(on)+len(off))
		})
	}
}

// No answer of a provider, and no failure to reach it, puts the API key in
// what the model or the logs see: the tool result (as JSON) or the error.
// The fake provider quotes the request's headers, key included, in every
// answer, and the failing transport quotes them in its error.
func TestAPIKeyNeverInResultsOrErrors(t *testing.T) {
	const secret = "s3cr3t-intel-key-do-not-leak"
	echo := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			msg, _ := json.Marshal(fmt.Sprintf("key %v refused; request headers %v", r.Header, r.Header))
			w.Header().Set("Retry-After", "7")
			w.Header().Set("X-Echo", secret)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"message": %s, "detail": %s, "error": {"message": %s}}`, msg, msg, msg)
		}
	}
	statuses := []int{400, 401, 403, 404, 422, 429, 500, 502, 503}
	for _, it := range intelTools {
		t.Run(it.name, func(t *testing.T) {
			check := func(what string, res any, err error) {
				t.Helper()
				if res != nil {
					require.NotContains(t, string(toJSON(t, res)), secret, "%s: result", what)
				}
				for e := err; e != nil; e = errors.Unwrap(e) {
					require.NotContains(t, e.Error(), secret, "%s: error", what)
				}
				require.False(t, res == nil && err == nil, "%s: neither result nor error", what)
			}
			for _, status := range statuses {
				var sent string
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					sent = fmt.Sprint(r.Header)
					echo(status)(w, r)
				}))
				tool := configuredTool(t, it.cfg(Provider{APIKey: secret, BaseURL: srv.URL}), srv.Client(), it.name)
				res, err := tool.Call(context.Background(), it.args)
				srv.Close()
				require.Contains(t, sent, secret, "the key was sent, so the server could quote it")
				check(fmt.Sprintf("HTTP %d", status), res, err)
			}

			// A transport (say, a proxy) whose error quotes the request.
			quoting := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return nil, fmt.Errorf("proxy refused %s with headers %v", r.URL, r.Header)
			})}
			tool := configuredTool(t, it.cfg(Provider{APIKey: secret, BaseURL: "http://intel.invalid"}), quoting, it.name)
			res, err := tool.Call(context.Background(), it.args)
			assertRetryable(t, err)
			check("transport error", res, err)

			// Nothing listening.
			srv := httptest.NewServer(http.NotFoundHandler())
			srv.Close()
			tool = configuredTool(t, it.cfg(Provider{APIKey: secret, BaseURL: srv.URL}), nil, it.name)
			res, err = tool.Call(context.Background(), it.args)
			assertRetryable(t, err)
			check("connection refused", res, err)
		})
	}
}

// The key quoted in an error body is redacted, and the rest of the message kept.
func TestErrorBodyKeyRedacted(t *testing.T) {
	c, _ := fakeProvider(t, respond(500, `{"message": "upstream rejected key `+testAPIKey+`"}`))
	err := c.get(context.Background(), "/x", nil, &struct{}{})
	assertRetryable(t, err)
	require.Equal(t, "Test Provider is unavailable (HTTP 500): upstream rejected key [REDACTED]", err.Error())

	c, _ = fakeProvider(t, respond(400, `{"message": "bad request for `+testAPIKey+`"}`))
	err = c.get(context.Background(), "/x", nil, &struct{}{})
	assertRefused(t, err, upstream.BadRequest, "Test Provider refused the request (HTTP 400): bad request for [REDACTED]")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Every declaration file is one enabled tool's declaration, complete: its
// required parameters exist, and each tool has a one-sentence purpose.
func TestDeclarationsComeFromTheirFiles(t *testing.T) {
	entries, err := declarationFS.ReadDir("declarations")
	require.NoError(t, err)
	var files []string
	for _, e := range entries {
		files = append(files, strings.TrimSuffix(e.Name(), ".json"))
	}
	key := Provider{APIKey: testAPIKey}
	on, _ := Tools(Config{OTX: key, URLScan: key, VirusTotal: key, AbuseIPDB: key}, nil)
	var names []string
	for _, tool := range on {
		d := tool.Declaration()
		names = append(names, d.Name)
		require.Equal(t, declaration(d.Name), d, "%s is read from declarations/%s.json", d.Name, d.Name)
		require.NotEmpty(t, d.Description)
		require.NotNil(t, d.Parameters, d.Name)
		require.NotEmpty(t, d.Parameters.Required, d.Name)
		for _, p := range d.Parameters.Required {
			require.Contains(t, d.Parameters.Properties, p, "%s: required parameter", d.Name)
		}
		for p, s := range d.Parameters.Properties {
			require.NotEmpty(t, s.Type, "%s.%s has a type", d.Name, p)
			require.NotEmpty(t, s.Description, "%s.%s has a description", d.Name, p)
		}
		purpose := tool.Purpose()
		require.True(t, strings.HasSuffix(purpose, ".") && strings.Count(purpose, ". ") == 0, "%s: one sentence: %q", d.Name, purpose)
	}
	require.ElementsMatch(t, files, names)
}

// Provider tools run as regular activities on their provider's queue, never
// as local activities (which would hold the workflow task and escape the
// queue's rate limit).
func TestProviderToolsRunOnTheirQueue(t *testing.T) {
	on, _ := Tools(Config{OTX: Provider{APIKey: "k"}, URLScan: Provider{APIKey: "k"}, VirusTotal: Provider{APIKey: "k"}, AbuseIPDB: Provider{APIKey: "k"}}, nil)
	r, err := tools.NewRegistry(on...)
	require.NoError(t, err)
	require.Equal(t, Groups, r.RateGroups())
	for _, g := range r.RateGroups() {
		r.RouteTo(g, "q-intel-"+g)
	}
	for _, tool := range r.Tools() {
		require.Equal(t, toolcall.Activity, tool.Kind, tool.Name)
		require.True(t, strings.HasPrefix(tool.TaskQueue, "q-intel-"), tool.Name)
	}
	byName := map[string]string{}
	for _, tool := range r.Tools() {
		byName[tool.Name] = tool.TaskQueue
	}
	require.Equal(t, byName["urlscan_search"], byName["urlscan_result"], "one provider, one quota, one queue")
}
