package activities

import (
	"fmt"
	"time"

	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
)

// arrivalsSection renders the alerts that arrived for an investigation
// (the intake, design/intake.md) for the plan, step and answer prompts: a
// line of our own, then the arrivals as a data block, since their titles
// come from alerts. Empty when none arrived.
func arrivalsSection(b investigation.ArrivalBatch) string {
	if len(b.Arrivals) == 0 && b.Dropped == 0 {
		return ""
	}
	type item struct {
		What     string `json:"what"`
		AlertID  string `json:"alert_id"`
		Source   string `json:"source,omitempty"`
		Severity string `json:"severity,omitempty"`
		Title    string `json:"title,omitempty"`
		At       string `json:"at"`
	}
	items := make([]item, len(b.Arrivals))
	for i, a := range b.Arrivals {
		items[i] = item{What: a.Text(), AlertID: a.AlertID, Source: a.Source, Severity: a.Severity, Title: a.Title, At: a.At.UTC().Format(time.RFC3339)}
	}
	// Strings only: encoding cannot fail.
	block, _ := prompt.JSONBlock("alerts that arrived", items)
	head := fmt.Sprintf("%d alert(s) arrived for this investigation after it began: its own alert seen again, or related alerts that share an indicator with it. get_alert reads any of them by its alert_id.", len(b.Arrivals)+b.Dropped)
	if b.Dropped > 0 {
		head += fmt.Sprintf(" The %d earliest are not listed.", b.Dropped)
	}
	return head + "\n" + block
}
