package activities

import "github.com/secops-agent/investigator/alerts"

// indicatorLines lists the alert's indicators, one per line.
func indicatorLines(al alerts.Alert) string {
	return "(indicator extraction is not wired yet)"
}
