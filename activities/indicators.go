package activities

import (
	"fmt"
	"strings"

	"github.com/secops-agent/investigator/alerts"
)

// The indicator list of a large alert's prompt: the first ones in rank
// order (alerts.Kinds: addresses, domains, hashes, users, cloud resources,
// URLs, then file paths and command lines), at most this many and this
// many bytes. An indicator longer than what is left of the bytes is passed
// over for shorter ones after it; get_alert's "@indicators" has them all.
const (
	maxPromptIndicators     = 100
	maxPromptIndicatorBytes = 8 << 10
)

// indicatorLines lists the alert's most useful indicators, each whole, one
// per line: "<kind> <value> (at <path>)", quoted only when a control
// character would otherwise break the line. It returns how many it lists
// and how many the alert has.
func indicatorLines(al alerts.Alert) (lines string, shown, total int) {
	found, omitted := alerts.ScanIndicators(al.Data)
	total = len(found) + omitted
	if total == 0 {
		return "(no indicators found)", 0, 0
	}
	var b strings.Builder
	for _, in := range found {
		line := in.String()
		if shown == maxPromptIndicators {
			break
		}
		if b.Len()+len(line)+1 > maxPromptIndicatorBytes {
			continue
		}
		if shown > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
		shown++
	}
	if shown == 0 {
		return "(every indicator is too long for this list: read them with get_alert)", 0, total
	}
	return b.String(), shown, total
}

// indicatorCount says which indicators the list holds.
func indicatorCount(shown, total int) string {
	switch {
	case total == 0:
		return "the indicators found in it (none)"
	case shown == total:
		return fmt.Sprintf("all %d indicators found in it", total)
	}
	return fmt.Sprintf("the %d most useful of the %d indicators found in it (addresses, domains and hashes first; %d not listed)", shown, total, total-shown)
}
