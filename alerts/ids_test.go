package alerts

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pinnedIDs are the content-addressed IDs the example alerts had before
// numbers were decoded exactly; stored alerts and links keep these IDs, so
// a change to decoding must not move them.
var pinnedIDs = map[string]string{
	"guardduty-ssh-bruteforce.json":                                      "guardduty-b6b95f1bc667",
	"scc-cryptominer.json":                                               "scc-7e9ab52061d1",
	"history/edr-mde-web-server-prod-01.json":                            "edr-2c1e8bc350f3",
	"history/generic-authorized-vuln-scan.json":                          "generic-2f61fbb976e7",
	"history/guardduty-c2-dns-web-server-prod-01.json":                   "guardduty-3157218fd7bc",
	"history/guardduty-portprobe-web-server-prod-01.json":                "guardduty-3f7af8b00b99",
	"history/guardduty-ssh-bruteforce-bastion-01.json":                   "guardduty-8db0f55e83fd",
	"history/guardduty-ssh-bruteforce-web-server-prod-01-september.json": "guardduty-3bc745bae3c6",
	"history/scc-bad-ip-gce-etl-runner-2.json":                           "scc-770f027e21ea",
	"waf-sqli-cn.json":                                                   "generic-92bdd7c78943",
	"siem-struts2-rce-raw-log.json":                                      "generic-15284bf3b865",
	"ids-webshell-upload-cn.json":                                        "generic-57cda3598c5a",
}

// numbersAlert holds every number form that float64 decoding read exactly
// (integers, negative zero, fractions, exponents, the largest float); its
// ID was pinned with the old decoder too.
const numbersAlert = `{"type":"numbers","a":1,"b":-0,"c":1.5,"d":1e3,"e":-12.25e-3,"f":9007199254740991,"g":0.1,"h":1.0,` +
	`"i":100000000000000000000,"j":[0,-1,2.5e-300],"k":{"l":1.7976931348623157e308}}`

func TestAlertIDsArePinned(t *testing.T) {
	require.Len(t, pinnedIDs, len(examples), "every example alert has a pinned ID")
	for _, e := range examples {
		assert.Equal(t, pinnedIDs[e.file], parseExample(t, e.file).ID, e.file)
	}
	a, err := Parse([]byte(numbersAlert))
	require.NoError(t, err)
	assert.Equal(t, "generic-0be4984a3e7f", a.ID)
}
