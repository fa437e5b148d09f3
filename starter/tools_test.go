package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/secops-agent/investigator/investigation"
)

// The analyst sees what the product says of a tool (acts, waits for
// approval, the server claims read-only) in its own column, whole, however
// long the server's description: the description is cut, the status never.
func TestToolsListShowsTheServersClaimApart(t *testing.T) {
	long := strings.Repeat("Disables a user account in the directory. ", 5)
	var out bytes.Buffer
	err := writeTools(&out, []investigation.ToolStatus{
		{Name: "ext.disable_user", Enabled: true, Acts: true, ClaimsReadOnly: true, Says: long,
			Description: "Acts outside the investigation (changes a system): each call waits for the analyst's approval; a denial is the call's result. " +
				"The server marks it read-only, but only the team's configuration (read_only) waives the approval, and it has not. What MCP server ext says it does follows …"},
		{Name: "query_otx", Enabled: true, Description: "Look up an indicator in OTX."},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	var row string
	for _, l := range lines {
		if strings.HasPrefix(l, "ext.disable_user") {
			row = l
		}
	}
	for _, want := range []string{"enabled, acts (approval), server claims read-only", "server says: Disables a user account"} {
		if !strings.Contains(row, want) {
			t.Errorf("the row lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(out.String(), "Look up an indicator in OTX.") {
		t.Errorf("a built-in tool's description is missing:\n%s", out.String())
	}
}
