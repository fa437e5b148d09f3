package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// exportServer answers the emulator's export endpoint by writing what an
// export writes; fail makes it refuse.
func exportServer(t *testing.T, s *Stack, fail *bool) *[]string {
	t.Helper()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Write([]byte("Ok"))
			return
		}
		var body struct {
			Database  string `json:"database"`
			Directory string `json:"export_directory"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		got = append(got, r.URL.Path+" "+body.Database)
		if *fail {
			http.Error(w, "export failed", http.StatusInternalServerError)
			return
		}
		dir := filepath.Join(body.Directory, "firestore_export")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "firestore_export.overall_export_metadata"), []byte("m"), 0o644))
		w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	portOf(t, s, "FIRESTORE", srv.Listener.Addr().String())
	return &got
}

// TestSaveFirestore: each save is renamed into place as save-N+1 and only
// then are older ones removed; a failed export keeps the last good save;
// the save exports the project the emulator was started for; what a
// killed save left is removed.
func TestSaveFirestore(t *testing.T) {
	s, out := testStack(t)
	fail := false
	got := exportServer(t, s, &fail)
	require.NoError(t, s.writeRecord("firestore", "target", "started-project\n(default)"))
	dead := filepath.Join(s.SaveDir(), ".tmp-999999999-abc")
	require.NoError(t, os.MkdirAll(dead, 0o755))

	require.NoError(t, s.saveFirestore(false))
	require.Equal(t, []string{"/emulator/v1/projects/started-project:export projects/started-project/databases/(default)"}, *got)
	latest, n, ok := s.latestSave()
	require.True(t, ok)
	require.Equal(t, 1, n)
	_, ok = exportMetadata(latest)
	require.True(t, ok)
	require.NoDirExists(t, dead, "a killed save's directory is removed")
	require.Contains(t, out.String(), "data of started-project saved to")

	require.NoError(t, s.saveFirestore(true))
	latest, n, _ = s.latestSave()
	require.Equal(t, 2, n)
	require.NoDirExists(t, filepath.Join(s.SaveDir(), "save-1"))

	fail = true
	require.Error(t, s.saveFirestore(false))
	require.Contains(t, out.String(), "did not save its data (500 Internal Server Error: export failed)")
	again, n, _ := s.latestSave()
	require.Equal(t, 2, n)
	require.Equal(t, latest, again)
	entries, _ := os.ReadDir(s.SaveDir())
	require.Len(t, entries, 1, "nothing half-written is left")
}

func TestLatestSave(t *testing.T) {
	s, _ := testStack(t)
	_, _, ok := s.latestSave()
	require.False(t, ok)
	for _, d := range []string{"save-2", "save-10", "save-9", "save-x", ".tmp-1-a", "save-"} {
		require.NoError(t, os.MkdirAll(filepath.Join(s.SaveDir(), d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(s.SaveDir(), "save-11"), nil, 0o644))
	latest, n, ok := s.latestSave()
	require.True(t, ok)
	require.Equal(t, 10, n, "numbers, not names, and only directories")
	require.Equal(t, filepath.Join(s.SaveDir(), "save-"+strconv.Itoa(n)), latest)
}
