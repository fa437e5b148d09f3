package bqtools

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"

	"github.com/secops-agent/investigator/tools"
)

// fakeResults is a minimal BigQuery REST server holding the results of one
// finished query job, which, unlike the emulator and like real BigQuery,
// honours getQueryResults' startIndex and maxResults. It checks the paging
// path that real BigQuery takes.
type fakeResults struct {
	project, location, jobID string
	rows                     int
	value                    func(i int) string // the STRING column of row i

	mu    sync.Mutex
	pages []string // "startIndex/maxResults" of each row read
}

func (f *fakeResults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/bigquery/v2")
	w.Header().Set("Content-Type", "application/json")
	ref := map[string]any{"projectId": f.project, "jobId": f.jobID, "location": f.location}
	if r.URL.Query().Get("location") != f.location {
		http.Error(w, `{"error":{"code":404,"message":"job not found in this location"}}`, http.StatusNotFound)
		return
	}
	switch path {
	case fmt.Sprintf("/projects/%s/jobs/%s", f.project, f.jobID): // jobs.get
		_ = json.NewEncoder(w).Encode(map[string]any{
			"jobReference":  ref,
			"configuration": map[string]any{"query": map[string]any{"query": "SELECT n, s FROM d.t"}},
			"status":        map[string]any{"state": "DONE"},
		})
	case fmt.Sprintf("/projects/%s/queries/%s", f.project, f.jobID): // jobs.getQueryResults
		start, _ := strconv.Atoi(r.URL.Query().Get("startIndex"))
		max, err := strconv.Atoi(r.URL.Query().Get("maxResults"))
		if err != nil {
			max = 100000
		}
		resp := map[string]any{
			"jobReference": ref,
			"jobComplete":  true,
			"totalRows":    strconv.Itoa(f.rows),
			"schema": map[string]any{"fields": []any{
				map[string]any{"name": "n", "type": "INTEGER"},
				map[string]any{"name": "s", "type": "STRING"},
			}},
		}
		if max > 0 {
			f.mu.Lock()
			f.pages = append(f.pages, fmt.Sprintf("%d/%d", start, max))
			f.mu.Unlock()
			var rows []any
			for i := start; i < f.rows && i < start+max; i++ {
				rows = append(rows, map[string]any{"f": []any{
					map[string]any{"v": strconv.Itoa(i + 1)},
					map[string]any{"v": f.value(i)},
				}})
			}
			resp["rows"] = rows
			if start+max < f.rows {
				resp["pageToken"] = "token-" + strconv.Itoa(start+max)
			}
		}
		_ = json.NewEncoder(w).Encode(resp)
	default:
		http.Error(w, `{"error":{"code":404,"message":"not found: `+path+`"}}`, http.StatusNotFound)
	}
}

func newFakeResultTool(t *testing.T, f *fakeResults) tools.Tool {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client, err := NewClient(t.Context(), f.project, srv.Listener.Addr().String(), option.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	ts := Tools(client, Config{Tables: []Table{{ID: "d.t"}}}, nil)
	require.Equal(t, "bigquery_result", ts[3].Declaration().Name)
	return ts[3]
}

func TestResultPagesOnTheServerWhenItHonoursStartIndex(t *testing.T) {
	f := &fakeResults{project: "p", location: "EU", jobID: sessionPrefix("s") + "job_1", rows: 30, value: func(i int) string { return "row" + strconv.Itoa(i+1) }}
	rt := newFakeResultTool(t, f)
	ctx := tools.WithCallInfo(t.Context(), tools.CallInfo{Session: "s"})

	res, err := rt.Call(ctx, map[string]any{"handle": "EU:" + f.jobID, "offset": 10, "limit": 5})
	require.NoError(t, err)
	page := res.(resultPage)
	assert.Equal(t, [][]any{{int64(11), "row11"}, {int64(12), "row12"}, {int64(13), "row13"}, {int64(14), "row14"}, {int64(15), "row15"}}, page.Rows)
	require.NotNil(t, page.NextOffset)
	assert.EqualValues(t, 15, *page.NextOffset)
	assert.EqualValues(t, 30, page.TotalRows)
	assert.Equal(t, []string{"10/5"}, f.pages, "one request for exactly the page")

	f.pages = nil
	res, err = rt.Call(ctx, map[string]any{"handle": "EU:" + f.jobID, "offset": 28, "limit": 50})
	require.NoError(t, err)
	page = res.(resultPage)
	assert.Equal(t, [][]any{{int64(29), "row29"}, {int64(30), "row30"}}, page.Rows)
	assert.Nil(t, page.NextOffset)
	assert.Equal(t, []string{"28/2"}, f.pages, "the page size is cut to the rows left")

	// The location in the handle reaches BigQuery.
	_, err = rt.Call(ctx, map[string]any{"handle": "US:" + f.jobID})
	requireRejection(t, err, "no query result for handle")
}

func TestResultPageStopsBeforeItGetsLarge(t *testing.T) {
	big := strings.Repeat("x", 900)
	f := &fakeResults{project: "p", location: "EU", jobID: sessionPrefix("s") + "job_2", rows: 500, value: func(int) string { return big }}
	rt := newFakeResultTool(t, f)
	ctx := tools.WithCallInfo(t.Context(), tools.CallInfo{Session: "s"})
	res, err := rt.Call(ctx, map[string]any{"handle": "EU:" + f.jobID, "offset": 0, "limit": 200})
	require.NoError(t, err)
	page := res.(resultPage)
	b, err := json.Marshal(page)
	require.NoError(t, err)
	assert.Less(t, len(b), maxRowsJSON+4<<10, "the page stays near maxRowsJSON")
	require.NotEmpty(t, page.Rows)
	assert.Less(t, len(page.Rows), 200)
	require.NotNil(t, page.NextOffset)
	assert.EqualValues(t, len(page.Rows), *page.NextOffset, "the next page starts right after the cut")
	assert.Contains(t, page.Note, "stops after")
}
