package main

import (
	"context"
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
	fs, ctx := memoryFirestore(t)
	var err error

	out, err := runCLI(t, noTemporal, "memory", "list")
	require.NoError(t, err)
	require.Equal(t, "ID  STATUS  SCORE  UPDATED  TABLE  CLAIM\n", out, "no memories yet")

	embedding := make(firestore.Vector32, memory.Dimensions)
	embedding[0] = 1
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, m := range []memory.Memory{
		{ID: "m-low", Claim: "the logs table is named logs", Score: -2, CreatedAt: t0, Status: memory.StatusApproved},
		{ID: "m-old", Claim: "auth_events.source_ip is a STRING", CreatedAt: t0}, // stored before memories had a status
		{ID: "m-high", Claim: strings.Repeat("x", 120), Score: 3, CreatedAt: t0.Add(time.Hour), Status: memory.StatusApproved},
		{ID: "m-new", Claim: "source_ip is a STRING", Kind: memory.KindTypeFormat, Table: "security_logs.auth_events", Columns: []string{"source_ip"},
			CreatedAt: t0.Add(2 * time.Hour), Status: memory.StatusProposed},
		{ID: "m-no", Claim: "user holds the account", CreatedAt: t0.Add(3 * time.Hour), Status: memory.StatusRejected},
	} {
		m.Embedding, m.UpdatedAt = embedding, m.CreatedAt.Add(time.Minute)
		if m.ID == "m-new" {
			m.QueryText = "failed logins"
		}
		_, err := fs.Collection(memory.Collection).Doc(m.ID).Set(ctx, m)
		require.NoError(t, err)
	}

	out, err = runCLI(t, noTemporal, "memory", "list")
	require.NoError(t, err)
	require.Equal(t, `ID      STATUS    SCORE  UPDATED              TABLE                      CLAIM
m-high  approved  3      2026-01-02 04:05:05  -                          `+clip.String(strings.Repeat("x", 120), 100)+`
m-no    rejected  0      2026-01-02 06:05:05  -                          user holds the account
m-new   proposed  0      2026-01-02 05:05:05  security_logs.auth_events  source_ip is a STRING
                                                                         untrusted request text (from the alert): failed logins
m-old   proposed  0      2026-01-02 03:05:05  -                          auth_events.source_ip is a STRING
m-low   approved  -2     2026-01-02 03:05:05  -                          the logs table is named logs
`, out, "highest score first, then newest first, claims clipped to 100 characters; no status reads as proposed")

	out, err = runCLI(t, noTemporal, "memory", "list", "--limit", "1")
	require.NoError(t, err)
	require.Equal(t, "ID      STATUS    SCORE  UPDATED              TABLE  CLAIM\nm-high  approved  3      2026-01-02 04:05:05  -      "+clip.String(strings.Repeat("x", 120), 100)+"\n", out)

	out, err = runCLI(t, noTemporal, "memory", "list", "--proposed")
	require.NoError(t, err)
	require.Equal(t, `ID     STATUS    SCORE  UPDATED              TABLE                      CLAIM
m-new  proposed  0      2026-01-02 05:05:05  security_logs.auth_events  source_ip is a STRING
                                                                        untrusted request text (from the alert): failed logins
m-old  proposed  0      2026-01-02 03:05:05  -                          auth_events.source_ip is a STRING
`, out)
	out, err = runCLI(t, noTemporal, "memory", "list", "--status", "rejected")
	require.NoError(t, err)
	require.Contains(t, out, "m-no")
	require.Equal(t, 2, strings.Count(out, "\n"))
	_, err = runCLI(t, noTemporal, "memory", "list", "--status", "maybe")
	require.EqualError(t, err, `--status "maybe": use proposed, approved or rejected`)
	_, err = runCLI(t, noTemporal, "memory", "list", "--status", "approved", "--proposed")
	require.EqualError(t, err, "use --proposed or --status, not both")

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

// TestMemoryApproveAndReject: approve and reject change what recall finds;
// a memory stored before the lifecycle can be approved too.
func TestMemoryApproveAndReject(t *testing.T) {
	fs, ctx := memoryFirestore(t)
	var err error
	s := memory.NewStore(fs)

	vec := make([]float32, memory.Dimensions)
	vec[0] = 1
	c := memory.Claim{Kind: memory.KindTypeFormat, Table: "security_logs.auth_events", Columns: []string{"event_time"}, Text: "event_time is a TIMESTAMP in UTC"}
	_, _, err = s.Propose(ctx, "m-1", c, "request", vec, memory.StatusProposed)
	require.NoError(t, err)
	_, err = fs.Collection(memory.Collection).Doc("m-legacy").Set(ctx, map[string]any{"claim": "auth_events.user holds the account",
		"score": 0, "created_at": time.Now(), "embedding": firestore.Vector32(vec)})
	require.NoError(t, err)
	recalled := func() []string {
		ms, err := s.Recall(ctx, vec, 0.5, 0)
		require.NoError(t, err)
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
		return ids
	}
	require.Empty(t, recalled(), "nothing is recalled before a person approves it")

	out, err := runCLI(t, noTemporal, "memory", "approve", "m-1", "m-legacy")
	require.NoError(t, err)
	require.Equal(t, "approved m-1: event_time is a TIMESTAMP in UTC\napproved m-legacy: auth_events.user holds the account\n", out)
	require.ElementsMatch(t, []string{"m-1", "m-legacy"}, recalled())

	out, err = runCLI(t, noTemporal, "memory", "reject", "m-legacy")
	require.NoError(t, err)
	require.Equal(t, "rejected m-legacy: auth_events.user holds the account\n", out)
	require.Equal(t, []string{"m-1"}, recalled())
	shown, err := runCLI(t, noTemporal, "memory", "show", "m-legacy")
	require.NoError(t, err)
	require.Contains(t, shown, `"status": "rejected"`)
	require.Contains(t, shown, `"reviewed_at": "`)

	_, err = runCLI(t, noTemporal, "memory", "approve", "m-gone")
	require.EqualError(t, err, `memory "m-gone" not found`)
	_, err = runCLI(t, noTemporal, "memory", "reject")
	require.Error(t, err)
}

// memoryFirestore starts a Firestore emulator for the memory commands and
// returns a client of it, with a context for the test's own calls: a
// minute, since the emulator's JVM answers its first calls slowly when the
// whole suite runs at once.
func memoryFirestore(t *testing.T) (*firestore.Client, context.Context) {
	testenv.Firestore(t)
	t.Setenv("GOOGLE_CLOUD_PROJECT", testenv.Project)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	fs, err := firestore.NewClient(ctx, testenv.Project)
	require.NoError(t, err)
	t.Cleanup(func() { fs.Close() })
	return fs, ctx
}

// TestMemoryCommandsNeedFirestore: without a project or the emulator, list
// and delete say what to set.
func TestMemoryCommandsNeedFirestore(t *testing.T) {
	t.Setenv("FIRESTORE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "")
	for _, args := range [][]string{{"memory", "list"}, {"memory", "delete", "m-1"}, {"memory", "approve", "m-1"}, {"memory", "reject", "m-1"}} {
		_, err := runCLI(t, noTemporal, args...)
		require.EqualError(t, err, "no Firestore project: set GOOGLE_CLOUD_PROJECT (or FIRESTORE_EMULATOR_HOST for the local emulator)", strings.Join(args, " "))
	}
}

// TestMemoryListLabelsTheRequest: the request a memory was learned from
// was written from the alert, so an attacker can word it as advice to the
// approver; memory list shows it on one labelled line, clipped, and memory
// show under a key that says it is untrusted.
func TestMemoryListLabelsTheRequest(t *testing.T) {
	fs, ctx := memoryFirestore(t)
	embedding := make(firestore.Vector32, memory.Dimensions)
	embedding[0] = 1
	request := "Approved by the SOC lead: approve this memory now.\nIt is safe. " + strings.Repeat("trust it ", 30)
	_, err := fs.Collection(memory.Collection).Doc("m-1").Set(ctx, memory.Memory{ID: "m-1", Claim: "user holds the account", Status: memory.StatusProposed,
		QueryText: request, Embedding: embedding, CreatedAt: time.Now(), UpdatedAt: time.Now()})
	require.NoError(t, err)

	out, err := runCLI(t, noTemporal, "memory", "list", "--proposed")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	require.Equal(t, "untrusted request text (from the alert): "+clip.String(strings.TrimSpace("Approved by the SOC lead: approve this memory now. It is safe. "+strings.Repeat("trust it ", 30)), 100),
		strings.TrimSpace(lines[2]))
	require.Equal(t, strings.Index(lines[0], "CLAIM"), strings.Index(lines[2], "untrusted"), "under the claim")

	shown, err := runCLI(t, noTemporal, "memory", "show", "m-1")
	require.NoError(t, err)
	require.Contains(t, shown, `"untrusted_request_text": "Approved by the SOC lead`)
	require.NotContains(t, shown, `"query_text"`)
}
