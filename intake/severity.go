package intake

import "github.com/secops-agent/investigator/alerts"

// Rank orders the normalised severities: critical 5, high 4, medium 3,
// unknown 2 (a source that gives none may still be serious, so it goes
// before low), low 1.
func Rank(severity string) int {
	switch severity {
	case alerts.SeverityCritical:
		return 5
	case alerts.SeverityHigh:
		return 4
	case alerts.SeverityMedium:
		return 3
	case alerts.SeverityLow:
		return 1
	}
	return 2
}

// Higher returns the higher of two severities.
func Higher(a, b string) string {
	if Rank(b) > Rank(a) {
		return b
	}
	return a
}
