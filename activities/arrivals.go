package activities

import (
	"time"

	"github.com/secops-agent/investigator/investigation"
)

// arrivalsView is the alerts that arrived for an investigation (the
// intake, design/intake.md) as the plan, step and answer prompts show them:
// our own count in the open, the arrivals in a data block (their titles
// come from alerts).
type arrivalsView struct {
	Count, Dropped int
	Items          []arrivalItem
}

type arrivalItem struct {
	What     string `json:"what"`
	AlertID  string `json:"alert_id"`
	Source   string `json:"source,omitempty"`
	Severity string `json:"severity,omitempty"`
	Title    string `json:"title,omitempty"`
	At       string `json:"at"`
}

// arrivalsSection is nil when none arrived, so the template's block shows
// nothing.
func arrivalsSection(b investigation.ArrivalBatch) *arrivalsView {
	if len(b.Arrivals) == 0 && b.Dropped == 0 {
		return nil
	}
	v := &arrivalsView{Count: len(b.Arrivals) + b.Dropped, Dropped: b.Dropped, Items: make([]arrivalItem, len(b.Arrivals))}
	for i, a := range b.Arrivals {
		v.Items[i] = arrivalItem{What: a.Text(), AlertID: a.AlertID, Source: a.Source, Severity: a.Severity, Title: a.Title, At: a.At.UTC().Format(time.RFC3339)}
	}
	return v
}
