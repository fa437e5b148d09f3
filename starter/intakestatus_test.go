package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
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

// The intake's --approval-timeout (env INTAKE_APPROVAL_TIMEOUT) is checked
// before anything is dialed and carried in the settings the admission
// workflow gives its investigations.
func TestIntakeApprovalTimeout(t *testing.T) {
	_, err := runCLI(t, noTemporal, "intake", "--subscription", "projects/p/subscriptions/s", "--approval-timeout", "0s")
	require.EqualError(t, err, "--approval-timeout must be positive, not 0s")
	t.Setenv("INTAKE_APPROVAL_TIMEOUT", "soon")
	_, err = runCLI(t, noTemporal, "intake", "--subscription", "projects/p/subscriptions/s")
	require.EqualError(t, err, `INTAKE_APPROVAL_TIMEOUT="soon" is not a duration such as 30s or 3m (it sets --approval-timeout)`)
	s := intakeOptions{approvalTimeout: 10 * time.Minute}.settings(testApp())
	require.Equal(t, investigation.Duration(10*time.Minute), s.ApprovalTimeout)

	var b strings.Builder
	renderIntakeStatus(&b, "q", intake.Status{Settings: s})
	require.Contains(t, b.String(), "approval timeout 10m")
	b.Reset()
	renderIntakeStatus(&b, "q", intake.Status{})
	require.Contains(t, b.String(), "approval timeout 24h", "a room recorded before the setting shows the default")
}
