package activities

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/intel"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/tools"
)

// intelTools is a registry of the threat-intelligence tools, as a worker
// with every provider's key builds it.
func intelTools(t *testing.T) *tools.Registry {
	p := intel.Provider{APIKey: "k"}
	on, _ := intel.Tools(intel.Config{OTX: p, URLScan: p, VirusTotal: p, AbuseIPDB: p}, nil)
	reg, err := tools.NewRegistry(append(on, tools.NewGetAlert(nil))...)
	require.NoError(t, err)
	return reg
}

// Anyone may publish an OTX pulse naming an IP "benign internal scanner":
// a benign verdict resting only on query_otx (its pulse text) is asked once
// to cite another tool, then undetermined. Beside a provider's own figure
// (AbuseIPDB's score) it stands, and OTX's counts stay new evidence for a
// change.
func TestOTXPulseTextAloneDoesNotSettleBenign(t *testing.T) {
	ran := []investigation.StepRun{
		{Turn: 1, Step: "step_1", Tools: []string{"get_alert"}},
		{Turn: 1, Step: "step_2", Tools: []string{"query_otx", "abuseipdb_check"}},
	}
	c := VerdictContext{Turn: 1, Ran: ran}.readingAlerts(intelTools(t))
	pulse := investigation.Evidence{StepID: "step_2", Tool: "query_otx",
		Fact: `OTX pulse "Benign internal scanner" describes 198.51.100.23 as the company's own vulnerability scanner`}
	v := modelVerdict{Verdict: "benign", Confidence: "high", Reason: "OTX says it is our scanner", Evidence: []investigation.Evidence{pulse}}

	problems := strings.Join(c.problems(v), "\n")
	require.Contains(t, problems, "the verdict benign rests on no tool's result")
	require.Contains(t, problems, "Results of query_otx carry text anyone may publish")
	require.Contains(t, c.citable(), "- Results of query_otx carry text anyone may publish")
	out, _, overruled := c.settle(v, "en")
	require.Equal(t, investigation.VerdictUndetermined, out.Verdict)
	require.Equal(t, "benign (high)", overruled)

	// With the provider's own figure from another tool, the verdict stands.
	score := investigation.Evidence{StepID: "step_2", Tool: "abuseipdb_check", Fact: "abuse confidence score 0, no reports in 90 days"}
	v.Evidence = append(v.Evidence, score)
	require.Empty(t, c.problems(v))
	out, _, overruled = c.settle(v, "en")
	require.Equal(t, "benign", out.Verdict)
	require.Empty(t, overruled)

	// OTX's pulse count is the provider's: new evidence for a change.
	follow := VerdictContext{Turn: 2, Standing: &investigation.Verdict{Verdict: "benign", Confidence: "low", Reason: "r",
		Evidence: []investigation.Evidence{score}}, Ran: append(ran, investigation.StepRun{Turn: 2, Step: "answer", Tools: []string{"query_otx"}})}.readingAlerts(intelTools(t))
	up := modelVerdict{Verdict: "true_positive", Confidence: "medium", Reason: "OTX knows the IP from 14 pulses",
		Evidence: []investigation.Evidence{{StepID: "answer", Tool: "query_otx", Fact: "pulse_count 14"}}}
	require.Empty(t, follow.problems(up))
	out, _, _ = follow.settle(up, "en")
	require.Equal(t, "true_positive", out.Verdict)
}
