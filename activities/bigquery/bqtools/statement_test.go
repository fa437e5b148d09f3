package bqtools

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
)

// On the real service the statement type must be exactly SELECT: a dry run
// or a job whose statistics report none is refused (fail closed), and a
// job whose statistics report another statement or another table or
// routine than its dry run did returns no row, from bigquery_query as from
// bigquery_result.
func TestRealServiceHoldsTheStatisticsToASelect(t *testing.T) {
	fb := newFakeBackend()
	e := fakeEnv(t, fb, nil)
	query := func(sql string) (queryResult, error) {
		ctx, _ := callCtx(t, "s/"+sql, 0)
		res, err := runQuery{e}.Call(ctx, map[string]any{"sql": sql})
		if err != nil {
			return queryResult{}, err
		}
		return res.(queryResult), nil
	}

	fb.dry[countAuth] = fakeDry{tables: []string{auth}, noStatementType: true}
	_, err := query(countAuth)
	requireRejection(t, err, "query refused: BigQuery's dry run reported no statement type")
	_, starts := fb.calls()
	assert.Zero(t, starts, "a query whose dry run reports no statement type never runs")

	for sql, job := range map[string]fakeDry{
		"SELECT 1 AS a":         {noStatementType: true},
		"SELECT 2 AS a":         {statementType: "DELETE"},
		"SELECT 3 AS a":         {tables: []string{"other_ds.secrets"}},
		"SELECT 4 AS a":         {routines: []string{"other-proj.fns.exfil"}},
		"SELECT 5 AS a":         {graphs: []string{"demo-investigator.g.net"}},
		"SELECT 6 AS a LIMIT 1": {tables: []string{auth}},
	} {
		fb.dry[sql] = fakeDry{job: &job}
		res, err := query(sql)
		if sql == "SELECT 6 AS a LIMIT 1" {
			require.NoError(t, err, sql)
			assert.Len(t, res.Preview, 3)
			continue
		}
		require.Error(t, err, sql)
		assert.Regexp(t, "no statement type|ran a DELETE statement|other_ds.secrets|other-proj.fns.exfil|property graph", err.Error(), sql)
		assert.Empty(t, res.Preview, sql)
	}

	// bigquery_result: a job of this session whose statistics report no
	// statement type.
	ctx, _ := callCtx(t, "session-a/k1", 0)
	j := &fakeJob{opts: jobOptions{id: sessionPrefix("session-a") + "planted"}, query: countAuth}
	fb.jobs[j.opts.id] = j
	_, err = readResult{e}.Call(ctx, map[string]any{"handle": j.opts.id})
	requireRejection(t, err, "the query's job reports no statement type")
}

// The emulator's dry run reports SELECT for any statement, so locally
// checkSQL is the only classifier; this fails when that changes. NewClient
// marks its emulator clients, whose missing statement types are let
// through; any other client is held to the real service's rules.
func TestEmulatorReportsSelectForEveryStatement(t *testing.T) {
	f := newFixture(t, nil)
	e := f.tools["bigquery_query"].(runQuery).e
	require.True(t, e.backend.emulator())
	for _, q := range []string{
		"DELETE FROM security_logs.auth_events WHERE FALSE",
		"SELECT 1; DELETE FROM security_logs.auth_events WHERE FALSE",
	} {
		info, err := e.backend.dryRun(t.Context(), q)
		require.NoError(t, err, q)
		assert.Equal(t, "SELECT", info.statementType, "the emulator's dry run of %q", q)
	}
	assert.Equal(t, int64(30), f.rowCount(t, auth), "the dry runs deleted nothing")

	other, err := bigquery.NewClient(t.Context(), "demo-investigator", option.WithEndpoint("http://"+emulator(t)), option.WithoutAuthentication())
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	assert.False(t, newEnv(other, Config{}).backend.emulator(), "a client NewClient did not make is taken for the real service")
	err = newEnv(other, Config{}).checkRefs(queryRefs{}, false)
	requireRejection(t, err, "no statement type")
}

// A job's statistics are read anew over REST, which carries the routines
// and property graphs that the Go client's QueryStatistics drops.
func TestClientJobReadsReferencedRoutinesOverREST(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"jobReference":  map[string]any{"projectId": "demo-investigator", "jobId": "j1", "location": "EU"},
			"configuration": map[string]any{"query": map[string]any{"query": "SELECT 1"}},
			"status":        map[string]any{"state": "DONE"},
			"statistics": map[string]any{"query": map[string]any{
				"statementType":            "SELECT",
				"referencedTables":         []any{map[string]any{"projectId": "demo-investigator", "datasetId": "security_logs", "tableId": "auth_events"}},
				"referencedRoutines":       []any{map[string]any{"projectId": "other-proj", "datasetId": "fns", "routineId": "exfil"}},
				"referencedPropertyGraphs": []any{map[string]any{"projectId": "demo-investigator", "datasetId": "g", "propertyGraphId": "net"}},
			}},
		})
	}))
	t.Cleanup(srv.Close)
	client, err := NewClient(t.Context(), "demo-investigator", srv.Listener.Addr().String(), option.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	job, err := newEnv(client, Config{}).backend.findJob(t.Context(), "j1", "EU")
	require.NoError(t, err)
	refs, err := job.referenced(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "SELECT", refs.statementType)
	require.Len(t, refs.tables, 1)
	assert.Equal(t, "auth_events", refs.tables[0].TableID)
	assert.Equal(t, []string{"other-proj.fns.exfil"}, refs.routines)
	assert.Equal(t, []string{"demo-investigator.g.net"}, refs.graphs)
}
