package activities

import (
	"fmt"
	"strings"
	"time"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/tools"
)

// MaxAlertPromptBytes is the budget of an alert's data in a prompt: an alert
// whose compact JSON fits is shown whole (indented), in every phase that
// shows the alert. A larger one is shown as its most useful indicators plus
// a guide to its fields, and the prompt says that get_alert returns the
// rest: it does, in pages that each fit a tool result, whose default cap
// this is (the activity passes the run's cap to the tool).
const MaxAlertPromptBytes = investigation.DefaultMaxToolResultBytes

// alertFieldGuide is how many fields the guide of a large alert lists.
const alertFieldGuide = 80

// alertSection renders an alert for a prompt whose blocks carry tag: a
// header of the values the code made or normalised (ID, source, severity,
// time), then the alert's type and title, which the alert's author wrote
// (a generic alert takes its title from data.title and the like), in a block
// of their own, then the data as a data block.
func alertSection(tag prompt.Tag, al alerts.Alert) (string, error) {
	var b strings.Builder
	observed := "unknown"
	if !al.ObservedAt.IsZero() {
		observed = al.ObservedAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(&b, "%s%s\nSource: %s | severity: %s | observed: %s\n%s\n",
		prompt.AlertIDLabel, al.ID, al.Source, al.Severity, observed,
		tag.Block("alert type and title", "Type: "+al.Type+"\nTitle: "+al.Title))
	compact, err := prompt.MarshalJSON(al.Data, "")
	if err != nil {
		return "", fmt.Errorf("encode alert %s for the prompt: %w", al.ID, err)
	}
	if len(compact) <= MaxAlertPromptBytes {
		block, err := tag.JSONBlock("alert", al.Data)
		if err != nil {
			return "", err
		}
		b.WriteString("The alert's data, whole:\n" + block)
		return b.String(), nil
	}
	lines, shown, total := indicatorLines(al)
	fmt.Fprintf(&b, "The alert's data is %d bytes of JSON, more than the %d a prompt shows whole. "+
		"Below are %s, each whole, with the path where it first appears, and a guide to its fields. "+
		"Call get_alert with the alert ID for the complete data: it comes in pages, each saying the next_offset to ask for; "+
		"give path to read one field, or path %q for every indicator.\n",
		len(compact), MaxAlertPromptBytes, indicatorCount(shown, total), tools.IndicatorsPath)
	b.WriteString(tag.Block("alert indicators", lines) + "\n")
	b.WriteString(tag.Block("alert fields", alerts.Describe(al, alertFieldGuide)))
	return b.String(), nil
}
