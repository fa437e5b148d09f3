package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/secops-agent/investigator/activities/bigquery/bqtools"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/investigation"
)

// evalDatabaseSuffix ends the ID of every Firestore database that
// --isolate may empty: the analyst's own database on the emulator (alerts,
// transcripts, memories saved under .data/) is never one.
const evalDatabaseSuffix = "-eval"

// evalStore puts what each case needs where the worker reads it: the
// case's alerts in Firestore and its log rows in the BigQuery emulator;
// with isolation it first empties the eval's Firestore database.
type evalStore struct {
	alerts *alerts.Store
	// clearURL is the emulator's endpoint that deletes every document of
	// the database; empty when cases share the store.
	clearURL string
	http     *http.Client
	// bq reaches the BigQuery emulator, when a case adds rows; tables are
	// the configured ones.
	bq     *bigquery.Client
	tables []string
	// call bounds one Firestore call with the starter's call timeout.
	call func(ctx context.Context, f func(context.Context) error) error
}

// firestoreTarget says which database the eval would empty.
type firestoreTarget struct {
	emulator, project, database string
}

// evalSetupHint is what every refusal about the eval's database recommends:
// the eval's own worker and database, never the unsafe --isolate=false.
const evalSetupHint = "run the eval with go tool task eval, which starts the eval's own worker (task queue investigations-eval, Firestore database investigator-eval of the emulator), " +
	"or start such a worker yourself and pass the eval its --task-queue and --firestore-database investigator-eval"

// isEvalDatabase says a database ID names an eval's database: the
// analyst's own, (default) and production's never do.
func isEvalDatabase(id string) bool {
	return strings.HasSuffix(id, evalDatabaseSuffix) && id != evalDatabaseSuffix
}

// checkIsolation refuses to empty anything but a database of the
// Firestore emulator whose ID ends in -eval, and returns the endpoint that
// empties it.
func checkIsolation(t firestoreTarget) (string, error) {
	if t.emulator == "" {
		return "", errors.New("--isolate empties the eval's Firestore database before each case, which it does only on the Firestore emulator: set FIRESTORE_EMULATOR_HOST, or " + evalSetupHint)
	}
	if !isEvalDatabase(t.database) {
		return "", fmt.Errorf("--isolate empties Firestore database %q before each case, and it empties only a database whose ID ends in %q, "+
			"so that an analyst's alerts and memories are never wiped: %s", t.database, evalDatabaseSuffix, evalSetupHint)
	}
	return "http://" + t.emulator + "/emulator/v1/projects/" + url.PathEscape(t.project) + "/databases/" + url.PathEscape(t.database) + "/documents", nil
}

// checkStarterStore refuses, before anything is stored, a database the
// eval must not write into: with --isolate one it would not empty, without
// it (unless --allow-any-database) one whose ID does not end in -eval,
// where made-up alerts and history would mix with an analyst's or
// production's.
func checkStarterStore(o evalOptions) error {
	if o.isolate {
		_, err := checkIsolation(o.store)
		return err
	}
	if o.anyDatabase || isEvalDatabase(o.store.database) {
		return nil
	}
	return fmt.Errorf("--isolate=false writes the cases' alerts and made-up history into Firestore database %q, and the eval writes only into a database whose ID ends in %q, "+
		"so that no analyst's or production data is mixed with made-up alerts: %s", o.store.database, evalDatabaseSuffix, evalSetupHint)
}

// checkWorkerStore refuses a worker that does not prove it keeps its data
// in the starter's (the eval's) database: the starter's flags say nothing
// of the worker on the task queue, which may be the analyst's, whose
// memories the cases would read and the BigQuery sub-agent's votes change.
// With --allow-any-database the caller has taken that on.
func checkWorkerStore(w *investigation.StoreEndpoint, o evalOptions) error {
	if o.anyDatabase {
		return nil
	}
	if w == nil {
		return fmt.Errorf("the worker on task queue %q does not say which Firestore database it uses (it is older than this starter), so the eval cannot tell it keeps its data in the eval's: "+
			"rebuild it (go tool task build) and %s", o.taskQueue, evalSetupHint)
	}
	where := fmt.Sprintf(" of project %q", o.store.project)
	if o.isolate {
		where += " on the Firestore emulator"
	}
	if w.Database != o.store.database || w.Project != o.store.project || o.isolate && !w.Emulator {
		emu := ""
		if !w.Emulator {
			emu = " (not on the emulator)"
		}
		return fmt.Errorf("the worker on task queue %q keeps its data in Firestore database %q of project %q%s, not in the eval's database %q%s, "+
			"so the cases would read and change that database's alerts and memories: %s", o.taskQueue, w.Database, w.Project, emu, o.store.database, where, evalSetupHint)
	}
	return nil
}

// reset deletes every document of the eval's database: alerts, memories
// and transcripts of earlier cases.
func (s *evalStore) reset(ctx context.Context) error {
	if s.clearURL == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.clearURL, nil)
	if err != nil {
		return fmt.Errorf("could not empty the eval's Firestore database: %v", err)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("could not empty the eval's Firestore database: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("could not empty the eval's Firestore database: the emulator answered %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// load stores the cases' alerts and adds their log rows; the function it
// returns removes the rows again (with a context of its own, so that an
// interrupted eval still cleans up).
func (s *evalStore) load(ctx context.Context, cases []evalCase) (func(), error) {
	for _, c := range cases {
		for _, al := range append(slices.Clone(c.History), c.Alert) {
			if err := s.call(ctx, func(ctx context.Context) error { return s.alerts.Put(ctx, al) }); err != nil {
				return func() {}, fmt.Errorf("could not store alert %s: %v", al.ID, err)
			}
		}
	}
	var added []tableRows
	undo := func() {
		if len(added) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.deleteRows(ctx, added) // the emulator drops them at its next start anyway
	}
	for _, c := range cases {
		for _, tr := range c.Rows {
			if s.bq == nil {
				return undo, fmt.Errorf("case %s adds BigQuery rows, which the eval writes only to the BigQuery emulator: set BIGQUERY_EMULATOR_HOST and BIGQUERY_TABLES_CONFIG (go tool task eval does)", c.Name)
			}
			if !slices.Contains(s.tables, tr.Table) {
				return undo, fmt.Errorf("case %s adds rows to %s, which the tables config does not list (it lists %s)", c.Name, tr.Table, strings.Join(s.tables, ", "))
			}
			// Rows an interrupted eval left behind go first.
			if err := s.deleteRows(ctx, []tableRows{tr}); err != nil {
				return undo, fmt.Errorf("case %s: %v", c.Name, err)
			}
			added = append(added, tr)
			if err := s.insertRows(ctx, tr); err != nil {
				return undo, fmt.Errorf("case %s: %v", c.Name, err)
			}
		}
	}
	return undo, nil
}

// caseRow is one row to insert, as given.
type caseRow map[string]any

func (r caseRow) Save() (map[string]bigquery.Value, string, error) {
	return uploadRow(r), "", nil
}

// uploadRow gives nested records the type the client uploads as records.
func uploadRow(r map[string]any) map[string]bigquery.Value {
	out := make(map[string]bigquery.Value, len(r))
	for k, v := range r {
		if sub, ok := v.(map[string]any); ok {
			out[k] = uploadRow(sub)
			continue
		}
		out[k] = v
	}
	return out
}

func (s *evalStore) table(name string) *bigquery.Table {
	ds, t, _ := strings.Cut(name, ".")
	return s.bq.Dataset(ds).Table(t)
}

func (s *evalStore) insertRows(ctx context.Context, tr tableRows) error {
	rows := make([]caseRow, len(tr.Rows))
	for i, r := range tr.Rows {
		rows[i] = r
	}
	if err := s.table(tr.Table).Inserter().Put(ctx, rows); err != nil {
		return fmt.Errorf("could not add rows to %s: %v", tr.Table, oneLine(err))
	}
	return nil
}

// deleteRows deletes, from each table, the rows equal to the case's rows
// in every scalar column they give.
func (s *evalStore) deleteRows(ctx context.Context, trs []tableRows) error {
	var errs []error
	for _, tr := range trs {
		md, err := s.table(tr.Table).Metadata(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("could not read the schema of %s: %v", tr.Table, oneLine(err)))
			continue
		}
		for i, r := range tr.Rows {
			where, params, err := rowCondition(md.Schema, r)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s row %d: %v", tr.Table, i+1, err))
				continue
			}
			q := s.bq.Query("DELETE FROM `" + tr.Table + "` WHERE " + where)
			q.Parameters = params
			job, err := q.Run(ctx)
			if err == nil {
				var st *bigquery.JobStatus
				if st, err = job.Wait(ctx); err == nil {
					err = st.Err()
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("could not remove %s row %d: %v", tr.Table, i+1, oneLine(err)))
			}
		}
	}
	return errors.Join(errs...)
}

// rowCondition is the WHERE clause that matches row: every scalar value it
// gives, in its column's type (a nested record's fields by their paths).
func rowCondition(schema bigquery.Schema, row map[string]any) (string, []bigquery.QueryParameter, error) {
	var conds []string
	var params []bigquery.QueryParameter
	var walk func(schema bigquery.Schema, row map[string]any, path string) error
	walk = func(schema bigquery.Schema, row map[string]any, path string) error {
		for _, k := range slices.Sorted(maps.Keys(row)) {
			i := slices.IndexFunc(schema, func(f *bigquery.FieldSchema) bool { return strings.EqualFold(f.Name, k) })
			if i < 0 {
				var names []string
				for _, f := range schema {
					names = append(names, f.Name)
				}
				return fmt.Errorf("no column %q (the columns are %s)", path+k, strings.Join(names, ", "))
			}
			f, v := schema[i], row[k]
			col := path + "`" + f.Name + "`"
			switch {
			case f.Repeated:
				continue // arrays cannot be compared with =; the other columns decide
			case v == nil:
				conds = append(conds, col+" IS NULL")
			case f.Type == bigquery.RecordFieldType || strings.EqualFold(string(f.Type), "STRUCT"):
				sub, ok := v.(map[string]any)
				if !ok {
					return fmt.Errorf("column %s is a record: give it as a mapping", path+f.Name)
				}
				if err := walk(f.Schema, sub, col+"."); err != nil {
					return err
				}
			default:
				p, err := paramValue(f.Type, v)
				if err != nil {
					return fmt.Errorf("column %s: %v", path+f.Name, err)
				}
				name := fmt.Sprintf("p%d", len(params))
				params = append(params, bigquery.QueryParameter{Name: name, Value: p})
				conds = append(conds, col+" = @"+name)
			}
		}
		return nil
	}
	if err := walk(schema, row, ""); err != nil {
		return "", nil, err
	}
	if len(conds) == 0 {
		return "", nil, errors.New("the row gives no column that can be compared")
	}
	return strings.Join(conds, " AND "), params, nil
}

// paramValue converts a YAML value to a query parameter of a column type
// (the emulator and the service spell some types differently).
func paramValue(t bigquery.FieldType, v any) (any, error) {
	typ := strings.ToUpper(string(t))
	switch typ {
	case "TIMESTAMP":
		switch v := v.(type) {
		case time.Time:
			return v, nil
		case string:
			ts, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return nil, fmt.Errorf("%q is not a timestamp like 2026-11-20T08:14:52Z", v)
			}
			return ts, nil
		}
	case "INTEGER", "INT64":
		switch v := v.(type) {
		case int:
			return int64(v), nil
		case int64:
			return v, nil
		}
	case "FLOAT", "FLOAT64":
		switch v := v.(type) {
		case float64:
			return v, nil
		case int:
			return float64(v), nil
		}
	case "BOOLEAN", "BOOL":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "STRING":
		if s, ok := v.(string); ok {
			return s, nil
		}
	default:
		return nil, fmt.Errorf("type %s is not supported in case rows", typ)
	}
	return nil, fmt.Errorf("%v (%T) is not a %s", v, v, typ)
}

// oneLine keeps an error to its first line.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// caseBigQuery opens the BigQuery emulator for the cases' rows, or returns
// nil when no case adds any. Rows go only to the emulator and only to the
// tables the worker's tables config lists.
func caseBigQuery(ctx context.Context, cases []evalCase, tablesConfig, emulator string) (*bigquery.Client, []string, error) {
	if !slices.ContainsFunc(cases, func(c evalCase) bool { return len(c.Rows) > 0 }) {
		return nil, nil, nil
	}
	if emulator == "" || tablesConfig == "" {
		return nil, nil, errors.New("some cases add BigQuery rows, which the eval writes only to the BigQuery emulator: " +
			"set BIGQUERY_EMULATOR_HOST and BIGQUERY_TABLES_CONFIG (go tool task eval does)")
	}
	cfg, err := bqtools.LoadConfig(tablesConfig)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Project == "" {
		cfg.Project = config.EmulatorProject
	}
	c, err := bqtools.NewClient(ctx, cfg.Project, emulator)
	if err != nil {
		return nil, nil, err
	}
	var tables []string
	for _, t := range cfg.Tables {
		tables = append(tables, t.ID)
	}
	return c, tables, nil
}
