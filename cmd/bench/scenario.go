package main

import (
	"fmt"
	"strings"

	"google.golang.org/genai"
)

// benchIP is the bench alert's remote IP, in a documentation range, which
// the intel tools accept.
const benchIP = "198.51.100.23"

// toolCall is one function call a scripted model turn asks for.
type toolCall struct {
	name string
	args map[string]any
}

// stepScript is one planned step and the calls of each of its model turns;
// the turn after the last one answers in text.
type stepScript struct {
	description string
	tools       []string
	turns       [][]toolCall
}

// scenario is what the scripted model does in one investigation.
type scenario struct {
	name  string
	steps []stepScript
	// dependsOn sends "depends_on": [] in every planned step, marking the
	// steps independent for a planner that reads it.
	dependsOn bool
}

var (
	otxIP     = toolCall{"query_otx", map[string]any{"indicator": benchIP, "indicator_type": "IPv4"}}
	vtIP      = toolCall{"virustotal_lookup", map[string]any{"resource_type": "ip", "resource": benchIP}}
	abuseIP   = toolCall{"abuseipdb_check", map[string]any{"ip": benchIP}}
	searchIP  = toolCall{"search_alerts", map[string]any{"field": "service.action.networkConnectionAction.remoteIpDetails.ipAddressV4", "op": "==", "value": benchIP}}
	intelTool = []string{"query_otx", "virustotal_lookup", "abuseipdb_check"}
)

// standard is the investigation every lone and concurrent run makes, the
// shape of a first investigation of an alert: read the alert, then search
// the earlier alerts for its remote IP; eight model calls and two tool
// calls on the alert store, none waiting on an outside service (the
// scenario pairs measure those).
func standard(alertID string) *scenario {
	return &scenario{name: "standard", steps: []stepScript{
		{"Read the full alert.", []string{"get_alert"}, [][]toolCall{{{"get_alert", map[string]any{"id": alertID}}}}},
		{"Find earlier alerts from the remote IP.", []string{"search_alerts"}, [][]toolCall{{searchIP}}},
	}}
}

// parallelCalls asks for the three lookups in one turn; sequentialCalls in
// three turns of one call each.
func parallelCalls() *scenario {
	return &scenario{name: "calls-parallel", steps: []stepScript{
		{"Look up the remote IP in OTX, VirusTotal and AbuseIPDB.", intelTool, [][]toolCall{{otxIP, vtIP, abuseIP}}},
	}}
}

func sequentialCalls() *scenario {
	return &scenario{name: "calls-sequential", steps: []stepScript{
		{"Look up the remote IP in OTX, VirusTotal and AbuseIPDB.", intelTool, [][]toolCall{{otxIP}, {vtIP}, {abuseIP}}},
	}}
}

// independentSteps is a plan of three steps that use nothing from each
// other; with dependsOn the plan says so.
func independentSteps(dependsOn bool) *scenario {
	name := "steps-in-order"
	if dependsOn {
		name = "steps-independent"
	}
	return &scenario{name: name, dependsOn: dependsOn, steps: []stepScript{
		{"Look up the remote IP in OTX.", []string{"query_otx"}, [][]toolCall{{otxIP}}},
		{"Look up the remote IP in VirusTotal.", []string{"virustotal_lookup"}, [][]toolCall{{vtIP}}},
		{"Look up the remote IP in AbuseIPDB.", []string{"abuseipdb_check"}, [][]toolCall{{abuseIP}}},
	}}
}

// stepOf finds the step (1-based, 0 for none) a turn's request executes:
// the one whose description comes first after "Execute this step", as
// every prompt version has put it, whatever else the request lists.
func (s *scenario) stepOf(request string) int {
	i := strings.Index(request, "Execute this step")
	if i < 0 {
		return 0
	}
	rest, step, at := request[i:], 0, -1
	for n, st := range s.steps {
		if j := strings.Index(rest, st.description); j >= 0 && (at < 0 || j < at) {
			step, at = n+1, j
		}
	}
	return step
}

// toolCalls counts the calls the scenario makes.
func (s *scenario) toolCalls() int {
	n := 0
	for _, st := range s.steps {
		for _, t := range st.turns {
			n += len(t)
		}
	}
	return n
}

// objective carries the run's key, so every later phase can be routed.
func objective(key string) string {
	return fmt.Sprintf("Decide whether %s is malicious [bench:%s].", benchIP, key)
}

func (s *scenario) plan(key string) map[string]any {
	steps := make([]map[string]any, len(s.steps))
	for i, st := range s.steps {
		steps[i] = map[string]any{"id": fmt.Sprintf("step_%d", i+1), "description": st.description, "tools": st.tools, "expected": "what the providers know"}
		if s.dependsOn {
			steps[i]["depends_on"] = []string{}
		}
	}
	return map[string]any{"objective": objective(key), "continues_active_plan": false, "steps": steps}
}

// calls returns the function calls of turn (0-based) of step (1-based), or
// nil when that turn answers in text.
func (s *scenario) calls(step, turn int) []*genai.FunctionCall {
	if step < 1 || step > len(s.steps) || turn >= len(s.steps[step-1].turns) {
		return nil
	}
	var out []*genai.FunctionCall
	for _, c := range s.steps[step-1].turns[turn] {
		out = append(out, &genai.FunctionCall{Name: c.name, Args: c.args})
	}
	return out
}
