package main

import (
	"fmt"

	"google.golang.org/genai"
)

// benchIP is in a documentation range, which the intel tools accept.
const (
	benchIP     = "198.51.100.23"
	benchDomain = "evil.example.com"
)

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
	vtDomain  = toolCall{"virustotal_lookup", map[string]any{"resource_type": "domain", "resource": benchDomain}}
	intelTool = []string{"query_otx", "virustotal_lookup", "abuseipdb_check"}
)

// standard is the investigation every lone and concurrent run makes: a
// turn of three parallel lookups, then a step with one lookup; eight model
// calls and four tool calls.
func standard() *scenario {
	return &scenario{name: "standard", steps: []stepScript{
		{"Look up the remote IP in OTX, VirusTotal and AbuseIPDB.", intelTool, [][]toolCall{{otxIP, vtIP, abuseIP}}},
		{"Check the domain the IP served on VirusTotal.", []string{"virustotal_lookup"}, [][]toolCall{{vtDomain}}},
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

// modelCalls counts the model calls: plan, each turn plus the answering
// turn, a reflection per step, the conclusion.
func (s *scenario) modelCalls() int {
	n := 2
	for _, st := range s.steps {
		n += len(st.turns) + 2
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
