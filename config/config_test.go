package config

import (
	"context"
	"math"
	"os"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/intel"
)

func TestFlagsDefaultToEcosystemVariables(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "temporal.example:7233")
	t.Setenv("TEMPORAL_NAMESPACE", "secops")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "p1")
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
	t.Setenv("GOOGLE_CLOUD_LOCATION", "")
	t.Setenv("GOOGLE_CLOUD_REGION", "europe-west1")
	t.Setenv("GEMINI_MODEL", "")
	var tc Temporal
	var fc Firestore
	var gc Gemini
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	tc.Flags(fs)
	fc.Flags(fs)
	gc.Flags(fs)
	require.NoError(t, fs.Parse([]string{"--namespace", "override"}))
	require.Equal(t, "temporal.example:7233", tc.Address)
	require.Equal(t, "override", tc.Namespace, "a flag beats the environment")
	require.Equal(t, "investigations", tc.TaskQueue)
	require.Equal(t, "p1", fc.Project)
	require.True(t, gc.Vertex)
	require.Equal(t, "europe-west1", gc.Location, "GOOGLE_CLOUD_REGION is the fallback")
	require.Equal(t, "gemini-2.5-flash", gc.Model)
	require.Equal(t, "http://localhost:8233/namespaces/override/workflows/wf-1", tc.WorkflowURL("wf-1"))
}

func TestFirestoreNeedsAProject(t *testing.T) {
	t.Setenv("FIRESTORE_EMULATOR_HOST", "")
	_, err := Firestore{Database: "(default)"}.Client(context.Background())
	require.ErrorContains(t, err, "set GOOGLE_CLOUD_PROJECT")
}

func TestLogger(t *testing.T) {
	_, err := Logger("loud")
	require.ErrorContains(t, err, `unknown log level "loud"`)
	l, err := Logger("warn")
	require.NoError(t, err)
	require.NotNil(t, l)
}

func TestWorkerCacheBudgets(t *testing.T) {
	t.Setenv("WORKER_TRANSCRIPT_CACHE", "")
	t.Setenv("WORKER_ALERT_CACHE", "2MiB")
	var wc Worker
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	wc.Flags(fs)
	require.NoError(t, fs.Parse(nil))
	tr, al, err := wc.CacheBytes()
	require.NoError(t, err)
	require.Equal(t, int64(64<<20), tr, "the default")
	require.Equal(t, int64(2<<20), al, "from the environment")

	require.NoError(t, fs.Parse([]string{"--transcript-cache", "0", "--alert-cache", "1000"}))
	tr, al, err = wc.CacheBytes()
	require.NoError(t, err)
	require.Equal(t, [2]int64{0, 1000}, [2]int64{tr, al})

	require.NoError(t, fs.Parse([]string{"--transcript-cache", "lots"}))
	_, _, err = wc.CacheBytes()
	require.ErrorContains(t, err, `--transcript-cache: "lots" is not a byte count`)
}

func TestIntelRates(t *testing.T) {
	r, err := Intel{VirusTotalURL: intel.DefaultVirusTotalURL}.Rates()
	require.NoError(t, err)
	require.InDelta(t, 4.0/60, r["virustotal"], 1e-9, "VirusTotal's public API allows 4 requests a minute")
	r, err = Intel{VirusTotalURL: "http://127.0.0.1:9999"}.Rates()
	require.NoError(t, err)
	require.Zero(t, r["virustotal"], "another address is not the public service's quota")

	// Any address in the provider's domain reaches its public API (a
	// redirect, an escaped path), so its quota holds.
	for _, u := range []string{"https://www.virustotal.com/", "https://WWW.VirusTotal.com", "HTTPS://www.virustotal.com:443//", "https://www.virustotal.com.", "http://www.virustotal.com", " https://www.virustotal.com ", "",
		"https://virustotal.com/api/v3", "https://www.virustotal.com/api/%76%33", "https://www.virustotal.com:8443", "https://www.virustotal.com/proxy", "https://VirusTotal.com."} {
		r, err = Intel{VirusTotalURL: u}.Rates()
		require.NoError(t, err)
		require.InDelta(t, 4.0/60, r["virustotal"], 1e-9, "VIRUSTOTAL_BASE_URL=%q is the public API", u)
	}
	for _, u := range []string{"https://www.virustotal.com.evil.example", "https://evilvirustotal.com", "https://vt.example/www.virustotal.com", "https://virustotal.com@vt.example", "www.virustotal.com", "ftp://www.virustotal.com"} {
		r, err = Intel{VirusTotalURL: u}.Rates()
		require.NoError(t, err)
		require.Zero(t, r["virustotal"], "VIRUSTOTAL_BASE_URL=%q is not the public API", u)
	}
	// The other providers' public addresses are compared the same way
	// (today only VirusTotal has a default limit).
	defaults := intel.DefaultRateLimits
	t.Cleanup(func() { intel.DefaultRateLimits = defaults })
	intel.DefaultRateLimits = map[string]float64{"otx": 1, "urlscan": 2, "virustotal": 3, "abuseipdb": 4}
	r, err = Intel{OTXURL: "https://OTX.alienvault.com/", URLScanURL: "https://urlscan.io/", VirusTotalURL: "https://www.virustotal.com/", AbuseIPDBURL: "https://API.abuseipdb.com/"}.Rates()
	require.NoError(t, err)
	require.Equal(t, intel.DefaultRateLimits, r)

	r, err = Intel{RateLimits: "virustotal=500/d, otx=10/s,abuseipdb=0"}.Rates()
	require.NoError(t, err)
	require.InDelta(t, 500.0/86400, r["virustotal"], 1e-9)
	require.InDelta(t, 10, r["otx"], 1e-9)
	require.Zero(t, r["abuseipdb"], "0 lifts the limit")

	for _, bad := range []string{"vt=4/m", "virustotal=4", "virustotal=-1/m", "virustotal=4/w", "virustotal", "otx=NaN/s", "otx=Inf/s"} {
		_, err := Intel{RateLimits: bad}.Rates()
		require.Error(t, err, bad)
	}
}

// TestAutoApproveMemories: off by default; the flag or MEMORY_AUTO_APPROVE
// turns it on, and its help says what it risks.
func TestAutoApproveMemories(t *testing.T) {
	parse := func(env string, args ...string) BigQuery {
		t.Setenv("MEMORY_AUTO_APPROVE", env)
		var bc BigQuery
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		bc.Flags(fs)
		require.NoError(t, fs.Parse(args))
		require.Contains(t, fs.Lookup("auto-approve-memories").Usage, "Risk: "+AutoApproveRisk)
		return bc
	}
	require.False(t, parse("").AutoApproveMemories, "proposed for review by default")
	require.True(t, parse("true").AutoApproveMemories)
	require.True(t, parse("", "--auto-approve-memories").AutoApproveMemories)
	require.False(t, parse("true", "--auto-approve-memories=false").AutoApproveMemories, "a flag beats the environment")
}

// TestEnvValuesAreChecked: an environment value that does not parse was the
// built-in default in silence (WORKER_STOP_TIMEOUT=30 without a unit,
// MEMORY_MIN_SIMILARITY=abc, GOOGLE_GENAI_USE_VERTEXAI=yes); it is an error
// naming the variable unless a flag overrides it.
func TestEnvValuesAreChecked(t *testing.T) {
	for _, v := range []string{"MEMORY_MIN_SIMILARITY", "MEMORY_RECALL_LIMIT", "MEMORY_AUTO_APPROVE", "WORKER_STOP_TIMEOUT",
		"WORKER_MAX_CONCURRENT_ACTIVITIES", "WORKER_ACTIVITIES_PER_SECOND", "TASK_QUEUE_ACTIVITIES_PER_SECOND", "GOOGLE_GENAI_USE_VERTEXAI", "TEMPORAL_TLS"} {
		t.Setenv(v, "")
	}
	parse := func(env map[string]string, args ...string) (*pflag.FlagSet, BigQuery, Worker, Gemini, Temporal, error) {
		for k, v := range env {
			t.Setenv(k, v)
			defer os.Setenv(k, "") // read as the flags are registered
		}
		var bc BigQuery
		var wc Worker
		var gc Gemini
		var tc Temporal
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		bc.Flags(fs)
		wc.Flags(fs)
		gc.Flags(fs)
		tc.Flags(fs)
		require.NoError(t, fs.Parse(args))
		return fs, bc, wc, gc, tc, CheckEnv(fs)
	}
	for env, want := range map[string]string{
		"MEMORY_MIN_SIMILARITY":        `MEMORY_MIN_SIMILARITY="abc" is not a number (it sets --memory-min-similarity)`,
		"MEMORY_RECALL_LIMIT":          `MEMORY_RECALL_LIMIT="abc" is not a whole number (it sets --memory-recall-limit)`,
		"MEMORY_AUTO_APPROVE":          `MEMORY_AUTO_APPROVE="abc" is not true or false (it sets --auto-approve-memories)`,
		"WORKER_STOP_TIMEOUT":          `WORKER_STOP_TIMEOUT="abc" is not a duration such as 30s or 3m (it sets --stop-timeout)`,
		"WORKER_ACTIVITIES_PER_SECOND": `WORKER_ACTIVITIES_PER_SECOND="abc" is not a number (it sets --activities-per-second)`,
		"GOOGLE_GENAI_USE_VERTEXAI":    `GOOGLE_GENAI_USE_VERTEXAI="abc" is not 1, true, 0 or false (it sets --vertex)`,
		"TEMPORAL_TLS":                 `TEMPORAL_TLS="abc" is not true or false (it sets --temporal-tls)`,
	} {
		_, _, _, _, _, err := parse(map[string]string{env: "abc"})
		require.EqualError(t, err, want)
	}
	_, _, _, _, _, err := parse(map[string]string{"WORKER_STOP_TIMEOUT": "30"})
	require.ErrorContains(t, err, `WORKER_STOP_TIMEOUT="30" is not a duration`, "a number without its unit")
	_, _, wc, _, _, err := parse(map[string]string{"WORKER_STOP_TIMEOUT": "30"}, "--stop-timeout", "45s")
	require.NoError(t, err, "a flag overrides the variable")
	require.Equal(t, 45*time.Second, wc.StopTimeout)
	fs, _, wc, _, _, err := parse(map[string]string{"WORKER_STOP_TIMEOUT": "30s"})
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, wc.StopTimeout)
	require.Equal(t, "30s", fs.Lookup("stop-timeout").DefValue, "the help shows the value in effect")

	// GOOGLE_GENAI_USE_VERTEXAI: what the genai SDK reads as Vertex AI (1
	// or true, any case) or as not (0, false); "yes" meant Vertex AI and
	// silently got the Gemini API.
	for v, want := range map[string]bool{"1": true, "true": true, "TRUE": true, "True": true, "0": false, "false": false, "FALSE": false} {
		_, _, _, gc, _, err := parse(map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": v})
		require.NoError(t, err, v)
		require.Equal(t, want, gc.Vertex, v)
	}
	for _, v := range []string{"yes", "on", "t", "2", "vertex"} {
		_, _, _, _, _, err := parse(map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": v})
		require.ErrorContains(t, err, "GOOGLE_GENAI_USE_VERTEXAI", v)
	}
}

// TestSettingsRanges: a similarity of 80 (meant as percent) failed every
// recall, retried, each attempt paying for an embedding.
func TestSettingsRanges(t *testing.T) {
	ok := BigQuery{MinSimilarity: 0.8, RecallLimit: 32}
	require.NoError(t, ok.Check())
	for _, sim := range []float64{80, 0, -0.5, 1.01, math.NaN(), math.Inf(1)} {
		b := ok
		b.MinSimilarity = sim
		require.ErrorContains(t, b.Check(), "--memory-min-similarity must be above 0 and at most 1", sim)
	}
	b := ok
	b.MinSimilarity = 1
	require.NoError(t, b.Check())
	for _, n := range []int{0, -1, 33, 1000} {
		b := ok
		b.RecallLimit = n
		require.ErrorContains(t, b.Check(), "--memory-recall-limit must be 1 to 32", n)
	}
	b.RecallLimit = 1
	require.NoError(t, b.Check())

	require.NoError(t, Worker{StopTimeout: time.Minute, ActivitiesPerSecond: 2.5}.Check())
	for _, w := range []Worker{{StopTimeout: -time.Second}, {MaxConcurrentActivities: -1}, {ActivitiesPerSecond: math.NaN()},
		{ActivitiesPerSecond: -1}, {TaskQueueActivitiesPerSecond: math.Inf(1)}} {
		require.Error(t, w.Check(), "%+v", w)
	}
}

// TestVersioningNeedsBothFlags: one of --deployment-name and --build-id
// without the other ran the worker unversioned, and nothing said so.
func TestVersioningNeedsBothFlags(t *testing.T) {
	const want = "--deployment-name (TEMPORAL_DEPLOYMENT_NAME) and --build-id (TEMPORAL_WORKER_BUILD_ID) go together: " +
		"set both for Worker Deployment Versioning, or neither"
	require.EqualError(t, Worker{DeploymentName: "investigator"}.Check(), want)
	require.EqualError(t, Worker{BuildID: "b2"}.Check(), want)
	require.NoError(t, Worker{DeploymentName: "investigator", BuildID: "b2"}.Check())
	require.NoError(t, Worker{}.Check())
}

// The worker's catalog and the eval take the Firestore project from
// Target: on the emulator with no project set it is EmulatorProject, and
// a project set wins.
func TestFirestoreTarget(t *testing.T) {
	t.Setenv("FIRESTORE_EMULATOR_HOST", "")
	p, e := Firestore{}.Target()
	require.Equal(t, [2]string{"", ""}, [2]string{p, e})
	t.Setenv("FIRESTORE_EMULATOR_HOST", "localhost:8686")
	p, e = Firestore{}.Target()
	require.Equal(t, [2]string{EmulatorProject, "localhost:8686"}, [2]string{p, e})
	p, _ = Firestore{Project: "prod"}.Target()
	require.Equal(t, "prod", p)
}
