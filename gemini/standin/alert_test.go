package standin

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The source is an address in a field named for where activity came from
// (not the instance's own public IP, not "resource"); the address to search
// for is the source, else the first public one, on the field that holds it.
func TestAlertInfo(t *testing.T) {
	cases := []struct {
		file                         string
		source, key, field, op, host string
	}{
		{guardDutyFile, "198.51.100.23", "198.51.100.23", "service.action.networkConnectionAction.remoteIpDetails.ipAddressV4", "==", "web-server-prod-01"},
		{sccFile, "", "203.0.113.45", "finding.indicator.ipAddresses", "array-contains", "batch-worker-7"},
		{"../../examples/evals/alerts/waf-sqli-cms-editor.json", "192.0.2.10", "192.0.2.10", "client_ip", "==", ""},
		{"../../examples/evals/alerts/edr-falcon-devtcp-api-server-prod-02.json", "", "", "", "", "api-server-prod-02"},
	}
	for _, c := range cases {
		info := alertFromData(readAlert(t, c.file).Data)
		assert.Equal(t, []string{c.source, c.key, c.field, c.op, c.host}, []string{info.Source, info.Key, info.Field, info.Op, info.Host}, c.file)
	}
	gd := alertFromData(readAlert(t, guardDutyFile).Data)
	assert.Equal(t, "i-0abc1234def567890", gd.Instance)
	assert.Equal(t, 214, gd.Count)
	assert.Equal(t, "2026-11-20 07:58:12–08:14:47 UTC", gd.window())
	assert.Equal(t, "2026-11-20", gd.days())
}

func TestSearchCondition(t *testing.T) {
	for path, want := range map[string][2]string{
		"a.b":         {"a.b", "=="},
		"a.ips[2]":    {"a.ips", "array-contains"},
		"a[0].ip":     {"", ""},
		"a.ips[x]":    {"", ""},
		"a[0].ips[1]": {"", ""},
	} {
		field, op, _ := searchCondition(path)
		assert.Equal(t, want, [2]string{field, op}, path)
	}
}
