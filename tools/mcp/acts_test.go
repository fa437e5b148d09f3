package mcp

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWhoDecidesThatAToolActs: every tool acts unless the team's
// configuration vouches it only reads (read_only); a server's readOnlyHint
// never waives the approval; the team may require approval of any tool,
// and never overrules a server that marks its tool destructive.
func TestWhoDecidesThatAToolActs(t *testing.T) {
	yes, no := true, false
	s := Server{
		Approval: map[string]string{"lookup": ApprovalRequired},
		ReadOnly: []string{"search", "wipe", "note"},
	}
	for _, c := range []struct {
		tool string
		ann  *mcp.ToolAnnotations
		acts bool
	}{
		{"plain", nil, true}, // said nothing: waits
		{"reader", &mcp.ToolAnnotations{ReadOnlyHint: true}, true},   // says it reads: its word only
		{"writer", &mcp.ToolAnnotations{DestructiveHint: &no}, true}, // not read-only
		{"lookup", &mcp.ToolAnnotations{ReadOnlyHint: true}, true},   // the operator requires approval
		{"search", nil, false}, // vouched for, unannotated
		{"note", &mcp.ToolAnnotations{DestructiveHint: &no}, false}, // vouched for, additive
		{"wipe", &mcp.ToolAnnotations{DestructiveHint: &yes}, true}, // the server says destructive
	} {
		if got := s.acts(&mcp.Tool{Name: c.tool, Annotations: c.ann}); got != c.acts {
			t.Errorf("%s: acts = %v, want %v", c.tool, got, c.acts)
		}
	}
	if _, err := Parse([]byte("servers:\n  a: {command: x, approval: {t: required}, read_only: [t]}")); err == nil {
		t.Error("a tool both read_only and approval: required was accepted")
	}
}
