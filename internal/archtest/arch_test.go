package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// temporalHomes may import the SDK's workflow, activity and temporal
// packages: the orchestration, its activities (where typed I/O errors become
// Temporal errors), the client package, the binaries, the payload codec (a
// data converter), telemetry (Temporal's tracing interceptor) and test
// helpers.
var temporalHomes = []string{
	"workflows", "activities", "agentclient", "worker", "starter", "payloadcodec", "telemetry", "cmd/bench", "e2e", "internal/testenv",
}

var temporalSDK = []string{"go.temporal.io/sdk/workflow", "go.temporal.io/sdk/activity", "go.temporal.io/sdk/temporal"}

// TestTemporalStaysHome: the I/O and domain packages (gemini, intel, alerts,
// transcript, tools, plan, toolcall, investigation, config, internal/...)
// know nothing of Temporal, so they can be tested and reused without it.
func TestTemporalStaysHome(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/secops-agent/investigator/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/secops-agent/investigator/"
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if home(pkg) {
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			for _, sdk := range temporalSDK {
				if imp == sdk {
					t.Errorf("%s imports %s: only %v may", pkg, sdk, temporalHomes)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages checked: go list output changed?", checked)
	}
}

func home(pkg string) bool {
	for _, h := range temporalHomes {
		if pkg == h || strings.HasPrefix(pkg, h+"/") {
			return true
		}
	}
	return false
}
