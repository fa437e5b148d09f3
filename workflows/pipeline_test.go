package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/toolcall"
)

func call(id string, args map[string]any) toolcall.Call {
	return toolcall.Call{ID: id, Name: "t", Args: args}
}

func TestPlanPipeline(t *testing.T) {
	calls := []toolcall.Call{
		call("c1", map[string]any{"ref_id": "search", "q": "x"}),
		call("c2", map[string]any{"uuid": "ref:search.results.0.uuid"}),
		call("c3", map[string]any{"a": "ref:c2", "b": []any{"ref:c1", "plain"}}),
		call("c4", map[string]any{"q": "independent"}),
	}
	p := planPipeline(calls, nil)
	require.Empty(t, p.bad)
	require.Equal(t, [][]int{nil, {0}, {0, 1}, nil}, p.deps)
	require.Equal(t, []namedRef{{"search", 0}}, p.refs[1])
	require.Equal(t, []namedRef{{"c1", 0}, {"c2", 1}}, p.refs[2])
}

func TestPlanPipelineErrors(t *testing.T) {
	calls := []toolcall.Call{
		call("c1", map[string]any{"x": "ref:c2"}),
		call("c2", map[string]any{"x": "ref:c1"}),
		call("c3", map[string]any{"x": "ref:nobody"}),
		call("c4", map[string]any{"x": "ref:c1.field"}),
		call("c5", map[string]any{"ref_id": "dup"}),
		call("c6", map[string]any{"ref_id": "dup"}),
		call("c7", map[string]any{"x": "ref:dup"}),
		call("c8", map[string]any{"x": "ref:c8"}),
		call("c9", map[string]any{"x": "fine"}),
	}
	p := planPipeline(calls, nil)
	require.Equal(t, "cyclic refs: c1 -> c2 -> c1", p.bad[0])
	require.Equal(t, "cyclic refs: c1 -> c2 -> c1", p.bad[1])
	require.Equal(t, "ref:nobody names no call of this turn", p.bad[2])
	require.Contains(t, p.bad[3], "uses the result of c1, which cannot run (cyclic refs")
	require.Contains(t, p.bad[6], `ref:dup is ambiguous`)
	require.Equal(t, "ref:c8 refers to the call itself", p.bad[7])
	for _, ok := range []int{4, 5, 8} {
		require.NotContains(t, p.bad, ok)
	}
}
