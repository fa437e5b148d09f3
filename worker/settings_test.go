package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSettingsAreCheckedAtStart: a worker with a bad setting stops at once
// with one sentence, before it dials anything (nothing listens at the
// Temporal address); before, MEMORY_MIN_SIMILARITY=80 started a worker
// whose every memory recall failed, and WORKER_STOP_TIMEOUT=30 was dropped.
func TestSettingsAreCheckedAtStart(t *testing.T) {
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	t.Setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1")
	for _, v := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_REGION"} {
		t.Setenv(v, "")
	}
	for _, c := range []struct {
		env, value string
		args       []string
		want       string
	}{
		{"MEMORY_MIN_SIMILARITY", "80", nil, "--memory-min-similarity must be above 0 and at most 1, not 80"},
		{"MEMORY_MIN_SIMILARITY", "abc", nil, `MEMORY_MIN_SIMILARITY="abc" is not a number (it sets --memory-min-similarity)`},
		{"WORKER_STOP_TIMEOUT", "30", nil, `WORKER_STOP_TIMEOUT="30" is not a duration such as 30s or 3m (it sets --stop-timeout)`},
		{"GOOGLE_GENAI_USE_VERTEXAI", "yes", nil, `GOOGLE_GENAI_USE_VERTEXAI="yes" is not 1, true, 0 or false (it sets --vertex)`},
		{"GOOGLE_GENAI_USE_VERTEXAI", "true", []string{"--project", "p"}, "Vertex AI (GOOGLE_GENAI_USE_VERTEXAI) needs GOOGLE_CLOUD_LOCATION (--location, a region such as us-central1): set it, or set an API key (GOOGLE_API_KEY) for Vertex AI express mode"},
		{"REGISTER_SEARCH_ATTRIBUTES", "nope", nil, `REGISTER_SEARCH_ATTRIBUTES="nope" is not true or false (it sets --register-search-attributes)`},
		{"", "", []string{"--memory-min-similarity", "NaN"}, "--memory-min-similarity must be above 0 and at most 1, not NaN"},
		{"", "", []string{"--activities-per-second", "Inf"}, "--activities-per-second must be 0 or more, not +Inf"},
		{"TEMPORAL_WORKER_BUILD_ID", "b2", nil, "--deployment-name (TEMPORAL_DEPLOYMENT_NAME) and --build-id (TEMPORAL_WORKER_BUILD_ID) go together: set both for Worker Deployment Versioning, or neither"},
		{"", "", []string{"--stop-timeout", "soon"}, `--stop-timeout takes a duration such as 30s or 3m, not "soon"`},
		{"", "", []string{"--max-concurrent-activities", "many"}, `--max-concurrent-activities takes a whole number, not "many"`},
		{"", "", []string{"--deployment-name", "investigator"}, "--deployment-name (TEMPORAL_DEPLOYMENT_NAME) and --build-id (TEMPORAL_WORKER_BUILD_ID) go together: set both for Worker Deployment Versioning, or neither"},
	} {
		t.Run(c.env+c.value, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(c.env, c.value)
			}
			cmd := newCommand()
			cmd.SetArgs(c.args)
			require.EqualError(t, cmd.Execute(), c.want)
		})
	}
}
