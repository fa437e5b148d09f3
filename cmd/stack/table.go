package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/secops-agent/investigator/intake"
)

// table is every service the supervisor knows. A new service is one entry;
// a profile runs the entries that name it.
var table = []Service{
	{
		// With PAYLOAD_KEY_FILE the worker and the starter encrypt every
		// payload in history; `starter codec-server` decrypts them for the
		// Web UI, which the dev server points at it. It starts first: the
		// key file is read (and checked) before anything else starts.
		Name: "codec-server", Title: "codec server", Profiles: []Profile{Dev, Eval, Cluster},
		Enabled: func(s *Stack) (bool, string) { return s.PayloadKeyFile != "", "" },
		Ports:   []Port{{"CODEC", 8234}},
		Launch: func(s *Stack, _ int) (Launch, error) {
			starter, err := s.program("starter", "go tool task build")
			return Launch{
				Argv: []string{starter, "codec-server", "--listen", s.addr("CODEC"),
					"--web-ui-origin", s.UIURL() + ",http://" + s.addr("TEMPORAL_UI"), "--log-level", "info"},
				Note: fmt.Sprintf(", decrypting history for the Web UI (keys from %s)", s.PayloadKeyFile),
			}, err
		},
		// The CORS preflight answers 204 without touching a payload.
		Ready: HTTP{Port: "CODEC", Method: http.MethodOptions, Path: "/decode", Status: http.StatusNoContent,
			Header: map[string]string{"Origin": "{UI}", "Access-Control-Request-Method": "POST"}},
		Timeout: 20 * time.Second, TimeoutVar: "CODEC",
		Match:   "codec-server",
		Secrets: true, // CODEC_SERVER_TOKEN
	},
	{
		// The sample security logs of examples/bigquery, loaded into memory
		// at every start (about 10 s): it opens its port only once loaded,
		// and starts beside the others so the load overlaps theirs.
		Name: "bigquery", Title: "BigQuery emulator", Profiles: []Profile{Dev, Eval, Cluster},
		Ports: []Port{{"BIGQUERY", 9050}, {"BIGQUERY_GRPC", 9060}},
		Launch: func(s *Stack, _ int) (Launch, error) {
			if !isExecutable(s.BigQuery) {
				return Launch{}, fmt.Errorf("BigQuery emulator not found at %s: run 'go tool task setup' (a one-time build of about 11 minutes)", s.BigQuery)
			}
			if !isFile(s.BigQueryData) {
				return Launch{}, fmt.Errorf("BigQuery sample data not found: %s", s.BigQueryData)
			}
			godebug := "invalidptr=0"
			if g := s.Getenv("GODEBUG"); g != "" {
				godebug = g + "," + godebug
			}
			return Launch{
				Argv: []string{s.BigQuery, "--project=" + s.BigQueryProject, "--host=" + s.Host,
					fmt.Sprintf("--port=%d", s.port("BIGQUERY")), fmt.Sprintf("--grpc-port=%d", s.port("BIGQUERY_GRPC")),
					"--data-from-yaml=" + s.BigQueryData},
				// The emulator's ZetaSQL binding keeps small integers in
				// pointer variables: the Go runtime aborts at random
				// ("invalid pointer found on stack") unless this check is off.
				Env:  []string{"GODEBUG=" + godebug},
				Note: fmt.Sprintf(", %s.%s loaded from %s (in memory: reloaded at every start)", s.BigQueryProject, s.BigQueryDataset, s.show(s.BigQueryData)),
			}, nil
		},
		Ready:   bigQueryReady,
		Timeout: 90 * time.Second, TimeoutVar: "BIGQUERY",
		Match: "bigquery-emulator",
	},
	{
		Name: "temporal", Title: "Temporal server", Profiles: []Profile{Dev, Eval},
		Needs: []string{"codec-server"},
		Ports: []Port{{"TEMPORAL", 7233}, {"TEMPORAL_UI", 8233}},
		Launch: func(s *Stack, _ int) (Launch, error) {
			if !isExecutable(s.Temporal) {
				return Launch{}, fmt.Errorf("Temporal CLI not found at %s: run 'go tool task setup'", s.Temporal)
			}
			argv := []string{s.Temporal, "server", "start-dev",
				"--ip", s.Host, "--port", fmt.Sprint(s.port("TEMPORAL")), "--ui-port", fmt.Sprint(s.port("TEMPORAL_UI")),
				"--db-filename", s.DataDir + "/temporal.db",
				// Write-ahead log without an fsync per commit: each activity's
				// completion was 8–10 ms slower with SQLite's default rollback
				// journal. A crash of the server loses nothing committed; a
				// power loss may lose the last moments (design/durability.md).
				"--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal",
				"--search-attribute", "AlertId=Keyword", "--search-attribute", "Verdict=Keyword",
				"--dynamic-config-value", "system.enableActivityEagerExecution=true",
				"--log-level", "warn", "--color", "never"}
			if s.PayloadKeyFile != "" {
				argv = append(argv, "--ui-codec-endpoint", s.CodecURL())
			}
			return Launch{Argv: argv, Note: ", Web UI " + s.UIURL()}, nil
		},
		Ready:   GRPCHealth{Port: "TEMPORAL", Service: "temporal.api.workflowservice.v1.WorkflowService"},
		Timeout: 60 * time.Second, TimeoutVar: "TEMPORAL",
		Match: "temporal",
		Setup: func(ctx context.Context, s *Stack) error {
			s.checkUICodec(ctx)
			return s.ensureSearchAttributes(ctx)
		},
	},
	{
		Name: "firestore", Title: "Firestore emulator", Profiles: []Profile{Dev, Eval, Cluster},
		Ports:  []Port{{"FIRESTORE", 8081}},
		Launch: firestoreLaunch,
		Ready:  firestoreReady, Timeout: 90 * time.Second, TimeoutVar: "FIRESTORE",
		Match:      "firestore",
		BeforeStop: func(s *Stack) error { return s.saveFirestore(false) },
	},
	{
		// Only without Gemini credentials: it speaks the Gemini REST
		// protocol with scripted answers, so the whole system runs offline.
		Name: "gemini-standin", Title: "Gemini stand-in", Profiles: []Profile{Dev, Eval, Cluster},
		Enabled: func(s *Stack) (bool, string) {
			if s.usingStandin() {
				return true, ""
			}
			return false, "Gemini: using your configuration (" + s.Gemini.Via + ")"
		},
		Ports: []Port{{"STANDIN", 8089}},
		Launch: func(s *Stack, _ int) (Launch, error) {
			standin, err := s.program("gemini-standin", "go tool task build")
			return Launch{Argv: []string{standin, "--addr", s.addr("STANDIN")}}, err
		},
		// Any HTTP answer will do: the stand-in need not serve "/".
		Ready:   HTTP{Port: "STANDIN", Path: "/", Status: -1},
		Timeout: 30 * time.Second, TimeoutVar: "STANDIN",
		Match: "gemini-standin",
		Setup: func(_ context.Context, s *Stack) error {
			s.log.warn("no Gemini credentials (GEMINI_API_KEY, GOOGLE_API_KEY, GOOGLE_GENAI_USE_VERTEXAI,")
			s.log.warn("GOOGLE_GEMINI_BASE_URL) are set: model answers are SCRIPTED by the offline Gemini")
			s.log.warn("stand-in at %s, not produced by a real model.", s.standinURL())
			s.log.warn("Set GEMINI_API_KEY to use Gemini.")
			return nil
		},
	},
	{
		// Reused only when it runs the current bin/worker with this run's
		// settings; otherwise restarted, so that a rebuilt worker or a newly
		// set GEMINI_API_KEY takes effect. It dials Temporal at start; the
		// BigQuery emulator and the stand-in are reached only by
		// activities, and the stack is up only once they answer, so it
		// starts while the emulator loads. It stops before the Firestore
		// emulator, whose data is saved then: nothing writes during the save.
		// The cluster runs two, each its own pollers on the one task queue.
		Name: "worker", Title: "worker", Profiles: []Profile{Dev, Cluster}, Count: map[Profile]int{Cluster: 2},
		Needs: []string{"temporal", "temporal-frontend", "firestore"},
		Launch: func(s *Stack, _ int) (Launch, error) {
			worker, err := s.program("worker", "go tool task build")
			if err == nil {
				err = writeMCPConfig(s)
			}
			return Launch{Argv: []string{worker}, Env: workerEnv(s), Note: " (polling Temporal)",
				Record: map[string]string{"stopwait": workerStopWait(s).String()}}, err
		},
		// The SDK logs this once it polls. Without it (a quiet logger), a
		// worker still alive after the timeout is taken as started.
		Ready: LogLine{Text: "Started Worker"}, ReadyOnTimeout: true,
		Timeout: 20 * time.Second, TimeoutVar: "WORKER",
		Reuse: ReuseRecorded, Settings: workerSettings,
		Match: "worker", Secrets: true,
	},
	{
		// The scorecard's worker (scripts/eval.sh): its own Firestore
		// database, which `starter eval` empties before each case, and its
		// own task queue, so the analyst's data and runs are never touched.
		// The analyst's MCP tools too (evalMCPEnv), so the scorecard
		// measures the tools that ship. One left by an interrupted eval is
		// replaced.
		Name: "eval-worker", Title: "eval worker", Profiles: []Profile{Eval},
		Needs: []string{"temporal", "firestore"},
		Launch: func(s *Stack, _ int) (Launch, error) {
			worker, err := s.program("worker", "go tool task build")
			var mcp []string
			if err == nil {
				mcp, err = evalMCPEnv(s)
			}
			return Launch{Argv: []string{worker},
				Env:    append(append(mcp, workerStopEnv(s)...), "FIRESTORE_DATABASE=investigator-eval", "TEMPORAL_TASK_QUEUE=investigations-eval"),
				Note:   " (polling investigations-eval, Firestore database investigator-eval)",
				Record: map[string]string{"stopwait": workerStopWait(s).String()}}, err
		},
		Ready: LogLine{Text: "Started Worker"}, ReadyOnTimeout: true,
		Timeout: 20 * time.Second, TimeoutVar: "WORKER",
		Reuse: ReuseNever,
		Match: "worker", Secrets: true,
	},
	// The intake's entries (design/intake.md, cmd/stack/intake.go): the
	// Pub/Sub emulator, its topics and subscriptions (a job: the emulator
	// keeps them in memory only), a local stand-in for Slack, and one
	// starter intake on the subscription alerts-intake and a local webhook.
	{
		Name: "pubsub", Title: "Pub/Sub emulator", Profiles: []Profile{Dev, Cluster},
		Ports: []Port{{"PUBSUB", 8085}},
		Launch: func(s *Stack, _ int) (Launch, error) {
			if _, err := exec.LookPath("gcloud"); err != nil {
				return Launch{}, errors.New("gcloud not found: the Pub/Sub emulator needs the Google Cloud CLI and its google-cloud-cli-pubsub-emulator package (see 'go tool task setup')")
			}
			return Launch{
				Argv: []string{"gcloud", "beta", "emulators", "pubsub", "start", "--host-port=" + s.addr("PUBSUB"), "--project=" + s.Project},
				Env:  []string{"CLOUDSDK_CORE_DISABLE_PROMPTS=1"},
				Note: " (in memory: topics made at every start)",
				Hint: "install the emulator with: sudo apt-get install -y google-cloud-cli-pubsub-emulator (or run 'go tool task setup' as root)",
			}, nil
		},
		Ready:   HTTP{Port: "PUBSUB", Path: "/", BodyPrefix: "Ok"},
		Timeout: 90 * time.Second, TimeoutVar: "PUBSUB",
		Match: "pubsub",
	},
	{
		// Reused or not, an emulator may be fresh: the topics are made
		// every time (what exists is left as it is).
		Name: "pubsub-topics", Title: "Pub/Sub topics and subscriptions", Profiles: []Profile{Dev, Cluster},
		Needs: []string{"pubsub"}, Job: true, Reuse: ReuseNever,
		// A job is done when it exits 0; the line is what it prints then.
		Ready: LogLine{Text: "Pub/Sub in "}, Match: "intake setup",
		Launch: func(s *Stack, _ int) (Launch, error) {
			starter, err := s.program("starter", "go tool task build")
			return Launch{Argv: []string{starter, "intake", "setup"}}, err
		},
		// Shorter than the emulator's 90 s, gcloud's Java emulator starting
		// cold (as Firestore's does): making three topics and three
		// subscriptions on a running emulator takes seconds, and a hung
		// job should fail the start sooner. STACK_PUBSUB_TIMEOUT sets both.
		Timeout: 60 * time.Second, TimeoutVar: "PUBSUB",
	},
	{
		Name: "slack-receiver", Title: "local Slack receiver", Profiles: []Profile{Dev, Cluster},
		Enabled: func(s *Stack) (bool, string) {
			if s.OwnSlack {
				return false, "Slack: verdicts go to your SLACK_WEBHOOK_URL"
			}
			return true, ""
		},
		Ports: []Port{{"SLACK", 8095}},
		Launch: func(s *Stack, _ int) (Launch, error) {
			receiver, err := s.program("slack-receiver", "go tool task build")
			return Launch{Argv: []string{receiver, "--addr", s.addr("SLACK")}, Note: ", messages at http://" + s.addr("SLACK") + "/messages"}, err
		},
		Ready:   HTTP{Port: "SLACK", Path: "/messages"},
		Timeout: 20 * time.Second, TimeoutVar: "SLACK",
		Match: "slack-receiver",
	},
	{
		// One intake on the subscription and a local webhook; more can run
		// beside it (bin/starter intake ...): they share one waiting room.
		// The cluster runs two on the one subscription (the second on the
		// next port): Pub/Sub shares the messages out between them.
		Name: "intake", Title: "alert intake", Profiles: []Profile{Dev, Cluster}, Count: map[Profile]int{Cluster: 2},
		// pubsub directly too: a stop ends the intake before the emulator.
		Needs: []string{"temporal", "temporal-frontend", "firestore", "pubsub", "pubsub-topics", "slack-receiver", "worker"},
		Ports: []Port{{"INTAKE", 8090}},
		Launch: func(s *Stack, k int) (Launch, error) {
			starter, err := s.program("starter", "go tool task build")
			if err != nil {
				return Launch{}, err
			}
			token, err := s.intakeToken()
			if err != nil {
				return Launch{}, err
			}
			return Launch{
				Argv: append([]string{starter}, s.intakeArgs(token, k)...),
				Note: fmt.Sprintf(": alerts from %s and http://%s/v1/alerts (token in %s)", intake.Subscription(s.Project, intake.SubscriptionIntake), s.intakeAddr(k), s.show(token)),
			}, nil
		},
		Ready:   LogLine{Text: "intake: webhook on"},
		Timeout: 30 * time.Second, TimeoutVar: "INTAKE",
		Reuse: ReuseRecorded, Settings: intakeSettings,
		Match: "intake",
	},
}

var bigQueryReady = bigQueryProbe{}

// bigQueryProbe is ready when the emulator serves the sample dataset.
type bigQueryProbe struct{}

func (bigQueryProbe) Check(ctx context.Context, s *Stack, name string) error {
	return HTTP{Port: "BIGQUERY", Path: "/bigquery/v2/projects/" + s.BigQueryProject + "/datasets/" + s.BigQueryDataset}.Check(ctx, s, name)
}

// firestoreReady: the emulator answers "Ok" on /.
var firestoreReady = HTTP{Port: "FIRESTORE", Path: "/", BodyPrefix: "Ok"}

// firestoreLaunch starts the emulator with the newest save.
func firestoreLaunch(s *Stack, _ int) (Launch, error) {
	if _, err := exec.LookPath("gcloud"); err != nil {
		return Launch{}, fmt.Errorf("gcloud not found: the Firestore emulator needs the Google Cloud CLI (see 'go tool task setup')")
	}
	l := Launch{
		Argv: []string{"gcloud", "emulators", "firestore", "start", "--host-port=" + s.addr("FIRESTORE")},
		Env:  []string{"CLOUDSDK_CORE_DISABLE_PROMPTS=1"},
		// What a later save exports, whatever its own environment says.
		Record: map[string]string{"target": s.Project + "\n" + orDefault(s.Getenv("FIRESTORE_DATABASE"), "(default)")},
	}
	from := "empty: nothing saved yet"
	if save, _, ok := s.latestSave(); ok {
		if meta, ok := exportMetadata(save); ok {
			l.Argv = append(l.Argv, "--import-data="+meta)
			from = "data loaded from " + s.show(save)
			l.Hint = fmt.Sprintf("the Firestore emulator did not start with the data saved in %s: move that directory away to start with an empty emulator, or run 'go tool task clean' to wipe all local state", s.show(save))
		} else {
			s.log.warn("ignoring %s: it holds no export metadata file", s.show(save))
		}
	}
	l.Note = fmt.Sprintf(" (%s; saved to %s when the stack stops)", from, s.show(s.SaveDir()))
	return l, nil
}

// program is a binary of STACK_BIN_DIR, or an error saying how to build it.
func (s *Stack) program(name, build string) (string, error) {
	p := s.BinDir + "/" + name
	if !isExecutable(p) {
		return p, fmt.Errorf("%s not found: run '%s'", p, build)
	}
	return p, nil
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// workerSettings is what the worker runs with, to tell whether a running
// one fits this run: a summary, then every variable of its environment it
// reads (workerVarItems), secrets hashed, never a key in clear.
func workerSettings(s *Stack) string {
	var keys []string
	for _, v := range []string{"OTX_API_KEY", "URLSCAN_API_KEY", "VIRUSTOTAL_API_KEY", "ABUSEIPDB_API_KEY"} {
		if s.Getenv(v) != "" {
			keys = append(keys, v)
		}
	}
	if len(keys) == 0 {
		keys = []string{"none"}
	}
	model := "Gemini via " + s.Gemini.Via
	if s.usingStandin() {
		model = "Gemini stand-in " + s.standinURL()
	}
	slack := "the local receiver " + s.localSlackURL()
	if s.OwnSlack {
		slack = "your SLACK_WEBHOOK_URL"
	}
	mcp := s.Getenv("MCP_CONFIG")
	if mcp == "" {
		mcp = mcpConfig(s)
	}
	summary := fmt.Sprintf("%s, model %s, payload key file %s, intelligence keys: %s, Pub/Sub %s, Slack %s, OpenTelemetry %s, MCP %s",
		model, orDefault(s.Getenv("GEMINI_MODEL"), "default"), orDefault(s.PayloadKeyFile, "none"), strings.Join(keys, " "), s.addr("PUBSUB"), slack, otelSettings(s), mcp)
	return strings.Join(append([]string{summary}, s.workerVarItems(append(append([]string{}, s.env...), workerEnv(s)...))...), ", ")
}

// workerVars are the variables the worker reads (config/config.go and the
// packages the worker imports; TestWorkerSettingsCoverItsVariables finds
// them in the source), and workerVarPrefixes those the OpenTelemetry and
// Google SDKs read. A worker started with another value of any of them is
// not reused.
var workerVars = []string{
	"ABUSEIPDB_API_KEY", "ABUSEIPDB_BASE_URL", "BIGQUERY_EMULATOR_HOST", "BIGQUERY_RUNBOOKS_DIR", "BIGQUERY_TABLES_CONFIG",
	"FIRESTORE_DATABASE", "FIRESTORE_EMULATOR_HOST", "GEMINI_API_KEY", "GEMINI_EMBEDDING_MODEL", "GEMINI_MODEL",
	"INTEL_RATE_LIMITS", "INVESTIGATOR_PRICES", "LOG_LEVEL", "MCP_CONFIG",
	"MEMORY_AUTO_APPROVE", "MEMORY_MIN_SIMILARITY", "MEMORY_RECALL_LIMIT", "OTX_API_KEY", "OTX_BASE_URL",
	"PAYLOAD_KEY_FILE", "PUBSUB_EMULATOR_HOST", "REGISTER_SEARCH_ATTRIBUTES", "SLACK_WEBHOOK_URL",
	"TASK_QUEUE_ACTIVITIES_PER_SECOND", "TEMPORAL_ADDRESS", "TEMPORAL_API_KEY", "TEMPORAL_DEPLOYMENT_NAME", "TEMPORAL_NAMESPACE",
	"TEMPORAL_TASK_QUEUE", "TEMPORAL_TLS", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_UI_URL",
	"TEMPORAL_WORKER_BUILD_ID", "URLSCAN_API_KEY", "URLSCAN_BASE_URL", "VIRUSTOTAL_API_KEY", "VIRUSTOTAL_BASE_URL",
	"WORKER_ACTIVITIES_PER_SECOND", "WORKER_ALERT_CACHE", "WORKER_ALLOW_MIXED_SETTINGS", "WORKER_MAX_CONCURRENT_ACTIVITIES",
	"WORKER_STOP_TIMEOUT", "WORKER_TRANSCRIPT_CACHE",
}

var workerVarPrefixes = []string{"OTEL_", "GOOGLE_"}

// starterVars are the variables `starter intake`'s own code reads beyond
// the worker's; not the codec server's or `intake publish`'s, which would
// restart an intake for nothing (TestIntakeSettingsCoverItsVariables finds
// them in the source). An intake started with another value of any of
// these or of workerVars is not reused.
var starterVars = []string{
	"INTAKE_APPROVAL_TIMEOUT", "INTAKE_DEAD_LETTER_TOPIC", "INTAKE_LISTEN", "INTAKE_RESULTS_TOPIC", "INTAKE_SUBSCRIPTION", "INTAKE_TOKEN_FILE",
}

// intakeSettings is what an intake runs with, to tell whether a running one
// fits this run, as workerSettings is the worker's: its arguments, the
// hash of its token file's content (a new token under the same path), then
// every variable of its environment bin/starter reads, secrets hashed.
func intakeSettings(s *Stack) string {
	args := strings.Join(s.intakeArgs(s.intakeTokenPath(), 1), " ")
	if b, err := os.ReadFile(s.intakeTokenPath()); err == nil {
		args += " (token #" + s.digest(b) + ")"
	}
	isVar := func(k string) bool { return isWorkerVar(k) || slices.Contains(starterVars, k) }
	return strings.Join(append([]string{args}, s.varItems(s.env, isVar)...), ", ")
}

// clearVars are shown as they are; every other value (keys, webhook and
// base URLs that may carry a token, OTEL headers, anything new) only as a
// hash.
var clearVars = map[string]bool{
	"BIGQUERY_EMULATOR_HOST": true, "BIGQUERY_RUNBOOKS_DIR": true, "BIGQUERY_TABLES_CONFIG": true, "FIRESTORE_DATABASE": true,
	"FIRESTORE_EMULATOR_HOST": true, "GEMINI_EMBEDDING_MODEL": true, "GEMINI_MODEL": true, "GOOGLE_CLOUD_LOCATION": true,
	"GOOGLE_CLOUD_PROJECT": true, "GOOGLE_CLOUD_REGION": true, "GOOGLE_GENAI_USE_VERTEXAI": true, "INTEL_RATE_LIMITS": true,
	"INVESTIGATOR_PRICES": true, "LOG_LEVEL": true, "MCP_CONFIG": true, "MEMORY_AUTO_APPROVE": true, "MEMORY_MIN_SIMILARITY": true,
	"MEMORY_RECALL_LIMIT": true, "PAYLOAD_KEY_FILE": true, "PUBSUB_EMULATOR_HOST": true, "REGISTER_SEARCH_ATTRIBUTES": true,
	"TASK_QUEUE_ACTIVITIES_PER_SECOND": true, "TEMPORAL_ADDRESS": true, "TEMPORAL_DEPLOYMENT_NAME": true, "TEMPORAL_NAMESPACE": true,
	"TEMPORAL_TASK_QUEUE": true, "TEMPORAL_TLS": true, "TEMPORAL_UI_URL": true, "TEMPORAL_WORKER_BUILD_ID": true,
	"WORKER_ACTIVITIES_PER_SECOND": true, "WORKER_ALERT_CACHE": true, "WORKER_ALLOW_MIXED_SETTINGS": true,
	"WORKER_MAX_CONCURRENT_ACTIVITIES": true, "WORKER_STOP_TIMEOUT": true, "WORKER_TRANSCRIPT_CACHE": true,
	"INTAKE_APPROVAL_TIMEOUT": true, "INTAKE_DEAD_LETTER_TOPIC": true, "INTAKE_LISTEN": true, "INTAKE_RESULTS_TOPIC": true,
	"INTAKE_SUBSCRIPTION": true, "INTAKE_TOKEN_FILE": true,
}

// fileVars name files the worker reads at start: their content counts too
// (a new key or tool list under the same path).
var fileVars = []string{"BIGQUERY_TABLES_CONFIG", "GOOGLE_APPLICATION_CREDENTIALS", "INTAKE_TOKEN_FILE", "INVESTIGATOR_PRICES", "MCP_CONFIG", "PAYLOAD_KEY_FILE"}

func isWorkerVar(k string) bool {
	return slices.Contains(workerVars, k) || slices.ContainsFunc(workerVarPrefixes, func(p string) bool { return strings.HasPrefix(k, p) })
}

// workerVarItems are varItems of the worker's variables.
func (s *Stack) workerVarItems(env []string) []string { return s.varItems(env, isWorkerVar) }

// varItems are NAME=value (clearVars) or NAME=#hash for each variable of
// isVar set in env (the last of a name wins, as for the process), in name
// order; a file's content adds its own hash.
func (s *Stack) varItems(env []string, isVar func(string) bool) []string {
	vals := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && isVar(k) {
			vals[k] = v
		}
	}
	var items []string
	for k, v := range vals {
		if strings.TrimSpace(v) == "" { // what the worker takes for unset
			continue
		}
		item := k + "=#" + s.digest([]byte(k+"="+v))
		if clearVars[k] {
			item = k + "=" + v
		}
		if slices.Contains(fileVars, k) {
			if b, err := os.ReadFile(v); err == nil {
				item += " (content #" + s.digest(b) + ")"
			}
		}
		items = append(items, item)
	}
	sort.Strings(items)
	return items
}

// digest is a short HMAC-SHA256 of b under the stack's settings key: enough
// to tell values apart; without the key, a low-entropy token cannot be
// confirmed from it offline.
func (s *Stack) digest(b []byte) string {
	m := hmac.New(sha256.New, s.settingsKey())
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil)[:6])
}

// settingsKeyFile holds the stack's random key for digest (0600). Removed
// (clean), it is made anew: what was recorded then reads as other settings.
func (s *Stack) settingsKeyFile() string { return filepath.Join(s.DataDir, "settings.key") }

// settingsKey reads the stack's settings key, making it on first use. Two
// invocations making it at once agree: the file is linked into place, never
// overwritten. A key that cannot be kept is random for this run, so a
// recorded instance is restarted rather than its secrets hashed without one.
func (s *Stack) settingsKey() []byte {
	path := s.settingsKeyFile()
	if b, err := os.ReadFile(path); err == nil && len(b) == settingsKeyLen {
		return b
	}
	key := make([]byte, settingsKeyLen)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	if s.mkdirPrivate(s.DataDir) == nil {
		tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
		if os.WriteFile(tmp, key, 0o600) == nil {
			if os.Link(tmp, path) != nil { // there already, or a broken one
				if b, err := os.ReadFile(path); err != nil || len(b) != settingsKeyLen {
					_ = os.Rename(tmp, path)
				}
			}
			_ = os.Remove(tmp)
		}
		if b, err := os.ReadFile(path); err == nil && len(b) == settingsKeyLen {
			return b
		}
	}
	return key
}

const settingsKeyLen = 32

// workerEnv is what the stack adds to the analyst's worker's environment.
func workerEnv(s *Stack) []string { return append(mcpEnv(s), workerStopEnv(s)...) }

// workerStopEnv gives the worker a stop timeout below the stack's wait for
// it (workerStopWait): with the worker's own default, 3 minutes, a stop
// after STACK_STOP_TIMEOUT killed it mid-drain, before its last progress
// and telemetry were written. A caller's WORKER_STOP_TIMEOUT stays, and
// the stack waits longer instead.
func workerStopEnv(s *Stack) []string {
	if strings.TrimSpace(s.Getenv("WORKER_STOP_TIMEOUT")) != "" {
		return nil
	}
	return []string{"WORKER_STOP_TIMEOUT=" + s.StopTimeout.String()}
}

// workerStopWait is how long a stop waits for the worker before SIGKILL:
// its stop timeout and the time it then takes to exit.
func workerStopWait(s *Stack) time.Duration {
	drain := s.StopTimeout
	if d, err := time.ParseDuration(strings.TrimSpace(s.Getenv("WORKER_STOP_TIMEOUT"))); err == nil && d >= 0 {
		drain = d
	}
	if drain > math.MaxInt64-workerExitMargin {
		return drain // the margin would wrap around
	}
	return drain + workerExitMargin
}

// mcpEnv gives the worker the MCP configuration: the caller's MCP_CONFIG,
// or examples/mcp/mcp.yaml, the example response server over stdio with
// its state under .data/response (design/tools.md). A stack with its own
// binary or data directory (STACK_BIN_DIR, STACK_DATA_DIR: the e2e tests)
// gets the same configuration written into its data directory, with its
// paths.
func mcpEnv(s *Stack) []string {
	if s.Getenv("MCP_CONFIG") != "" {
		return nil
	}
	return []string{"MCP_CONFIG=" + mcpConfig(s)}
}

// mcpConfig is the path of the stack's MCP configuration.
func mcpConfig(s *Stack) string {
	if s.BinDir == filepath.Join(s.Root, "bin") && s.DataDir == filepath.Join(s.Root, ".data") {
		return filepath.Join(s.Root, "examples", "mcp", "mcp.yaml")
	}
	return filepath.Join(s.DataDir, "mcp.yaml")
}

// writeMCPConfig writes the configuration mcpConfig names when it is the
// stack's own (not the example file).
func writeMCPConfig(s *Stack) error {
	path := mcpConfig(s)
	if s.Getenv("MCP_CONFIG") != "" || path != filepath.Join(s.DataDir, "mcp.yaml") {
		return nil
	}
	yaml := responseServerYAML(s, filepath.Join(s.DataDir, "response"), "examples/mcp/mcp.yaml with this stack's directories")
	return writeFileAtomicMode(path, []byte(yaml), 0o600)
}

// responseServerYAML is examples/mcp/mcp.yaml (TestStackMCPConfigIsTheExample)
// with this stack's paths and stateDir, under a header saying why.
func responseServerYAML(s *Stack, stateDir, header string) string {
	return fmt.Sprintf("# Written by bin/stack: %s.\nservers:\n  response:\n    command: %q\n    args: [--inventory, %q, --state-dir, %q]\n    timeout: 30s\n    rate: 5\n    read_only: [lookup_host, list_blocked]\n",
		header, filepath.Join(s.BinDir, "response-server"), filepath.Join(s.Root, "examples", "mcp", "inventory.json"), stateDir)
}

// evalMCPEnv gives the eval's worker the analyst's MCP tools, so that the
// scorecard measures the tool set that ships. An acting tool never runs
// there (starter eval's actions expire at once, unapproved); read-only
// tools are called as in any investigation. With the caller's MCP_CONFIG
// (inherited, nothing to add) those calls reach the team's servers with the
// cases' made-up hosts and addresses: give the eval an MCP_CONFIG of its
// own to keep them out. Otherwise the example response server, with a state
// directory of its own, so no block the analyst approved shows in a case.
func evalMCPEnv(s *Stack) ([]string, error) {
	if s.Getenv("MCP_CONFIG") != "" {
		return nil, nil
	}
	path := filepath.Join(s.DataDir, "mcp-eval.yaml")
	yaml := responseServerYAML(s, filepath.Join(s.DataDir, "response-eval"), "for the eval's worker, examples/mcp/mcp.yaml with a state directory of its own")
	if err := s.mkdirPrivate(s.DataDir); err != nil {
		return nil, err
	}
	if err := writeFileAtomicMode(path, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	return []string{"MCP_CONFIG=" + path}, nil
}

// otelSettings names where the worker exports traces and metrics: a worker
// started without OTEL_EXPORTER_OTLP_ENDPOINT is not reused by a run that
// sets it. Only the endpoint's scheme and host (headers hold API keys).
func otelSettings(s *Stack) string {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		if u, err := url.Parse(s.Getenv(v)); err == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host + " " + orDefault(s.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
		}
	}
	return "off"
}

// ensureSearchAttributes registers AlertId and Verdict (Keyword) where they
// are missing: a fresh server has them from --search-attribute, a reused
// one (or an old .data/temporal.db) may not.
func (s *Stack) ensureSearchAttributes(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(s.addr("TEMPORAL"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	op := operatorservice.NewOperatorServiceClient(conn)
	have, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace})
	if err != nil {
		return fmt.Errorf("cannot list the search attributes on %s: %v", s.addr("TEMPORAL"), err)
	}
	missing := map[string]enums.IndexedValueType{}
	for _, name := range []string{"AlertId", "Verdict"} {
		if t, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = enums.INDEXED_VALUE_TYPE_KEYWORD
		} else if t != enums.INDEXED_VALUE_TYPE_KEYWORD {
			return fmt.Errorf("search attribute %s on %s is %s, not Keyword", name, s.addr("TEMPORAL"), t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: s.Namespace, SearchAttributes: missing}); err != nil {
		return fmt.Errorf("could not register the search attributes AlertId and Verdict (Keyword) on %s: %v", s.addr("TEMPORAL"), err)
	}
	return nil
}

// checkUICodec warns when a reused dev server's Web UI does not decode
// through this stack's codec server (it keeps the endpoint it started with).
func (s *Stack) checkUICodec(ctx context.Context) {
	if s.PayloadKeyFile == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr("TEMPORAL_UI")+"/api/v1/settings", nil)
	resp, err := probeClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var settings struct{ Codec struct{ Endpoint string } }
	if json.NewDecoder(resp.Body).Decode(&settings) != nil {
		return
	}
	if settings.Codec.Endpoint != s.CodecURL() {
		s.log.warn("the running Temporal Web UI does not use the codec server (its codec endpoint is '%s'): it shows encrypted payloads. Stop the stack ('go tool task stop') and start it again with PAYLOAD_KEY_FILE set.", settings.Codec.Endpoint)
	}
}

// summary is the line that ends a start.
func (s *Stack) summary() string {
	line := fmt.Sprintf("Temporal %s (Web UI %s), Firestore emulator %s, project %s, BigQuery emulator %s",
		s.addr("TEMPORAL"), s.UIURL(), s.addr("FIRESTORE"), s.Project, s.addr("BIGQUERY"))
	if s.PayloadKeyFile != "" {
		line += ", payloads encrypted (codec server " + s.CodecURL() + ")"
	}
	return line
}
