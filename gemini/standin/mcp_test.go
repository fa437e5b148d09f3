package standin

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/plan"
	"github.com/secops-agent/investigator/tools/mcp"
	"github.com/secops-agent/investigator/tools/mcp/mcptest"
)

// The stand-in uses whatever MCP tools the catalog offers, by what the
// request says of them: a stranger's server whose tool names nothing in the
// product knows (the team's configuration vouching that its lookup only
// reads) gets a read step and an action step on the alert's address, and each step calls its tools with arguments from their schemas.
func TestStandinUsesAStrangersMCPTools(t *testing.T) {
	log := &mcptest.Log{}
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcptest.Stranger(log, false) }, nil))
	t.Cleanup(srv.Close)
	reg := registry(t, false)
	cfg, err := mcp.Parse([]byte("servers:\n  ext:\n    url: " + srv.URL + "\n    read_only: [asset_owner_lookup]\n"))
	require.NoError(t, err)
	servers := mcp.New(cfg, reg, slog.New(slog.DiscardHandler))
	servers.Connect(context.Background())
	t.Cleanup(servers.Close)

	h := newHarness(t)
	al := readAlert(t, guardDutyFile)
	p, _ := askPlan(t, h, alertSection(t, al), reg) // checked as the workflow checks it
	steps := p.Steps
	var read, act *plan.Step
	for i := range steps {
		switch {
		case assert.ObjectsAreEqual(steps[i].Tools, []string{"ext.asset_owner_lookup"}):
			read = &steps[i]
		case assert.ObjectsAreEqual(steps[i].Tools, []string{"ext.quarantine_endpoint"}):
			act = &steps[i]
		}
	}
	require.NotNil(t, read, "a step reads with the stranger's read tool: %+v", steps)
	require.NotNil(t, act, "a step asks for the stranger's action: %+v", steps)
	assert.Contains(t, act.Description, "198.51.100.23")

	l := h.loop(agentPrompts, "execute", executeData(alertSection(t, al), *act), stepDecls(reg, *act))
	_, calls := l.turn(false)
	require.Len(t, calls, 1)
	assert.Equal(t, "ext.quarantine_endpoint", calls[0].Name)
	assert.Equal(t, "198.51.100.23", calls[0].Args["target"])
	l.answer(calls, map[string]map[string]any{calls[0].ID: {"performed": false, "outcome": "denied", "reason": "not ours"}})
	text, _ := l.turn(false)
	assert.Contains(t, text, "ext.quarantine_endpoint was not performed: denied (not ours)")
}
