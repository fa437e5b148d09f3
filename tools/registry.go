// Package tools holds the tools the agent can call and the registry that
// offers them to the model. A tool is a function declaration plus a Call; the
// registry is how later tools (threat intelligence, BigQuery) plug in.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
)

// Tool is one function the model can call.
type Tool interface {
	// Declaration describes the tool to the model; its Name is the tool's name.
	Declaration() *genai.FunctionDeclaration
	// Purpose says in one sentence what the tool is for (not what it
	// returns): the planner chooses tools from these lines.
	Purpose() string
	// Call runs the tool. Errors made with Reject go back to the model as the
	// tool's result; any other error is treated as transient and retried.
	Call(ctx context.Context, args map[string]any) (any, error)
}

// Disabled names a tool that is not offered, and why (for example its API
// key is not configured).
type Disabled struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Registry is the set of tools a worker offers, ordered by name, and the
// tools it does not offer with the reason.
type Registry struct {
	// mu guards the tool set: a group of outside tools (an MCP server's)
	// is replaced when its server reconnects.
	mu       sync.RWMutex
	byName   map[string]Tool
	names    []string
	disabled []Disabled
	// queues maps a rate group to the task queue its calls run on.
	queues map[string]string
	// groups are the names and the skipped tools of each outside group.
	groups        map[string][]string
	groupDisabled map[string][]Disabled
}

// Outside is implemented by a tool that comes from outside the code (an MCP
// server's): its declaration is recorded with the plan (toolcall.Declared)
// and Acts says its calls wait for the analyst's approval.
type Outside interface {
	Recorded() toolcall.Declared
	Acts() bool
}

// Claimed is implemented by an outside tool whose server describes it:
// Says is the server's own description (its words), ClaimsReadOnly whether
// the server marks it read-only, which never waives the approval. The
// catalog shows them apart from what the product says of the tool (Acts).
type Claimed interface {
	Says() string
	ClaimsReadOnly() bool
}

// SetGroup replaces the tools of an outside group (one MCP server's) with
// ts, and its skipped tools with disabled. A name another group or a
// built-in tool holds is skipped, with the reason.
func (r *Registry) SetGroup(group string, ts []Tool, disabled []Disabled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.groups == nil {
		r.groups, r.groupDisabled = map[string][]string{}, map[string][]Disabled{}
	}
	for _, n := range r.groups[group] {
		delete(r.byName, n)
	}
	r.names = slices.DeleteFunc(r.names, func(n string) bool { return slices.Contains(r.groups[group], n) })
	var names []string
	for _, t := range ts {
		n := t.Declaration().Name
		if _, dup := r.byName[n]; dup || n == "" {
			disabled = append(disabled, Disabled{Name: n, Reason: "another tool has this name"})
			continue
		}
		r.byName[n] = t
		names = append(names, n)
	}
	r.names = append(r.names, names...)
	sort.Strings(r.names)
	r.groups[group], r.groupDisabled[group] = names, disabled
}

// Snapshot returns a copy of the registry as it is now, so that one
// activity sees one tool set even if a server reconnects meanwhile.
func (r *Registry) Snapshot() *Registry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c := &Registry{byName: maps.Clone(r.byName), names: slices.Clone(r.names), disabled: slices.Clone(r.disabled), queues: maps.Clone(r.queues)}
	for _, ds := range r.groupDisabled {
		c.disabled = append(c.disabled, ds...)
	}
	return c
}

// RateLimited is implemented by a tool whose calls share a provider's rate
// limit (one API key, one quota): RateGroup names the provider. Such calls
// run as regular activities, on the task queue RouteTo gives their group.
type RateLimited interface {
	RateGroup() string
}

// RouteTo runs the calls of the tools of rate group on taskQueue.
func (r *Registry) RouteTo(group, taskQueue string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queues == nil {
		r.queues = map[string]string{}
	}
	r.queues[group] = taskQueue
}

// RateGroups returns the rate groups of the enabled tools, sorted.
func (r *Registry) RateGroups() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for _, n := range r.names {
		if t, ok := r.byName[n].(RateLimited); ok && !slices.Contains(out, t.RateGroup()) {
			out = append(out, t.RateGroup())
		}
	}
	sort.Strings(out)
	return out
}

// Disable records tools that are not offered, and why.
func (r *Registry) Disable(d ...Disabled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.disabled = append(r.disabled, d...)
}

// Statuses lists every tool, enabled or not, ordered by name.
func (r *Registry) Statuses() []investigation.ToolStatus {
	r = r.Snapshot()
	out := make([]investigation.ToolStatus, 0, len(r.names)+len(r.disabled))
	for _, n := range r.names {
		st := investigation.ToolStatus{Name: n, Enabled: true, Description: r.byName[n].Declaration().Description}
		if o, ok := r.byName[n].(Outside); ok {
			st.Acts = o.Acts()
		}
		if c, ok := r.byName[n].(Claimed); ok {
			st.Says, st.ClaimsReadOnly = c.Says(), c.ClaimsReadOnly()
		}
		out = append(out, st)
	}
	for _, d := range r.disabled {
		out = append(out, investigation.ToolStatus{Name: d.Name, Reason: d.Reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NewRegistry builds a registry; tool names must be unique and non-empty.
func NewRegistry(ts ...Tool) (*Registry, error) {
	r := &Registry{byName: map[string]Tool{}}
	if err := r.Add(ts...); err != nil {
		return nil, err
	}
	return r, nil
}

// Add registers more tools; names must stay unique and non-empty.
func (r *Registry) Add(ts ...Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range ts {
		name := t.Declaration().Name
		if name == "" {
			return errors.New("tool without a name")
		}
		if _, dup := r.byName[name]; dup {
			return fmt.Errorf("tool %q registered twice", name)
		}
		r.byName[name] = t
		r.names = append(r.names, name)
	}
	sort.Strings(r.names)
	return nil
}

// Runner is implemented by a tool that does not run in the CallTool
// activity: RunsAs says how it runs instead (ask_user is answered by the
// analyst, bigquery_agent is a child workflow).
type Runner interface {
	RunsAs() toolcall.Tool
}

// Quick is implemented by a tool whose calls are a read of the product's
// own store, answered within seconds: it runs as a local activity (see
// toolcall.LocalActivity). A call to an outside service never is: it would
// hold the workflow task (queries and updates wait), re-run after a worker
// crash, and escape task-queue rate limits.
type Quick interface {
	Quick()
}

// AlertText is implemented by a tool whose result may be the text of
// stored alerts, which whoever can send an alert writes: when AlertText
// says so, a verdict's evidence that cites it weighs as the alert's own
// text (activities' VerdictContext), not as a tool's finding.
type AlertText interface {
	AlertText() bool
}

// ReturnsAlertText says whether the named tool's result is alerts' text
// (AlertText).
func (r *Registry) ReturnsAlertText(name string) bool {
	t, ok := r.Lookup(name)
	a, alertText := t.(AlertText)
	return ok && alertText && a.AlertText()
}

// ThirdPartyText is implemented by a tool whose result carries text that
// anyone may publish beside the provider's own figures (OTX pulses' names,
// tags, authors): when ThirdPartyText says so, a verdict's evidence that
// cites it does not alone back a verdict that lowers concern, as the
// alert's text does not; it stays a tool's finding otherwise (its figures
// are the provider's).
type ThirdPartyText interface {
	ThirdPartyText() bool
}

// ReturnsThirdPartyText says whether the named tool's result carries
// third-party text (ThirdPartyText).
func (r *Registry) ReturnsThirdPartyText(name string) bool {
	t, ok := r.Lookup(name)
	p, marked := t.(ThirdPartyText)
	return ok && marked && p.ThirdPartyText()
}

// AnsweredByAnalyst says whether the named tool's result is the analyst's
// answer (it runs as toolcall.Analyst: ask_user), which weighs as the
// analyst's words, not as a tool's finding.
func (r *Registry) AnsweredByAnalyst(name string) bool {
	t, ok := r.Lookup(name)
	runner, runs := t.(Runner)
	return ok && runs && runner.RunsAs().Kind == toolcall.Analyst
}

// Tools describes every enabled tool for the workflow: its name and how it
// runs, in name order.
func (r *Registry) Tools() []toolcall.Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]toolcall.Tool, len(r.names))
	for i, n := range r.names {
		out[i] = toolcall.Tool{Name: n, Kind: toolcall.Activity}
		switch t := r.byName[n].(type) {
		case Runner:
			out[i] = t.RunsAs()
			out[i].Name = n
		case Quick:
			out[i].Kind = toolcall.LocalActivity
		case RateLimited:
			out[i].TaskQueue = r.queues[t.RateGroup()]
		case Outside:
			d := t.Recorded()
			out[i].Declared, out[i].Acts = &d, t.Acts()
		}
	}
	return out
}

// Names returns the tool names in order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.names)
}

// Lookup returns the tool with this name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byName[name]
	return t, ok
}

var refIDSchema = &genai.Schema{
	Type: genai.TypeString,
	Description: "Optional name for this call's result. A later call in the same turn may pass ref:<name> " +
		"(or ref:<name>.<field path>, e.g. ref:s1.results.0.uuid) as an argument value to use it. " +
		"Only lookups take such a value: ask_user, bigquery_agent and tools that change something refuse it.",
}

// Declarations returns the declarations of the named tools that exist, or of
// every tool when names is empty, each with the optional ref_id parameter.
func (r *Registry) Declarations(names []string) []*genai.FunctionDeclaration {
	r = r.Snapshot()
	if len(names) == 0 {
		names = r.names
	}
	var out []*genai.FunctionDeclaration
	for _, n := range names {
		t, ok := r.byName[n]
		if !ok {
			continue
		}
		out = append(out, withRefID(*t.Declaration()))
	}
	return out
}

// withRefID is d with the optional ref_id parameter.
func withRefID(d genai.FunctionDeclaration) *genai.FunctionDeclaration {
	params := genai.Schema{Type: genai.TypeObject}
	if d.Parameters != nil {
		params = *d.Parameters
	}
	params.Properties = maps.Clone(params.Properties)
	if params.Properties == nil {
		params.Properties = map[string]*genai.Schema{}
	}
	params.Properties[toolcall.RefIDArg] = refIDSchema
	d.Parameters = &params
	return &d
}

// Recorded is the function declaration of an outside tool from the
// declaration a plan recorded (toolcall.Tool.Declared), with ref_id: a step
// turn declares what the plan saw, not what the server offers now.
func Recorded(name string, d toolcall.Declared) (*genai.FunctionDeclaration, error) {
	decl := genai.FunctionDeclaration{Name: name, Description: d.Description}
	if len(d.Parameters) > 0 {
		decl.Parameters = &genai.Schema{}
		if err := json.Unmarshal(d.Parameters, decl.Parameters); err != nil {
			return nil, fmt.Errorf("the recorded declaration of %s: %w", name, err)
		}
	}
	return withRefID(decl), nil
}

// OutsideDescriptions are the outside tools' own descriptions by name, for
// the planner: they come from the servers, so the prompt shows them as
// data, never in its instructions.
func (r *Registry) OutsideDescriptions() map[string]string {
	r = r.Snapshot()
	out := map[string]string{}
	for _, n := range r.names {
		if t, ok := r.byName[n].(Outside); ok {
			out[n] = t.Recorded().Description
		}
	}
	return out
}

// Catalog describes every tool as text, for the planner, which does not use
// function calling: one line per tool with its purpose and parameters.
func (r *Registry) Catalog() string {
	r = r.Snapshot()
	var b strings.Builder
	for _, n := range r.names {
		t := r.byName[n]
		fmt.Fprintf(&b, "- `%s`: %s\n", n, t.Purpose())
		d := t.Declaration()
		if d.Parameters == nil || len(d.Parameters.Properties) == 0 {
			continue
		}
		props := slices.Sorted(maps.Keys(d.Parameters.Properties))
		for i, p := range props {
			if slices.Contains(d.Parameters.Required, p) {
				props[i] += " (required)"
			}
		}
		fmt.Fprintf(&b, "  parameters: %s\n", strings.Join(props, ", "))
	}
	return b.String()
}

// Rejection is a tool error that the model should see as the tool's result
// (bad arguments, nothing found, access refused), as opposed to a transient
// failure worth retrying. unknown marks one after which the tool may have
// acted (RejectUnknown).
type Rejection struct {
	msg     string
	unknown bool
}

func (e *Rejection) Error() string { return e.msg }

// Reject returns a Rejection with a formatted message: the call did nothing
// (it was refused, or the tool reported an error).
func Reject(format string, args ...any) error {
	return &Rejection{msg: fmt.Sprintf(format, args...)}
}

// RejectUnknown is Reject for a call that may have reached the tool and
// taken effect, though its answer never came or was not read (a timeout,
// an oversized answer): an approved action so is of unknown outcome.
func RejectUnknown(format string, args ...any) error {
	return &Rejection{msg: fmt.Sprintf(format, args...), unknown: true}
}

// OutcomeUnknown reports whether err is a Rejection from RejectUnknown.
func OutcomeUnknown(err error) bool {
	var r *Rejection
	return errors.As(err, &r) && r.unknown
}

// IsRejection reports whether err (or an error it wraps) is a Rejection.
func IsRejection(err error) bool {
	var r *Rejection
	return errors.As(err, &r)
}

// StringArg returns a trimmed string argument; a required one must be
// non-empty, and maxLen > 0 bounds its length. Problems are Rejections.
func StringArg(args map[string]any, name string, required bool, maxLen int) (string, error) {
	v, ok := args[name]
	if !ok || v == nil {
		if required {
			return "", Reject("missing required argument %q", name)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", Reject("argument %q must be a string, got %T", name, v)
	}
	s = strings.TrimSpace(s)
	if required && s == "" {
		return "", Reject("argument %q must not be empty", name)
	}
	if maxLen > 0 && len(s) > maxLen {
		return "", Reject("argument %q is too long (%d bytes, at most %d)", name, len(s), maxLen)
	}
	return s, nil
}

// IntArg returns a whole-number argument within [lo, hi], or def when
// absent. Quoted numbers are accepted, as models sometimes send them.
func IntArg(args map[string]any, name string, def, lo, hi int) (int, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return def, nil
	}
	var n float64
	switch x := v.(type) {
	case float64:
		n = x
	case int:
		n = float64(x)
	case int64:
		n = float64(x)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return 0, Reject("argument %q must be a whole number from %d to %d, got %q", name, lo, hi, x)
		}
		n = f
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, Reject("argument %q must be a whole number from %d to %d, got %q", name, lo, hi, x)
		}
		n = f
	default:
		return 0, Reject("argument %q must be a number, got %T", name, v)
	}
	if n != math.Trunc(n) || n < float64(lo) || n > float64(hi) {
		return 0, Reject("argument %q must be a whole number from %d to %d, got %v", name, lo, hi, v)
	}
	return int(n), nil
}
