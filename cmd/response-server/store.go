package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

const (
	blockedFile  = "blocked-ips.txt"
	disabledFile = "disabled-users.txt"
	lockName     = ".lock"

	// maxEntries bounds each list, and so the files and every read of them.
	maxEntries   = 10000
	maxFileBytes = 8 << 20
)

// entry is one line of a list file: SUBJECT<TAB>TIMESTAMP<TAB>REASON.
// The subject and reason are validated to hold no tab or newline.
type entry struct {
	Subject string
	At      string // RFC 3339, UTC
	Reason  string
}

// store keeps the two action lists as text files in one directory. Each
// change rewrites its file to a temporary one and renames it into place,
// under an in-process mutex and a lock file, so that a reader never sees a
// half-written list and two writers never lose an entry.
type store struct {
	dir string
	mu  sync.Mutex
	now func() time.Time
}

func newStore(dir string) (*store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create the state directory: %w", err)
	}
	return &store{dir: dir, now: time.Now}, nil
}

// errFull is returned when a list has reached maxEntries.
var errFull = fmt.Errorf("the list already holds %d entries; clear it before adding more", maxEntries)

// add appends subject unless it is already listed; it returns the entry
// that is in the list afterwards and whether it was added now.
func (s *store) add(file, subject, reason string) (entry, bool, error) {
	unlock, err := s.lock()
	if err != nil {
		return entry{}, false, err
	}
	defer unlock()
	path := filepath.Join(s.dir, file)
	data, err := readCapped(path)
	if err != nil {
		return entry{}, false, err
	}
	entries := parseEntries(data)
	for _, e := range entries {
		if e.Subject == subject {
			return e, false, nil
		}
	}
	if len(entries) >= maxEntries {
		return entry{}, false, errFull
	}
	e := entry{Subject: subject, At: s.now().UTC().Format(time.RFC3339), Reason: reason}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	data = append(data, e.Subject+"\t"+e.At+"\t"+e.Reason+"\n"...)
	if err := writeAtomic(path, data); err != nil {
		return entry{}, false, err
	}
	return e, true, nil
}

// list returns the entries of one file, oldest first.
func (s *store) list(file string) ([]entry, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	data, err := readCapped(filepath.Join(s.dir, file))
	if err != nil {
		return nil, err
	}
	return parseEntries(data), nil
}

func (s *store) lock() (func(), error) {
	s.mu.Lock()
	f, err := os.OpenFile(filepath.Join(s.dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		s.mu.Unlock()
		return nil, errors.New("cannot open the state directory's lock file")
	}
	if err := lockFile(f); err != nil {
		f.Close()
		s.mu.Unlock()
		return nil, errors.New("cannot lock the state directory")
	}
	return func() {
		_ = unlockFile(f)
		f.Close()
		s.mu.Unlock()
	}, nil
}

// readCapped reads a list file; a missing file is an empty list.
func readCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s", filepath.Base(path))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s", filepath.Base(path))
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes; clear it", filepath.Base(path), maxFileBytes)
	}
	return data, nil
}

// parseEntries skips lines that are not entries (blank lines, comments
// someone added by hand), so that a hand-edited file still works.
func parseEntries(data []byte) []entry {
	var out []entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxFileBytes)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		subject, rest, ok := strings.Cut(line, "\t")
		if !ok || subject == "" {
			continue
		}
		at, reason, _ := strings.Cut(rest, "\t")
		out = append(out, entry{Subject: subject, At: at, Reason: reason})
	}
	return out
}

func writeAtomic(path string, data []byte) error {
	name := filepath.Base(path)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+name+".*")
	if err != nil {
		return fmt.Errorf("cannot write %s", name)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot write %s", name)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot write %s", name)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write %s", name)
	}
	if err := os.Chmod(tmp.Name(), 0o640); err != nil {
		return fmt.Errorf("cannot write %s", name)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cannot write %s", name)
	}
	return nil
}
