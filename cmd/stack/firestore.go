package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The Firestore emulator keeps its data in memory. The stack saves it under
// .data/firestore when it stops the emulator (and after each investigate)
// and loads the newest save when it starts it, so that alerts, transcripts
// and memories stay in step with Temporal's history in .data/temporal.db.
//
// A save is the emulator's export (its REST export endpoint, for the
// stack's project and database) written into a temporary directory and
// renamed to save-N, N one more than the newest: the newest complete save is
// the one loaded, a half-written one is never named save-N, and older saves
// are removed only once a newer one is in place.

// latestSave is the newest complete save and its number.
func (s *Stack) latestSave() (string, int, bool) {
	entries, err := os.ReadDir(s.SaveDir())
	if err != nil {
		return "", 0, false
	}
	best, bestN := "", -1
	for _, e := range entries {
		if n, ok := saveNumber(e.Name()); ok && e.IsDir() && n > bestN {
			best, bestN = filepath.Join(s.SaveDir(), e.Name()), n
		}
	}
	return best, bestN, bestN >= 0
}

func saveNumber(name string) (int, bool) {
	raw, ok := strings.CutPrefix(name, "save-")
	if !ok || raw == "" || strings.Trim(raw, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(raw)
	return n, err == nil
}

// exportMetadata is the file the emulator's --import-data wants: the
// export's overall metadata.
func exportMetadata(dir string) (string, bool) {
	m, _ := filepath.Glob(filepath.Join(dir, "*", "*.overall_export_metadata"))
	for _, f := range m {
		if isFile(f) {
			return f, true
		}
	}
	return "", false
}

// saveFirestore saves the emulator's data; on failure the previous save
// stays as it was (a warning says so, quiet or not).
func (s *Stack) saveFirestore(quiet bool) error {
	began := time.Now()
	project, database := s.Project, orDefault(getenv("FIRESTORE_DATABASE"), "(default)")
	// What the emulator was started for, whatever this invocation's
	// environment says.
	if t := strings.Split(s.readRecord("firestore", "target"), "\n"); len(t) == 2 {
		project, database = t[0], t[1]
	}
	ctx := context.Background()
	if err := firestoreReady.Check(ctx, s, "firestore"); err != nil {
		s.log.warn("the Firestore emulator on %s does not answer: its data was not saved (the previous save, if any, is kept)", s.addr("FIRESTORE"))
		return err
	}
	if err := s.mkdirPrivate(s.SaveDir()); err != nil {
		return err
	}
	removeStaleTemps(s.SaveDir())
	tmp, err := os.MkdirTemp(s.SaveDir(), fmt.Sprintf(".tmp-%d-", os.Getpid()))
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{
		"database":         "projects/" + project + "/databases/" + database,
		"export_directory": tmp,
	})
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost,
		"http://"+s.addr("FIRESTORE")+"/emulator/v1/projects/"+project+":export", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	status, answer := "no answer", ""
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		status, answer = resp.Status, strings.Join(strings.Fields(string(b)), " ")
	} else {
		answer = err.Error()
	}
	if _, found := exportMetadata(tmp); err != nil || resp.StatusCode != http.StatusOK || !found {
		os.RemoveAll(tmp)
		s.log.warn("the Firestore emulator did not save its data (%s: %s); the previous save, if any, is kept", status, answer)
		return fmt.Errorf("not saved")
	}
	_, n, ok := s.latestSave()
	if !ok {
		n = 0
	}
	target := ""
	for n++; ; n++ {
		target = filepath.Join(s.SaveDir(), "save-"+strconv.Itoa(n))
		if _, err := os.Lstat(target); os.IsNotExist(err) {
			break
		}
	}
	if err := os.Rename(tmp, target); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	entries, _ := os.ReadDir(s.SaveDir())
	for _, e := range entries {
		if m, ok := saveNumber(e.Name()); ok && m < n {
			os.RemoveAll(filepath.Join(s.SaveDir(), e.Name()))
		}
	}
	if !quiet {
		s.log.info("Firestore emulator: data of %s saved to %s in %.1fs", project, s.show(target), time.Since(began).Seconds())
	}
	return nil
}

// removeStaleTemps removes what saves killed midway left: .tmp-<pid>-*
// whose process is gone.
func removeStaleTemps(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), ".tmp-")
		if !ok {
			continue
		}
		owner, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(owner)
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) != nil {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}
