package main

import (
	"strings"
	"testing"

	"github.com/secops-agent/investigator/intake"
)

// What closing investigations could not hand back is trouble the status
// names, even when nothing else went wrong.
func TestIntakeStatusNamesAlertsNotHandedBack(t *testing.T) {
	var b strings.Builder
	renderIntakeStatus(&b, "q", intake.Status{Counters: intake.Counters{HandBackDropped: 3}})
	if !strings.Contains(b.String(), "3 not handed back by closing investigations") {
		t.Fatalf("the status does not name them:\n%s", b.String())
	}
}

// Arrivals lost with an investigation given up after failed starts are
// trouble the status names.
func TestIntakeStatusNamesAlertsLostWithAGivenUpStart(t *testing.T) {
	var b strings.Builder
	renderIntakeStatus(&b, "q", intake.Status{Counters: intake.Counters{GivenUpDropped: 4}})
	if !strings.Contains(b.String(), "(4 alerts past the queue bounds lost with them)") {
		t.Fatalf("the status does not name them:\n%s", b.String())
	}
}

// A daily budget that a model without a price makes unkeepable is named,
// with the model.
func TestIntakeStatusNamesAnUnpricedModel(t *testing.T) {
	var b strings.Builder
	renderIntakeStatus(&b, "q", intake.Status{Settings: intake.Settings{DailyBudgetUSD: 5}, Unpriced: "gemini-9"})
	if !strings.Contains(b.String(), "the daily budget cannot be kept: model gemini-9 has no price") {
		t.Fatalf("the status does not name it:\n%s", b.String())
	}
}
