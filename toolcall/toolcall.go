// Package toolcall holds the conventions of the agent's function calls, in
// one place for the workflows that plan and chain calls and the activities
// that run them: the call itself, the names the code refers to, how a tool
// runs (its kind), the ref_id / ref: pipeline, and the one-line summary of
// a call. It does no I/O, so workflow code may use it.
package toolcall

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/secops-agent/investigator/internal/clip"
)

// Call is a function call the model asked for.
type Call struct {
	ID   string         `json:"id"`
	Name string         `json:"name"`
	Args map[string]any `json:"args,omitempty"`
}

// Tool names the code refers to; every other name lives only in its
// tool's declaration.
const (
	AskUser       = "ask_user"
	GetAlert      = "get_alert"
	SearchAlerts  = "search_alerts"
	BigQueryAgent = "bigquery_agent"
	// BigQueryQuery is the sub-agent's one tool that scans (and bills).
	BigQueryQuery = "bigquery_query"
)

// Kind says how a tool runs.
type Kind string

const (
	// Activity tools run in the CallTool activity (the default).
	Activity Kind = "activity"
	// LocalActivity tools run in the CallTool activity too, as a Temporal
	// local activity: within the workflow task that asked for them, recorded
	// as one marker event instead of an activity's three events and the
	// workflow task its completion takes. For calls that answer in seconds.
	LocalActivity Kind = "local_activity"
	// Analyst tools are answered by the analyst: the workflow records the
	// question and waits for the answer (ask_user).
	Analyst Kind = "analyst"
	// ChildWorkflow tools run as a child workflow of the investigation,
	// named by Tool.Workflow (bigquery_agent runs the BigQuery sub-agent).
	ChildWorkflow Kind = "child_workflow"
)

// Tool is what the workflow knows of a tool the worker offers.
type Tool struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind,omitempty"`
	// Workflow is the child workflow type a ChildWorkflow tool starts.
	Workflow string `json:"workflow,omitempty"`
	// TaskQueue is where an Activity tool's calls run when it is not the
	// investigation's own: a provider's queue, whose rate limit Temporal
	// holds for every worker (tools.RateLimited).
	TaskQueue string `json:"task_queue,omitempty"`
	// Declared is an outside tool's declaration (an MCP server's) as the
	// plan saw it: step turns declare the tool from it, so a server that
	// changes or goes away later changes no replay. Built-in tools have
	// none: their declarations ship with the code.
	Declared *Declared `json:"declared,omitempty"`
	// Acts says the tool changes something outside the investigation (an
	// MCP tool not marked read-only, or configured approval: required):
	// the workflow calls it only once the analyst approves the call.
	Acts bool `json:"acts,omitempty"`
}

// Declared is an outside tool's function declaration: its description and
// its parameters as a Gemini schema in JSON (bounded by the MCP client).
type Declared struct {
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// The ref pipeline. A call may name itself with the optional RefIDArg
// argument (or be named by its call ID); a later call of the same model
// turn may pass "ref:<name>" (or "ref:<name>.<field path>") as an argument
// value to use that call's result.
const (
	RefIDArg  = "ref_id"
	RefPrefix = "ref:"
)

// Key identifies a call by tool and arguments (RefIDArg aside), for serving
// a repeated identical call from the earlier result. encoding/json sorts
// map keys, so the key is deterministic.
func Key(c Call) string {
	args := make(map[string]any, len(c.Args))
	for k, v := range c.Args {
		if k != RefIDArg {
			args[k] = v
		}
	}
	b, _ := json.Marshal(args)
	return c.Name + " " + string(b)
}

// maxSummary bounds a call's summary (activity summaries, progress lines).
const maxSummary = 160

// Summarize renders a call as one short line for activity summaries and
// progress output.
func Summarize(name string, args map[string]any) string {
	var s string
	switch name {
	case SearchAlerts:
		if ind, ok := args["indicator"]; ok {
			s = fmt.Sprintf("%s indicator %v", name, ind)
		} else {
			s = fmt.Sprintf("%s %v %v %v", name, args["field"], args["op"], args["value"])
		}
	case GetAlert:
		s = fmt.Sprintf("%s %v", name, args["id"])
		if p, ok := args["path"]; ok {
			s += fmt.Sprintf(" %v", p)
		}
		if o, ok := args["offset"]; ok {
			s += fmt.Sprintf(" offset %v", o)
		}
	default:
		keys := make([]string, 0, len(args))
		for k := range args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := []string{name}
		for _, k := range keys {
			v, _ := json.Marshal(args[k])
			parts = append(parts, k+"="+string(v))
		}
		s = strings.Join(parts, " ")
	}
	return clip.String(s, maxSummary)
}
