package main

import (
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseTeardown(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "no": false, "False": false, "1": true, "true": true, "YES": true} {
		got, err := parseTeardown(v)
		require.NoError(t, err, v)
		require.Equal(t, want, got, v)
	}
	_, err := parseTeardown("please")
	require.ErrorContains(t, err, "must be 1")
}

// TestShellQuote: what the closing lines and stack.env print reads back as
// the same string in a shell.
func TestShellQuote(t *testing.T) {
	for _, s := range []string{"bin/starter", "/a b/c", "it's", `$HOME "x" \n`, "", "investigation-x-20261125-181909.245"} {
		out, err := exec.Command("bash", "-c", "printf %s "+shellQuote(s)).Output()
		require.NoError(t, err)
		require.Equal(t, s, string(out))
	}
	require.Equal(t, "bin/starter", shellQuote("bin/starter"))
}

// TestEnvironment: Temporal Cloud and BigQuery settings of the caller stay
// out (and are named in the log), the stack's addresses go in, the
// stand-in's settings only without credentials.
func TestEnvironment(t *testing.T) {
	s, out := testStack(t)
	s.ports = map[string]int{"TEMPORAL": 7233, "TEMPORAL_UI": 8233, "FIRESTORE": 8081, "BIGQUERY": 9050, "STANDIN": 8089}
	s.BigQueryTables = "/r/examples/bigquery/tables.yaml"
	s.buildEnv([]string{"PATH=/bin", "TEMPORAL_API_KEY=secret", "TEMPORAL_TLS_CLIENT_CERT_PATH=/c.pem", "TEMPORAL_ADDRESS=cloud:7233",
		"BIGQUERY_TABLES_CONFIG=/prod.yaml", "PAYLOAD_KEY_FILE=relative.json", "OTX_API_KEY=k"})
	env := strings.Join(s.env, "\n")
	require.NotContains(t, env, "secret")
	require.NotContains(t, env, "/c.pem")
	require.NotContains(t, env, "cloud:7233")
	require.NotContains(t, env, "/prod.yaml")
	require.NotContains(t, env, "relative.json")
	require.Equal(t, "127.0.0.1:7233", s.Getenv("TEMPORAL_ADDRESS"))
	require.Equal(t, "http://localhost:8233", s.Getenv("TEMPORAL_UI_URL"))
	require.Equal(t, "/r/examples/bigquery/tables.yaml", s.Getenv("BIGQUERY_TABLES_CONFIG"))
	require.Equal(t, "http://127.0.0.1:8089", s.Getenv("GOOGLE_GEMINI_BASE_URL"))
	require.Equal(t, "k", s.Getenv("OTX_API_KEY"))
	require.Contains(t, out.String(), "ignoring TEMPORAL_API_KEY for the local stack")
	require.NotContains(t, out.String(), "secret", "the log names variables, never their values")
	require.Contains(t, out.String(), "ignoring BIGQUERY_TABLES_CONFIG=/prod.yaml")
	require.Contains(t, workerSettings(s), "Gemini stand-in http://127.0.0.1:8089")
	require.Contains(t, workerSettings(s), "intelligence keys: OTX_API_KEY")
	require.Contains(t, workerSettings(s), "OpenTelemetry off")

	s.buildEnv([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=https://user:pw@otel.example:4318/x?k=v", "OTEL_EXPORTER_OTLP_HEADERS=api-key=hidden"})
	require.Contains(t, workerSettings(s), "OpenTelemetry https://otel.example:4318 http/protobuf", "a worker without it is not reused")
	require.NotContains(t, workerSettings(s), "pw")
	require.NotContains(t, workerSettings(s), "hidden")

	s.Gemini = gemini{Configured: true, Via: "GEMINI_API_KEY"}
	s.buildEnv([]string{"GEMINI_API_KEY=real"})
	require.Equal(t, "real", s.Getenv("GEMINI_API_KEY"))
	require.Empty(t, s.Getenv("GOOGLE_GEMINI_BASE_URL"))
	require.Contains(t, workerSettings(s), "Gemini via GEMINI_API_KEY")
	require.NotContains(t, workerSettings(s), "real")
}

func TestGeminiSetting(t *testing.T) {
	env := map[string]string{}
	getenv = func(k string) string { return env[k] }
	t.Cleanup(func() { getenv = defaultGetenv })
	require.Equal(t, gemini{Via: "GEMINI_API_KEY"}, geminiSetting("127.0.0.1"))
	env["GOOGLE_API_KEY"] = "k"
	require.Equal(t, gemini{Configured: true, Via: "GOOGLE_API_KEY"}, geminiSetting("127.0.0.1"))
	env["GOOGLE_GEMINI_BASE_URL"] = "http://x"
	require.Equal(t, gemini{Configured: true, Via: "GOOGLE_GEMINI_BASE_URL=http://x"}, geminiSetting("127.0.0.1"))
	env = map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": "True"}
	require.True(t, geminiSetting("127.0.0.1").Configured)

	// The marker key with a URL the stack would not write is the user's.
	for _, u := range []string{"http://127.0.0.1:8089/v1", "https://127.0.0.1:8089", "http://10.0.0.1:8089", "http://127.0.0.1:08089", ""} {
		env = map[string]string{"GEMINI_API_KEY": standinKey, "GOOGLE_GEMINI_BASE_URL": u}
		require.True(t, geminiSetting("127.0.0.1").Configured, u)
		require.False(t, geminiSetting("127.0.0.1").OwnStandin, u)
	}
}

// TestSourcedStackEnv: a shell that sourced stack.env of a stack on the
// stand-in (on these ports or others) starts the next stack with the
// stand-in again, not with the old stand-in's URL as the user's endpoint;
// with real credentials as well, the stand-in's settings reach no service.
func TestSourcedStackEnv(t *testing.T) {
	first, _ := testStack(t)
	first.ports = map[string]int{"STANDIN": 18089}
	require.True(t, first.usingStandin())
	require.NoError(t, first.writeEnvFile())
	out, err := exec.Command("bash", "-c", ". "+shellQuote(first.EnvFile())+" && env").Output()
	require.NoError(t, err)
	sourced := strings.Split(strings.TrimSpace(string(out)), "\n")
	env := map[string]string{"STACK_ROOT": t.TempDir()}
	for _, kv := range sourced {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	getenv = func(k string) string { return env[k] }
	t.Cleanup(func() { getenv = defaultGetenv })

	for _, port := range []string{"", "18089"} { // the default port, and the first stack's
		env["STACK_STANDIN_PORT"] = port
		s, err := loadStack(table, newLogger(io.Discard, io.Discard))
		require.NoError(t, err)
		require.True(t, s.usingStandin(), "the stand-in starts again")
		s.buildEnv(sourced)
		require.Equal(t, s.standinURL(), s.Getenv("GOOGLE_GEMINI_BASE_URL"))
		require.Equal(t, standinKey, s.Getenv("GEMINI_API_KEY"))
		require.Contains(t, workerSettings(s), "Gemini stand-in "+s.standinURL())
	}

	env["GOOGLE_API_KEY"] = "real"
	s, err := loadStack(table, newLogger(io.Discard, io.Discard))
	require.NoError(t, err)
	require.Equal(t, gemini{Configured: true, Via: "GOOGLE_API_KEY", OwnStandin: true}, s.Gemini)
	s.buildEnv(append(sourced, "GOOGLE_API_KEY=real"))
	require.Empty(t, s.Getenv("GOOGLE_GEMINI_BASE_URL"))
	require.Empty(t, s.Getenv("GEMINI_API_KEY"))
	require.Equal(t, "real", s.Getenv("GOOGLE_API_KEY"))
}

// TestPortsRecord: what up records, stop reads back.
func TestPortsRecord(t *testing.T) {
	s, _ := testStack(t)
	s.ports = map[string]int{"TEMPORAL": 17233, "FIRESTORE": 18081}
	require.NoError(t, s.writeRecord("ports", "x", "")) // makes the directory
	require.NoError(t, writeFileAtomic(s.portsFile(), []byte(s.portLines())))
	other := *s
	other.ports = map[string]int{"TEMPORAL": 7233, "FIRESTORE": 8081}
	require.NoError(t, other.loadPorts())
	require.Equal(t, s.ports, other.ports)
	require.Equal(t, "STACK_FIRESTORE_PORT=18081\nSTACK_TEMPORAL_PORT=17233\n", s.portLines())
}

func TestShow(t *testing.T) {
	s, _ := testStack(t)
	p := filepath.Join(s.Root, ".data", "stack.env")
	require.Equal(t, ".data/stack.env", s.show(p))
	s.UserCwd = "/elsewhere"
	require.Equal(t, p, s.show(p), "absolute for a user working elsewhere")
}

// TestNoBigQuerySubAgent: STACK_BIGQUERY_TABLES=none starts the workers
// without the BigQuery sub-agent (BIGQUERY_TABLES_CONFIG empty).
func TestNoBigQuerySubAgent(t *testing.T) {
	env := map[string]string{"STACK_ROOT": t.TempDir(), "STACK_BIGQUERY_TABLES": "none"}
	getenv = func(k string) string { return env[k] }
	t.Cleanup(func() { getenv = defaultGetenv })
	s, err := loadStack(table, newLogger(io.Discard, io.Discard))
	require.NoError(t, err)
	require.Contains(t, s.exports(), "BIGQUERY_TABLES_CONFIG=")
	env["STACK_BIGQUERY_TABLES"] = ""
	s, err = loadStack(table, newLogger(io.Discard, io.Discard))
	require.NoError(t, err)
	require.Contains(t, s.exports(), "BIGQUERY_TABLES_CONFIG="+filepath.Join(env["STACK_ROOT"], "examples/bigquery/tables.yaml"))
}

// TestSeconds: NaN passed the old "not <= 0" check and, with Inf and huge
// values, converted to a negative duration: every wait ended at once.
func TestSeconds(t *testing.T) {
	env := map[string]string{}
	getenv = func(k string) string { return env[k] }
	t.Cleanup(func() { getenv = defaultGetenv })
	d, err := seconds("STACK_STOP_TIMEOUT", 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, 20*time.Second, d)
	env["STACK_STOP_TIMEOUT"] = "1.5"
	d, err = seconds("STACK_STOP_TIMEOUT", 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, 1500*time.Millisecond, d)
	env["STACK_STOP_TIMEOUT"] = "9223372036" // just under the limit
	d, err = seconds("STACK_STOP_TIMEOUT", 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, 9223372036*time.Second, d)
	for _, raw := range []string{"NaN", "nan", "Inf", "+Inf", "-1", "0", "1e300", "x", "9223372036.854775807", "9223372036.854776"} {
		env["STACK_STOP_TIMEOUT"] = raw
		_, err := seconds("STACK_STOP_TIMEOUT", 20*time.Second)
		require.EqualError(t, err, `STACK_STOP_TIMEOUT="`+raw+`" is not a number of seconds`, raw)
	}
}
