package activities

import (
	"strings"

	"github.com/secops-agent/investigator/alerts"
)

// indicatorLines lists every indicator of the alert, each whole, one per
// line: "<kind> <value> (at <path>)", quoted only when a control character
// would otherwise break the line.
func indicatorLines(al alerts.Alert) string {
	found := alerts.Indicators(al.Data)
	if len(found) == 0 {
		return "(no indicators found)"
	}
	var b strings.Builder
	for i, in := range found {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(in.String())
	}
	return b.String()
}
