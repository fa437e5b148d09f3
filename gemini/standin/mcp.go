package standin

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/clip"
)

// MCP tools, driven by what the request offers, never by a tool's name:
// any MCP server's tools are used the same way. The planner's catalog
// lists them as "- `server.tool`: a tool of the MCP server ..." (written by
// code, outside the data blocks); an acting one says "ACTS".

// mcpTool is an MCP tool the catalog offers.
type mcpTool struct {
	name string
	acts bool
}

// mcpTools reads the MCP tools from the planner's catalog.
func (p page) mcpTools() []mcpTool {
	var out []mcpTool
	for _, l := range p.open {
		rest, ok := strings.CutPrefix(l, catalogPrefix)
		if !ok {
			continue
		}
		name, purpose, ok := strings.Cut(rest, "`: ")
		if !ok || !strings.Contains(name, ".") || !strings.HasPrefix(purpose, "a tool of the MCP server") {
			continue
		}
		out = append(out, mcpTool{name: name, acts: strings.Contains(purpose, " ACTS ")})
	}
	return out
}

// mcpSteps plans the MCP steps: one that reads with every read tool about
// the alert's indicator, and, when an acting tool is offered and the alert
// names an address, one that asks to act on it with the first acting tool
// (which waits for the analyst's approval).
func mcpSteps(p page, al alertInfo, add func(description, expected string, deps []string, tools ...string)) {
	var reads, acts []string
	for _, t := range p.mcpTools() {
		if t.acts {
			acts = append(acts, t.name)
		} else {
			reads = append(reads, t.name)
		}
	}
	target := cmpStr(al.Source, al.Key, al.Host, al.ID)
	if len(reads) > 0 {
		add(fmt.Sprintf("Look up %s with the MCP tools %s.", target, strings.Join(reads, ", ")),
			"What the team's own systems know of "+target+".", []string{}, reads...)
	}
	if len(acts) > 0 && target != "" {
		add(fmt.Sprintf("Ask to contain %s with %s: the call waits for the analyst's approval.", target, acts[0]),
			"Whether the action on "+target+" was approved and performed.", []string{}, acts[0])
	}
}

func cmpStr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// mcpDeclared are the MCP functions (dotted names) a request declares.
func mcpDeclared(r *geminitest.Request) []*genai.FunctionDeclaration {
	var out []*genai.FunctionDeclaration
	for _, fd := range r.FunctionDeclarations() {
		if strings.Contains(fd.Name, ".") {
			out = append(out, fd)
		}
	}
	return out
}

// mcpStep calls each declared MCP function once, with arguments made from
// its schema and the alert, then reports each result (or error) as a fact.
func mcpStep(step string, al alertInfo, decls []*genai.FunctionDeclaration, t turn, last bool) geminitest.Reply {
	id := func(i int) string { return fmt.Sprintf("mcp-%d", i+1) }
	if !last && t.result(id(0)) == nil {
		calls := make([]*genai.FunctionCall, len(decls))
		for i, d := range decls {
			calls[i] = call(id(i), d.Name, mcpArgs(d, al, step))
		}
		return geminitest.Calls(calls...)
	}
	rec := record{Step: step}
	for i, d := range decls {
		res := t.result(id(i))
		var fact, tool string // only a call that returned a result is cited
		switch {
		case res == nil:
			fact = d.Name + " was not called."
		case res["error"] != nil:
			fact = d.Name + " failed: " + clip.String(str(res["error"]), maxValue)
		case res["performed"] != nil: // false, or "unknown" when an approved action failed
			fact = fmt.Sprintf("%s was not performed: %s (%s).", d.Name, str(res["outcome"]), clip.String(str(res["reason"]), maxValue))
		default:
			fact, tool = d.Name+" answered: "+clip.String(cmpStr(str(res["content"]), fmt.Sprint(res["structured"])), maxValue), d.Name
		}
		rec.Evidence = append(rec.Evidence, evidence{Tool: tool, Fact: fact})
	}
	return geminitest.Text(answer(intro(step), rec))
}

// mcpArgs fills a function's parameters from the alert: required ones (or
// every one when none is required), by what their names suggest, else the
// alert's main indicator.
func mcpArgs(d *genai.FunctionDeclaration, al alertInfo, step string) map[string]any {
	args := map[string]any{}
	if d.Parameters == nil {
		return args
	}
	names := d.Parameters.Required
	if len(names) == 0 {
		for n := range d.Parameters.Properties {
			if n != "ref_id" {
				names = append(names, n)
			}
		}
		slices.Sort(names)
	}
	indicator := cmpStr(al.Source, al.Key, al.Host, al.ID)
	for _, n := range names {
		s := d.Parameters.Properties[n]
		low := strings.ToLower(n)
		var v any
		switch {
		case strings.Contains(low, "reason") || strings.Contains(low, "why") || strings.Contains(low, "justif") || strings.Contains(low, "comment"):
			v = fmt.Sprintf("investigation of alert %s (%s)", al.name(), step)
		case strings.Contains(low, "user") && len(al.Users) > 0:
			v = al.Users[len(al.Users)-1]
		case strings.Contains(low, "host") && al.Host != "":
			v = al.Host
		default:
			v = indicator
		}
		if s != nil {
			switch {
			case len(s.Enum) > 0:
				v = s.Enum[0]
			case s.Type == genai.TypeInteger || s.Type == genai.TypeNumber:
				v = 1
			case s.Type == genai.TypeBoolean:
				v = false
			case s.Type == genai.TypeArray:
				v = []any{v}
			}
		}
		args[n] = v
	}
	return args
}
