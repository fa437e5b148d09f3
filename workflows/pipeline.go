package workflows

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/secops-agent/investigator/toolcall"
)

// pipeline is the dependency graph of one model turn's calls.
type pipeline struct {
	// deps[i] lists the calls whose results call i uses, in call order.
	deps [][]int
	// refs[i] lists the ref names call i uses with the call that answers
	// each, sorted by name.
	refs [][]namedRef
	// bad[i] says why call i cannot run (unknown, ambiguous or cyclic refs).
	bad map[int]string
}

// namedRef is a ref name and the index of the call it names.
type namedRef struct {
	name string
	call int
}

// names returns the names other calls can refer to call c by: its call ID
// and the ref_id argument the model gave it.
func names(c toolcall.Call) []string {
	out := []string{c.ID}
	if id, ok := c.Args[toolcall.RefIDArg].(string); ok && strings.TrimSpace(id) != "" && strings.TrimSpace(id) != c.ID {
		out = append(out, strings.TrimSpace(id))
	}
	return out
}

// planPipeline finds the ref: arguments of each call, resolves them to other
// calls of the same turn, and marks calls with unknown, ambiguous or cyclic
// refs, calls with refs to a tool that takes none (takesRefs; nil: every
// tool takes them), and calls that depend on those, as bad. It is pure and
// deterministic.
func planPipeline(calls []toolcall.Call, takesRefs func(tool string) bool) pipeline {
	p := pipeline{deps: make([][]int, len(calls)), refs: make([][]namedRef, len(calls)), bad: map[int]string{}}
	owner := map[string]int{}
	ambiguous := map[string]bool{}
	for i, c := range calls {
		for _, n := range names(c) {
			if j, seen := owner[n]; seen && j != i {
				ambiguous[n] = true
			}
			owner[n] = i
		}
	}
	known := make([]string, 0, len(owner))
	for n := range owner {
		known = append(known, n)
	}
	// Longest first, so "s1.x" prefers a call named "s1.x" over "s1".
	sort.Slice(known, func(a, b int) bool {
		if len(known[a]) != len(known[b]) {
			return len(known[a]) > len(known[b])
		}
		return known[a] < known[b]
	})
	for i, c := range calls {
		if refs := refValues(c.Args); len(refs) > 0 && takesRefs != nil && !takesRefs(c.Name) {
			// Only CallTool fills refs in: a question or a sub-agent would
			// get the literal "ref:…". The model has not seen the value yet,
			// so it calls again in a later turn.
			p.bad[i] = fmt.Sprintf("%s takes no %s arguments (%s%s); call it again with the value written out once the call it comes from has answered",
				c.Name, toolcall.RefPrefix, toolcall.RefPrefix, refs[0])
			continue
		}
		for _, ref := range refValues(c.Args) {
			name := matchName(ref, known)
			switch {
			case name == "":
				p.bad[i] = fmt.Sprintf("%s%s names no call of this turn", toolcall.RefPrefix, ref)
			case ambiguous[name]:
				p.bad[i] = fmt.Sprintf("%s%s is ambiguous: several calls of this turn are named %q", toolcall.RefPrefix, ref, name)
			case owner[name] == i:
				p.bad[i] = fmt.Sprintf("%s%s refers to the call itself", toolcall.RefPrefix, ref)
			case !slices.ContainsFunc(p.refs[i], func(r namedRef) bool { return r.name == name }):
				p.refs[i] = append(p.refs[i], namedRef{name, owner[name]})
				if !slices.Contains(p.deps[i], owner[name]) {
					p.deps[i] = append(p.deps[i], owner[name])
				}
			}
		}
		sort.Ints(p.deps[i])
		sort.Slice(p.refs[i], func(a, b int) bool { return p.refs[i][a].name < p.refs[i][b].name })
	}
	// Cycles: depth-first over calls in order; a call on a cycle, or one that
	// depends on a bad call, is bad too.
	const (
		unvisited = iota
		visiting
		finished
	)
	state := make([]int, len(calls))
	var visit func(i int, path []int)
	visit = func(i int, path []int) {
		state[i] = visiting
		path = append(path, i)
		for _, j := range p.deps[i] {
			switch state[j] {
			case visiting:
				cycle := []string{}
				start := 0
				for k, n := range path {
					if n == j {
						start = k
					}
				}
				for _, n := range path[start:] {
					cycle = append(cycle, calls[n].ID)
				}
				cycle = append(cycle, calls[j].ID)
				for _, n := range path[start:] {
					p.bad[n] = "cyclic refs: " + strings.Join(cycle, " -> ")
				}
			case unvisited:
				visit(j, path)
			}
			if why, isBad := p.bad[j]; isBad {
				if _, already := p.bad[i]; !already {
					p.bad[i] = fmt.Sprintf("it uses the result of %s, which cannot run (%s)", calls[j].ID, why)
				}
			}
		}
		state[i] = finished
	}
	for i := range calls {
		if state[i] == unvisited {
			visit(i, nil)
		}
	}
	return p
}

// matchName returns the known call name that ref starts with ("name" or
// "name.path"), or "".
func matchName(ref string, known []string) string {
	for _, n := range known {
		if ref == n || strings.HasPrefix(ref, n+".") {
			return n
		}
	}
	return ""
}

// refValues returns the ref: targets in a call's arguments (nested values
// included), in a deterministic order.
func refValues(args map[string]any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if ref, ok := strings.CutPrefix(x, toolcall.RefPrefix); ok {
				out = append(out, strings.TrimSpace(ref))
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(x[k])
			}
		}
	}
	walk(args)
	return out
}
