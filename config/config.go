// Package config binds the settings shared by the worker and the starter to
// command-line flags whose defaults come from the environment variables the
// Google and Temporal ecosystems already use.
package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/spf13/pflag"
	"google.golang.org/genai"

	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/gemini"
	"github.com/secops-agent/investigator/intel"
	"github.com/secops-agent/investigator/internal/size"
	"github.com/secops-agent/investigator/investigation"
)

// EmulatorProject is the project ID used with the Firestore emulator when no
// GOOGLE_CLOUD_PROJECT is set.
const EmulatorProject = "demo-investigator"

// Env returns the first non-empty environment variable of names, or def.
func Env(def string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return def
}

// An environment variable that sets a flag's default is checked as the
// flag is: a value that does not parse is an error naming the variable
// (CheckEnv), not the built-in default in silence. The flag remembers the
// error in an annotation until CheckEnv runs, after the command line is
// parsed; a flag given on the command line overrides it.
const badEnvAnnotation = "config.bad-env"

// envValue reads the first set variable of names with parse, or def; bad
// is the sentence for a value that does not parse.
func envValue[T any](def T, parse func(string) (T, error), what string, names ...string) (v T, bad string) {
	for _, n := range names {
		raw := strings.TrimSpace(os.Getenv(n))
		if raw == "" {
			continue
		}
		v, err := parse(raw)
		if err != nil {
			return def, fmt.Sprintf("%s=%.40q is not %s", n, raw, what)
		}
		return v, ""
	}
	return def, ""
}

// markBad records on flag name of fs that its environment value is bad.
func markBad(fs *pflag.FlagSet, name, bad string) {
	if bad != "" {
		_ = fs.SetAnnotation(name, badEnvAnnotation, []string{bad + " (it sets --" + name + ")"})
	}
}

// CheckEnv returns the first flag of fs left to an environment value that
// did not parse, as one sentence naming the variable; run it before
// anything else at start.
func CheckEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if bad := f.Annotations[badEnvAnnotation]; err == nil && len(bad) > 0 && !f.Changed {
			err = errors.New(bad[0])
		}
	})
	return err
}

// EnvBoolVar registers a boolean flag whose default is the first set
// variable of names (strconv.ParseBool's words), else def.
func EnvBoolVar(fs *pflag.FlagSet, p *bool, name string, def bool, usage string, names ...string) {
	v, bad := envValue(def, strconv.ParseBool, boolean, names...)
	fs.BoolVar(p, name, v, usage)
	markBad(fs, name, bad)
}

func envIntVar(fs *pflag.FlagSet, p *int, name string, def int, usage string, names ...string) {
	v, bad := envValue(def, strconv.Atoi, wholeNumber, names...)
	fs.IntVar(p, name, v, usage)
	markBad(fs, name, bad)
}

func envFloatVar(fs *pflag.FlagSet, p *float64, name string, def float64, usage string, names ...string) {
	v, bad := envValue(def, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }, number, names...)
	fs.Float64Var(p, name, v, usage)
	markBad(fs, name, bad)
}

// EnvDurationVar registers a duration flag whose default is the first set
// variable of names, else def.
func EnvDurationVar(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string, names ...string) {
	v, bad := envValue(def, time.ParseDuration, duration, names...)
	fs.DurationVar(p, name, v, usage)
	markBad(fs, name, bad)
}

// parseVertex reads GOOGLE_GENAI_USE_VERTEXAI as the genai SDK does (1 or
// true, in any case, select Vertex AI; it takes anything else for false),
// but refuses what is neither that nor 0 or false: "yes" meant Vertex AI
// and silently got the Gemini API.
func parseVertex(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	}
	return false, errors.New("not 1, true, 0 or false")
}

// Temporal says where the Temporal service is and how to authenticate.
// Locally none of it is needed; Temporal Cloud takes an API key
// (TEMPORAL_API_KEY) or a client certificate (TEMPORAL_TLS_CLIENT_CERT_PATH and
// TEMPORAL_TLS_CLIENT_KEY_PATH), the names the Temporal CLI uses. The
// connection itself is made by agentclient.
type Temporal struct {
	Address   string
	Namespace string
	TaskQueue string
	UIURL     string
	TLS       bool
	CertPath  string
	KeyPath   string
	// PayloadKeyFile holds the AES-256 keys that encrypt every payload in
	// history (agentclient.PayloadKeys loads it); empty leaves payloads in
	// clear.
	PayloadKeyFile string
}

// Flags registers the Temporal flags.
func (t *Temporal) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&t.Address, "temporal-address", Env("localhost:7233", "TEMPORAL_ADDRESS"), "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
	fs.StringVar(&t.Namespace, "namespace", Env("default", "TEMPORAL_NAMESPACE"), "Temporal namespace (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&t.TaskQueue, "task-queue", Env(investigation.DefaultQueue, "TEMPORAL_TASK_QUEUE"), "task queue of the investigation worker (env TEMPORAL_TASK_QUEUE)")
	fs.StringVar(&t.UIURL, "ui-url", Env("http://localhost:8233", "TEMPORAL_UI_URL"), "base URL of the Temporal Web UI, for links (env TEMPORAL_UI_URL)")
	EnvBoolVar(fs, &t.TLS, "temporal-tls", false, "connect to Temporal over TLS (env TEMPORAL_TLS; implied by an API key or client certificate)", "TEMPORAL_TLS")
	fs.StringVar(&t.CertPath, "temporal-tls-cert", Env("", "TEMPORAL_TLS_CLIENT_CERT_PATH"), "client certificate for mTLS (env TEMPORAL_TLS_CLIENT_CERT_PATH)")
	fs.StringVar(&t.KeyPath, "temporal-tls-key", Env("", "TEMPORAL_TLS_CLIENT_KEY_PATH"), "client key for mTLS (env TEMPORAL_TLS_CLIENT_KEY_PATH)")
	fs.StringVar(&t.PayloadKeyFile, "payload-key-file", Env("", "PAYLOAD_KEY_FILE"), "file of KEY_ID:BASE64_32_BYTES lines; encrypts all payloads in Temporal history with the first key, decrypts with any (env PAYLOAD_KEY_FILE)")
}

// WorkflowURL returns the Web UI link of a workflow.
func (t Temporal) WorkflowURL(workflowID string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(t.UIURL, "/"), t.Namespace, workflowID)
}

// Firestore says which Firestore database to use.
type Firestore struct {
	Project  string
	Database string
}

// Flags registers the Firestore flags.
func (f *Firestore) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Project, "project", Env("", "GOOGLE_CLOUD_PROJECT"), "Google Cloud project of Firestore (env GOOGLE_CLOUD_PROJECT; "+EmulatorProject+" with the emulator)")
	fs.StringVar(&f.Database, "firestore-database", Env("(default)", "FIRESTORE_DATABASE"), "Firestore database ID (env FIRESTORE_DATABASE)")
}

// Target is the project Client opens and the emulator's address
// (FIRESTORE_EMULATOR_HOST, "" for none): on the emulator with no project
// set, EmulatorProject. The worker's catalog names it and the eval compares
// that with its own, so both sides take it from here.
func (f Firestore) Target() (project, emulator string) {
	project, emulator = f.Project, os.Getenv("FIRESTORE_EMULATOR_HOST")
	if project == "" && emulator != "" {
		project = EmulatorProject
	}
	return project, emulator
}

// Client opens Firestore; FIRESTORE_EMULATOR_HOST selects the emulator.
func (f Firestore) Client(ctx context.Context) (*firestore.Client, error) {
	project, _ := f.Target()
	if project == "" {
		return nil, fmt.Errorf("no Firestore project: set GOOGLE_CLOUD_PROJECT (or FIRESTORE_EMULATOR_HOST for the local emulator)")
	}
	c, err := firestore.NewClientWithDatabase(ctx, project, f.Database)
	if err != nil {
		return nil, fmt.Errorf("cannot open Firestore (project %s, database %s): %w", project, f.Database, err)
	}
	return c, nil
}

// Gemini says which model to use and how to reach it. The API key is only
// read from the environment, never from flags, workflow inputs or logs.
type Gemini struct {
	Model    string
	Vertex   bool
	Project  string
	Location string
	BaseURL  string
}

// Flags registers the Gemini flags.
func (g *Gemini) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&g.Model, "model", Env("gemini-2.5-flash", "GEMINI_MODEL"), "Gemini model (env GEMINI_MODEL)")
	v, bad := envValue(false, parseVertex, "1, true, 0 or false", "GOOGLE_GENAI_USE_VERTEXAI")
	fs.BoolVar(&g.Vertex, "vertex", v, "use Vertex AI instead of the Gemini API (env GOOGLE_GENAI_USE_VERTEXAI: 1 or true, as the genai SDK reads it)")
	markBad(fs, "vertex", bad)
	fs.StringVar(&g.Location, "location", Env("", "GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION"), "Vertex AI location (env GOOGLE_CLOUD_LOCATION)")
	fs.StringVar(&g.BaseURL, "gemini-base-url", Env("", "GOOGLE_GEMINI_BASE_URL"), "Gemini API base URL, e.g. a local Gemini-protocol server (env GOOGLE_GEMINI_BASE_URL)")
}

// Client builds the genai client; the key comes from GEMINI_API_KEY or
// GOOGLE_API_KEY, the Vertex project from the Firestore project flag.
func (g Gemini) Client(ctx context.Context, project string) (*genai.Client, error) {
	return gemini.NewClient(ctx, g.config(project))
}

// Check refuses, before anything starts, settings no client can be built
// from, naming what is missing (Vertex AI's project or location).
func (g Gemini) Check(project string) error { return g.config(project).Check() }

func (g Gemini) config(project string) gemini.Config {
	return gemini.Config{
		APIKey:   Env("", "GEMINI_API_KEY", "GOOGLE_API_KEY"),
		Vertex:   g.Vertex,
		Project:  project,
		Location: g.Location,
		BaseURL:  g.BaseURL,
	}
}

// Intel holds the threat-intelligence base URLs; API keys are read from the
// environment only (OTX_API_KEY, URLSCAN_API_KEY, VIRUSTOTAL_API_KEY,
// ABUSEIPDB_API_KEY).
type Intel struct {
	OTXURL, URLScanURL, VirusTotalURL, AbuseIPDBURL string
	// RateLimits overrides intel.DefaultRateLimits: "provider=N/unit,...".
	RateLimits string
}

// Flags registers the threat-intelligence flags.
func (c *Intel) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.OTXURL, "otx-base-url", Env(intel.DefaultOTXURL, "OTX_BASE_URL"), "AlienVault OTX base URL (env OTX_BASE_URL; key in OTX_API_KEY)")
	fs.StringVar(&c.URLScanURL, "urlscan-base-url", Env(intel.DefaultURLScanURL, "URLSCAN_BASE_URL"), "URLScan.io base URL (env URLSCAN_BASE_URL; key in URLSCAN_API_KEY)")
	fs.StringVar(&c.VirusTotalURL, "virustotal-base-url", Env(intel.DefaultVirusTotalURL, "VIRUSTOTAL_BASE_URL"), "VirusTotal base URL (env VIRUSTOTAL_BASE_URL; key in VIRUSTOTAL_API_KEY)")
	fs.StringVar(&c.AbuseIPDBURL, "abuseipdb-base-url", Env(intel.DefaultAbuseIPDBURL, "ABUSEIPDB_BASE_URL"), "AbuseIPDB base URL (env ABUSEIPDB_BASE_URL; key in ABUSEIPDB_API_KEY)")
	fs.StringVar(&c.RateLimits, "intel-rate-limits", Env("", "INTEL_RATE_LIMITS"),
		"calls each provider's task queue allows, for all workers together, as provider=N/s|m|h|d (0 for none), comma-separated; "+
			"default virustotal=4/m when VirusTotal is reached at its public address (env INTEL_RATE_LIMITS)")
}

// Rates returns the calls per second each provider's task queue allows (0
// for no limit): intel.DefaultRateLimits for the providers reached at their
// public address (sameBaseURL; another address is not the public service
// and its quota), with the flag's overrides.
func (c Intel) Rates() (map[string]float64, error) {
	out := map[string]float64{}
	public := map[string]bool{
		intel.GroupOTX: sameBaseURL(c.OTXURL, intel.DefaultOTXURL), intel.GroupURLScan: sameBaseURL(c.URLScanURL, intel.DefaultURLScanURL),
		intel.GroupVirusTotal: sameBaseURL(c.VirusTotalURL, intel.DefaultVirusTotalURL), intel.GroupAbuseIPDB: sameBaseURL(c.AbuseIPDBURL, intel.DefaultAbuseIPDBURL),
	}
	for g, rate := range intel.DefaultRateLimits {
		if public[g] {
			out[g] = rate
		}
	}
	for item := range strings.SplitSeq(c.RateLimits, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		group, rate, ok := strings.Cut(item, "=")
		group = strings.TrimSpace(group)
		if !ok || !slices.Contains(intel.Groups, group) {
			return nil, fmt.Errorf("--intel-rate-limits: %q is not provider=N/unit with a provider of %s", item, strings.Join(intel.Groups, ", "))
		}
		perSecond, err := parseRate(strings.TrimSpace(rate))
		if err != nil {
			return nil, fmt.Errorf("--intel-rate-limits: %s: %w", group, err)
		}
		out[group] = perSecond
	}
	return out, nil
}

// sameBaseURL reports whether the intel client, given base, calls the
// public service whose address is def: base is empty, or its host is in
// def's domain (its last two labels: "virustotal.com" for
// "www.virustotal.com"), whatever its case, final dot, port, scheme or
// path. Comparing whole URLs dropped the public quota's limit for
// addresses that reach the same API ("https://virustotal.com/api/v3" is
// redirected to www, "/api/%76%33" is "/api/v3"); only another domain (a
// mirror, a proxy, a test server) is another quota.
func sameBaseURL(base, def string) bool {
	if strings.TrimSpace(base) == "" {
		return true
	}
	b, d := hostOf(base), hostOf(def)
	if b == "" || d == "" {
		return false
	}
	labels := strings.Split(d, ".")
	domain := strings.Join(labels[max(0, len(labels)-2):], ".")
	return b == domain || strings.HasSuffix(b, "."+domain)
}

// hostOf is the lower-cased host of an http(s) URL without a final dot, or
// "" for anything else.
func hostOf(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || u.Opaque != "" {
		return ""
	}
	if scheme := strings.ToLower(u.Scheme); scheme != "http" && scheme != "https" {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
}

// parseRate reads "N/unit" (s, m, h, d) or "0" as calls per second.
func parseRate(s string) (float64, error) {
	if s == "0" {
		return 0, nil
	}
	num, unit, _ := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(num, 64)
	per := map[string]float64{"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
	if err != nil || !(n > 0) || math.IsInf(n, 0) || per == 0 {
		return 0, fmt.Errorf("%q is not a rate such as 4/m (per s, m, h or d) or 0", s)
	}
	return n / per, nil
}

// Config returns the providers with their keys from the environment.
func (c Intel) Config() intel.Config {
	return intel.Config{
		OTX:        intel.Provider{APIKey: Env("", "OTX_API_KEY"), BaseURL: c.OTXURL},
		URLScan:    intel.Provider{APIKey: Env("", "URLSCAN_API_KEY"), BaseURL: c.URLScanURL},
		VirusTotal: intel.Provider{APIKey: Env("", "VIRUSTOTAL_API_KEY"), BaseURL: c.VirusTotalURL},
		AbuseIPDB:  intel.Provider{APIKey: Env("", "ABUSEIPDB_API_KEY"), BaseURL: c.AbuseIPDBURL},
	}
}

// BigQuery configures the BigQuery sub-agent and its memory. The sub-agent
// (and the bigquery_agent tool) is off unless a tables config is given.
type BigQuery struct {
	TablesConfig   string
	RunbooksDir    string
	EmbeddingModel string
	MinSimilarity  float64
	RecallLimit    int
	// AutoApproveMemories stores learned claims written only in SQL about
	// their own columns approved instead of proposed
	// (memory.ApprovableAtOnce): later sessions use them without a
	// person's review. Claims about what a value or column means stay
	// proposed.
	AutoApproveMemories bool
}

// AutoApproveRisk says what --auto-approve-memories risks, for its help and
// the worker's start-up warning.
const AutoApproveRisk = "a claim written only in SQL and its own column names that slips past the claim check (planted by a crafted log row or a hostile model answer) then reaches every later BigQuery session without review; claims in words (what a value or column means) always wait for review"

// Flags registers the BigQuery sub-agent flags.
func (b *BigQuery) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&b.TablesConfig, "bigquery-tables", Env("", "BIGQUERY_TABLES_CONFIG"), "YAML file of the tables the BigQuery sub-agent may query (env BIGQUERY_TABLES_CONFIG); empty disables bigquery_agent")
	fs.StringVar(&b.RunbooksDir, "bigquery-runbooks", Env("", "BIGQUERY_RUNBOOKS_DIR"), "directory of *.sql runbooks for the sub-agent (env BIGQUERY_RUNBOOKS_DIR)")
	fs.StringVar(&b.EmbeddingModel, "embedding-model", Env("gemini-embedding-001", "GEMINI_EMBEDDING_MODEL"), "embedding model for memories, 768 dimensions (env GEMINI_EMBEDDING_MODEL)")
	envFloatVar(fs, &b.MinSimilarity, "memory-min-similarity", 0.8, "least cosine similarity of a recalled memory, above 0 and at most 1 (env MEMORY_MIN_SIMILARITY)", "MEMORY_MIN_SIMILARITY")
	envIntVar(fs, &b.RecallLimit, "memory-recall-limit", 32, fmt.Sprintf("most memories recalled per request, 1 to %d (env MEMORY_RECALL_LIMIT)", maxRecallLimit), "MEMORY_RECALL_LIMIT")
	EnvBoolVar(fs, &b.AutoApproveMemories, "auto-approve-memories", false,
		"approve the claims the BigQuery sub-agent learns that are written only in SQL about their own columns as it learns them, instead of proposing them for review with starter memory approve (env MEMORY_AUTO_APPROVE). Risk: "+AutoApproveRisk, "MEMORY_AUTO_APPROVE")
}

// maxRecallLimit bounds the memories recalled per request: each is copied
// into RecallMemories' result, every SubAgentTurn input and the Introspect
// input, all in the sub-agent's history.
const maxRecallLimit = memory.MaxRecallLimit

// Check refuses settings that cannot work, in one sentence naming the
// flag: a similarity outside (0, 1] failed every recall (retried, each
// attempt paying for an embedding), and 0 silently meant 0.8.
func (b BigQuery) Check() error {
	switch {
	case !(b.MinSimilarity > 0 && b.MinSimilarity <= 1):
		return fmt.Errorf("--memory-min-similarity must be above 0 and at most 1, not %g", b.MinSimilarity)
	case b.RecallLimit < 1 || b.RecallLimit > maxRecallLimit:
		return fmt.Errorf("--memory-recall-limit must be 1 to %d, not %d: recalled memories ride in every sub-agent model call's input", maxRecallLimit, b.RecallLimit)
	}
	return nil
}

// EmulatorHost is the BigQuery emulator's host:port from
// BIGQUERY_EMULATOR_HOST, or "" for real BigQuery.
func (BigQuery) EmulatorHost() string { return Env("", "BIGQUERY_EMULATOR_HOST") }

// Logger returns a slog logger at the given level ("debug", "info", "warn", "error").
func Logger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("unknown log level %q (use debug, info, warn or error)", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// Worker bounds what one worker runs at once, so that N workers stay
// within a Gemini quota, and how long it lets work in flight finish when
// it is stopped.
type Worker struct {
	// DeploymentName and BuildID opt the worker into Worker Deployment
	// Versioning (design/versioning.md): both set, the worker serves only
	// its own version, and investigations stay pinned to the version that
	// started them until they continue as new. Check refuses one alone.
	DeploymentName               string
	BuildID                      string
	StopTimeout                  time.Duration
	MaxConcurrentActivities      int
	ActivitiesPerSecond          float64
	TaskQueueActivitiesPerSecond float64
	// TranscriptCache and AlertCache are byte counts ("64MiB"; 0 turns a
	// cache off) bounding the memory in front of Firestore (CacheBytes).
	TranscriptCache string
	AlertCache      string
}

// Flags registers the worker's limits, with environment fallbacks.
func (w *Worker) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&w.DeploymentName, "deployment-name", Env("", "TEMPORAL_DEPLOYMENT_NAME"),
		"Worker Deployment Versioning: the deployment this worker belongs to, with --build-id (env TEMPORAL_DEPLOYMENT_NAME)")
	fs.StringVar(&w.BuildID, "build-id", Env("", "TEMPORAL_WORKER_BUILD_ID"),
		"Worker Deployment Versioning: this worker's build, with --deployment-name (env TEMPORAL_WORKER_BUILD_ID)")
	EnvDurationVar(fs, &w.StopTimeout, "stop-timeout", 3*time.Minute,
		"on SIGTERM, how long activities in flight may finish (env WORKER_STOP_TIMEOUT, with its unit: 30s, 3m)", "WORKER_STOP_TIMEOUT")
	envIntVar(fs, &w.MaxConcurrentActivities, "max-concurrent-activities", 0,
		"most activities this worker runs at once, and most local activities (quick tool calls), 0 for the SDK default (env WORKER_MAX_CONCURRENT_ACTIVITIES)", "WORKER_MAX_CONCURRENT_ACTIVITIES")
	envFloatVar(fs, &w.ActivitiesPerSecond, "activities-per-second", 0,
		"most activities this worker starts per second, and most local activities, 0 for no limit (env WORKER_ACTIVITIES_PER_SECOND)", "WORKER_ACTIVITIES_PER_SECOND")
	envFloatVar(fs, &w.TaskQueueActivitiesPerSecond, "task-queue-activities-per-second", 0,
		"most activities all workers of the task queue start per second (local activities, i.e. quick tool calls, are bounded per worker only), 0 for no limit (env TASK_QUEUE_ACTIVITIES_PER_SECOND)", "TASK_QUEUE_ACTIVITIES_PER_SECOND")
	fs.StringVar(&w.TranscriptCache, "transcript-cache", Env("64MiB", "WORKER_TRANSCRIPT_CACHE"),
		"memory for recent transcript entries kept in front of Firestore, like 64MiB; 0 reads every entry from Firestore (env WORKER_TRANSCRIPT_CACHE)")
	fs.StringVar(&w.AlertCache, "alert-cache", Env("16MiB", "WORKER_ALERT_CACHE"),
		"memory for alerts kept after their first read, like 16MiB; 0 reads the alert from Firestore in every activity (env WORKER_ALERT_CACHE)")
}

// CacheBytes returns the budgets of the transcript and alert caches.
func (w Worker) CacheBytes() (transcript, alert int64, err error) {
	if transcript, err = size.Parse(w.TranscriptCache); err != nil {
		return 0, 0, fmt.Errorf("--transcript-cache: %w", err)
	}
	if alert, err = size.Parse(w.AlertCache); err != nil {
		return 0, 0, fmt.Errorf("--alert-cache: %w", err)
	}
	return transcript, alert, nil
}

// Check refuses limits that cannot work, in one sentence naming the flag.
// One versioning flag without the other ran the worker unversioned, silently.
func (w Worker) Check() error {
	switch {
	case (w.DeploymentName == "") != (w.BuildID == ""):
		return errors.New("--deployment-name (TEMPORAL_DEPLOYMENT_NAME) and --build-id (TEMPORAL_WORKER_BUILD_ID) go together: " +
			"set both for Worker Deployment Versioning, or neither")
	case w.StopTimeout < 0:
		return fmt.Errorf("--stop-timeout must not be negative, not %s", w.StopTimeout)
	case w.MaxConcurrentActivities < 0:
		return fmt.Errorf("--max-concurrent-activities must not be negative, not %d", w.MaxConcurrentActivities)
	case !finiteRate(w.ActivitiesPerSecond):
		return fmt.Errorf("--activities-per-second must be 0 or more, not %g", w.ActivitiesPerSecond)
	case !finiteRate(w.TaskQueueActivitiesPerSecond):
		return fmt.Errorf("--task-queue-activities-per-second must be 0 or more, not %g", w.TaskQueueActivitiesPerSecond)
	}
	return nil
}

// finiteRate: 0 or more and finite (NaN fails every comparison).
func finiteRate(f float64) bool { return f >= 0 && !math.IsInf(f, 0) }
