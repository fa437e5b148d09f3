// Package tools holds the tools the agent can call and the registry that
// offers them to the model. A tool is a function declaration plus a Call; the
// registry is how later tools (threat intelligence, BigQuery) plug in.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/genai"
)

// Tool is one function the model can call.
type Tool interface {
	// Declaration describes the tool to the model; its Name is the tool's name.
	Declaration() *genai.FunctionDeclaration
	// Call runs the tool. Errors made with Reject go back to the model as the
	// tool's result; any other error is treated as transient and retried.
	Call(ctx context.Context, args map[string]any) (any, error)
}

// Registry is the set of tools a worker offers, ordered by name.
type Registry struct {
	byName map[string]Tool
	names  []string
}

// NewRegistry builds a registry; tool names must be unique and non-empty.
func NewRegistry(ts ...Tool) (*Registry, error) {
	r := &Registry{byName: map[string]Tool{}}
	for _, t := range ts {
		name := t.Declaration().Name
		if name == "" {
			return nil, errors.New("tool without a name")
		}
		if _, dup := r.byName[name]; dup {
			return nil, fmt.Errorf("tool %q registered twice", name)
		}
		r.byName[name] = t
		r.names = append(r.names, name)
	}
	sort.Strings(r.names)
	return r, nil
}

// Names returns the tool names in order.
func (r *Registry) Names() []string { return slices.Clone(r.names) }

// Lookup returns the tool with this name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Declarations returns the declarations of the named tools that exist, or of
// every tool when names is empty.
func (r *Registry) Declarations(names []string) []*genai.FunctionDeclaration {
	if len(names) == 0 {
		names = r.names
	}
	var out []*genai.FunctionDeclaration
	for _, n := range names {
		if t, ok := r.byName[n]; ok {
			out = append(out, t.Declaration())
		}
	}
	return out
}

// Catalog describes every tool as text, for the planner, which does not use
// function calling: one line per tool with its parameters.
func (r *Registry) Catalog() string {
	var b strings.Builder
	for _, n := range r.names {
		d := r.byName[n].Declaration()
		fmt.Fprintf(&b, "- `%s`: %s\n", n, d.Description)
		if d.Parameters == nil {
			continue
		}
		props := make([]string, 0, len(d.Parameters.Properties))
		for p := range d.Parameters.Properties {
			props = append(props, p)
		}
		sort.Strings(props)
		for i, p := range props {
			s := d.Parameters.Properties[p]
			req := ""
			if slices.Contains(d.Parameters.Required, p) {
				req = ", required"
			}
			props[i] = fmt.Sprintf("%s (%s%s)", p, strings.ToLower(string(s.Type)), req)
		}
		fmt.Fprintf(&b, "  parameters: %s\n", strings.Join(props, ", "))
	}
	return b.String()
}

// Rejection is a tool error that the model should see as the tool's result
// (bad arguments, nothing found, access refused), as opposed to a transient
// failure worth retrying.
type Rejection struct{ msg string }

func (e *Rejection) Error() string { return e.msg }

// Reject returns a Rejection with a formatted message.
func Reject(format string, args ...any) error {
	return &Rejection{msg: fmt.Sprintf(format, args...)}
}

// IsRejection reports whether err (or an error it wraps) is a Rejection.
func IsRejection(err error) bool {
	var r *Rejection
	return errors.As(err, &r)
}

// Summarize renders a call as one short line for activity summaries and
// progress output. It is pure, so workflow code can call it.
func Summarize(name string, args map[string]any) string {
	var s string
	switch name {
	case "search_alerts":
		s = fmt.Sprintf("%s %v %v %v", name, args["field"], args["op"], args["value"])
	case "get_alert":
		s = fmt.Sprintf("%s %v", name, args["id"])
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
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// stringArg returns a string argument; a required one must be non-empty.
func stringArg(args map[string]any, name string, required bool) (string, error) {
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
	return s, nil
}

// intArg returns an integer argument within [lo, hi], or def when absent.
func intArg(args map[string]any, name string, def, lo, hi int) (int, error) {
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
			return 0, Reject("argument %q must be a number", name)
		}
		n = f
	default:
		return 0, Reject("argument %q must be a number, got %T", name, v)
	}
	if n != float64(int(n)) || int(n) < lo || int(n) > hi {
		return 0, Reject("argument %q must be a whole number from %d to %d, got %v", name, lo, hi, v)
	}
	return int(n), nil
}
