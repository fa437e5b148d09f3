package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/tools"
)

// TestDescribeTools: the catalog carries the tools, on or off, and the
// model endpoint the worker was given, so starter eval can tell a stand-in,
// and its Firestore database, so starter eval can tell the eval's.
func TestDescribeTools(t *testing.T) {
	reg, err := tools.NewRegistry(tools.NewAskUser())
	require.NoError(t, err)
	reg.Disable(tools.Disabled{Name: "query_otx", Reason: "OTX_API_KEY is not set"})
	ep := investigation.ModelEndpoint{Model: "gemini-2.5-flash", Backend: "gemini-api", BaseURL: "http://127.0.0.1:8089", Local: true}
	store := &investigation.StoreEndpoint{Project: "p", Database: "investigator-eval", Emulator: true}
	cat, err := (&Activities{Tools: reg, Endpoint: ep, Store: store}).DescribeTools(context.Background())
	require.NoError(t, err)
	require.Equal(t, ep, cat.Model)
	require.Equal(t, store, cat.Store, "starter eval checks the worker's database")
	require.Equal(t, []investigation.ToolStatus{
		{Name: "ask_user", Enabled: true, Description: tools.NewAskUser().Declaration().Description},
		{Name: "query_otx", Reason: "OTX_API_KEY is not set"},
	}, cat.Tools)
}
