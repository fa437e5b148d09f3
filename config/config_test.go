package config

import (
	"context"
	"testing"

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
