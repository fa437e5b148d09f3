package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/testenv"
)

// noTemporal is the dialer of commands that never reach Temporal.
func noTemporal() (client.Client, error) { return nil, errors.New("no Temporal in this test") }

// TestMemoryListAndDelete runs memory list and memory delete against the
// Firestore emulator.
func TestMemoryListAndDelete(t *testing.T) {
	testenv.Firestore(t)
	t.Setenv("GOOGLE_CLOUD_PROJECT", testenv.Project)
	ctx := testCtx(t)
	fs, err := firestore.NewClient(ctx, testenv.Project)
	require.NoError(t, err)
	t.Cleanup(func() { fs.Close() })

	out, err := runCLI(t, noTemporal, "memory", "list")
	require.NoError(t, err)
	require.Equal(t, "ID  SCORE  UPDATED  CLAIM\n", out, "no memories yet")

	embedding := make(firestore.Vector32, memory.Dimensions)
	embedding[0] = 1
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, m := range []memory.Memory{
		{ID: "m-low", Claim: "the logs table is named logs", Score: -2, CreatedAt: t0},
		{ID: "m-old", Claim: "auth_events.source_ip is a STRING", CreatedAt: t0},
		{ID: "m-high", Claim: strings.Repeat("x", 120), Score: 3, CreatedAt: t0.Add(time.Hour)},
		{ID: "m-new", Claim: "filter failed SSH with event_type = 'ssh_failed'", CreatedAt: t0.Add(2 * time.Hour)},
	} {
		m.QueryText, m.Embedding, m.UpdatedAt = "failed logins", embedding, m.CreatedAt.Add(time.Minute)
		_, err := fs.Collection(memory.Collection).Doc(m.ID).Set(ctx, m)
		require.NoError(t, err)
	}

	out, err = runCLI(t, noTemporal, "memory", "list")
	require.NoError(t, err)
	require.Equal(t, `ID      SCORE  UPDATED              CLAIM
m-high  3      2026-01-02 04:05:05  `+clip.String(strings.Repeat("x", 120), 100)+`
m-new   0      2026-01-02 05:05:05  filter failed SSH with event_type = 'ssh_failed'
m-old   0      2026-01-02 03:05:05  auth_events.source_ip is a STRING
m-low   -2     2026-01-02 03:05:05  the logs table is named logs
`, out, "highest score first, then newest first, claims clipped to 100 characters")

	out, err = runCLI(t, noTemporal, "memory", "list", "--limit", "1")
	require.NoError(t, err)
	require.Equal(t, "ID      SCORE  UPDATED              CLAIM\nm-high  3      2026-01-02 04:05:05  "+clip.String(strings.Repeat("x", 120), 100)+"\n", out)

	out, err = runCLI(t, noTemporal, "memory", "delete", "m-low")
	require.NoError(t, err)
	require.Equal(t, "deleted m-low\n", out)
	out, err = runCLI(t, noTemporal, "memory", "list")
	require.NoError(t, err)
	require.NotContains(t, out, "m-low")
	require.Contains(t, out, "m-old")

	_, err = runCLI(t, noTemporal, "memory", "delete", "m-low")
	require.EqualError(t, err, `memory "m-low" not found`)
	_, err = runCLI(t, noTemporal, "memory", "delete", "a/b")
	require.EqualError(t, err, `memory "a/b" not found`)
}

// TestMemoryCommandsNeedFirestore: without a project or the emulator, list
// and delete say what to set.
func TestMemoryCommandsNeedFirestore(t *testing.T) {
	t.Setenv("FIRESTORE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "")
	for _, args := range [][]string{{"memory", "list"}, {"memory", "delete", "m-1"}} {
		_, err := runCLI(t, noTemporal, args...)
		require.EqualError(t, err, "no Firestore project: set GOOGLE_CLOUD_PROJECT (or FIRESTORE_EMULATOR_HOST for the local emulator)", strings.Join(args, " "))
	}
}
