// Package alerts holds the security alert model: reading and validating alert
// files, recognising their source (GuardDuty, Security Command Center, EDR or
// generic), describing them for a prompt, listing their indicators, and
// storing them in Firestore.
//
// Alert JSON is decoded exactly (see DecodeJSON and Number): an integer that
// fits int64 stays an int64, another number becomes a float64 only when the
// float is exactly the written value, and a number that neither holds (such
// as a 30-digit identifier) is kept as its literal text, a string, because
// Firestore has no exact type for it and a rounded identifier would be a
// different one. An alert with the same key twice in one object is refused.
package alerts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/smallfile"
)

// MaxBytes is the size of the largest accepted alert file (1 MiB).
const MaxBytes = 1 << 20

// Firestore limits that an alert's data must respect to be stored.
const (
	maxDepth        = 20      // nested maps/arrays, counting the alert object itself
	maxKeyBytes     = 1500    // bytes in one field name
	maxStoredBytes  = 1000000 // estimated Firestore size of the data; leaves room below 1 MiB for the other fields
	maxSummaryBytes = 600     // bytes kept in Type and Title (about 200 characters)
	// maxDocBytes bounds the estimated size of the whole stored document
	// (storedSize): the data, its indicator keys and the other fields.
	// Firestore refuses a document over 1 MiB (1,048,576 bytes); the
	// margin covers what the estimate might miss.
	maxDocBytes = 1<<20 - 4096
	// maxIndexEntries is Firestore's bound on a document's index entries,
	// which the emulator does not enforce.
	maxIndexEntries = 40000
)

// ErrNotFound is wrapped by Store.Get when no alert has the requested ID.
var ErrNotFound = errors.New("alert not found")

// Alert is one security alert: its original JSON object plus the fields
// normalised from it.
type Alert struct {
	ID         string         `firestore:"id" json:"id"`
	Source     string         `firestore:"source" json:"source"`           // "guardduty", "scc", "edr", or "generic"
	Type       string         `firestore:"type" json:"type"`               // finding type / category
	Severity   string         `firestore:"severity" json:"severity"`       // normalised: low|medium|high|critical|unknown
	Title      string         `firestore:"title" json:"title"`             // short human-readable title
	ObservedAt time.Time      `firestore:"observed_at" json:"observed_at"` // from the alert when present, else zero
	ImportedAt time.Time      `firestore:"imported_at" json:"imported_at"` // set by Store.Put if zero
	Data       map[string]any `firestore:"data" json:"data"`               // the alert JSON object as given, numbers decoded exactly (see Number)
	// Indicators are the keys of the data's indicators (IndexKeys), which
	// search_alerts finds it by whatever its source and layout. Store.Put
	// writes them; Parse leaves them empty.
	Indicators []string `firestore:"indicators" json:"indicators,omitempty"`
}

// Sources of alerts.
const (
	SourceGuardDuty = "guardduty"
	SourceSCC       = "scc"
	SourceEDR       = "edr"
	SourceGeneric   = "generic"
)

// Normalised severities.
const (
	SeverityLow      = "low"
	SeverityMedium   = "medium"
	SeverityHigh     = "high"
	SeverityCritical = "critical"
	SeverityUnknown  = "unknown"
)

// Read returns the bytes of the alert file at path, or of stdin when path is
// "-". It never reads more than MaxBytes+1 bytes. It refuses anything but a
// regular file (a named pipe, a device, a socket) before opening it: opening
// a named pipe blocks until a writer comes, and a device may never end.
// Reading stdin ends when ctx is cancelled (Ctrl-C, SIGTERM).
func Read(ctx context.Context, path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return readStdin(ctx, stdin)
	}
	if path == "" {
		return nil, errors.New("no alert file was given")
	}
	data, err := smallfile.Read(path, MaxBytes)
	var nr *smallfile.NotRegularError
	switch {
	case errors.Is(err, smallfile.ErrTooLarge):
		return nil, fmt.Errorf("alert file %q is larger than the 1 MiB limit", path)
	case errors.As(err, &nr) && nr.Mode&fs.ModeNamedPipe != 0:
		return nil, fmt.Errorf("cannot read alert file %q: %w (give - to read standard input)", path, err)
	case err != nil:
		return nil, fmt.Errorf("cannot read alert file %q: %w", path, err)
	}
	return data, nil
}

// readStdin reads the alert from stdin until EOF or ctx ends. The read runs
// in a goroutine that cannot be interrupted: after a cancellation it stays
// blocked until stdin closes, which is acceptable in a CLI that is about to
// exit.
func readStdin(ctx context.Context, stdin io.Reader) ([]byte, error) {
	if stdin == nil {
		return nil, errors.New("cannot read the alert from standard input: no input is connected")
	}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := io.ReadAll(io.LimitReader(stdin, MaxBytes+1))
		done <- result{data, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		return nil, errors.New("interrupted while reading the alert from standard input")
	}
	if r.err != nil {
		return nil, fmt.Errorf("cannot read the alert from standard input: %w", r.err)
	}
	if len(r.data) > MaxBytes {
		return nil, errors.New("the alert on standard input is larger than the 1 MiB limit")
	}
	return r.data, nil
}

// Parse validates an alert's JSON and normalises it. The alert must be one
// JSON object of at most MaxBytes that Firestore can store. The ID is
// content-addressed: "<source>-" plus the first 12 hex digits of the SHA-256
// of the compact, key-sorted JSON, so the same alert always gets the same ID.
func Parse(raw []byte) (Alert, error) { return ParseWeighed(raw, nil) }

// ParseWeighed is Parse that calls weigh, when set, with the estimated
// bytes of the alert's decoded tree just before it is built (and not for an
// alert refused earlier), so a caller can bound the decoded bytes it holds
// at once from the one estimate Parse makes; weigh's error is returned as
// it is, and nothing is decoded.
func ParseWeighed(raw []byte, weigh func(decoded int) error) (Alert, error) {
	if len(raw) > MaxBytes {
		return Alert{}, errors.New("the alert is larger than the 1 MiB limit")
	}
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
	if len(bytes.TrimSpace(raw)) == 0 {
		return Alert{}, errors.New("the alert is empty")
	}
	// Nesting is counted first, in one pass that allocates nothing, so that
	// a deep document costs no work per level (and is not called invalid
	// JSON beyond encoding/json's own depth limit); the decoder stops at the
	// first level too many and names its path.
	var syntaxErr *json.SyntaxError
	if tooDeep(raw, maxDepth) {
		if _, err := DecodeJSON(raw); err != nil && !errors.As(err, &syntaxErr) {
			return Alert{}, err
		}
	}
	// The syntax check comes next (first, for a document broken before it
	// is too deep), for errors with a line and column; the exact decoder
	// then keeps every digit and refuses duplicate keys.
	var valid json.RawMessage
	if err := json.Unmarshal(raw, &valid); err != nil {
		return Alert{}, fmt.Errorf("the alert is not valid JSON: %s", jsonErrorDetail(raw, err))
	}
	if kind := jsonKind(valid); kind != "an object" {
		return Alert{}, fmt.Errorf("the alert must be a JSON object, got %s", kind)
	}
	// The decoded tree is what an alert costs while it is stored and
	// investigated: one finely divided into tiny values is refused before it
	// is built, whatever its size in bytes.
	size, values := decodedBytes(valid)
	if size > maxDecodedBytes {
		return Alert{}, fmt.Errorf("the alert is too finely divided to take: its %d keys and values would take about %d MiB of memory once decoded, more than the %d MiB an alert may", values, (size+1<<20-1)>>20, maxDecodedBytes>>20)
	}
	if weigh != nil {
		if err := weigh(size); err != nil {
			return Alert{}, err
		}
	}
	v, err := DecodeJSON(valid)
	if err != nil {
		return Alert{}, err
	}
	obj := v.(map[string]any)
	if len(obj) == 0 {
		return Alert{}, errors.New("the alert is an empty JSON object")
	}
	dataSize, entries, err := checkStorable(obj)
	if err != nil {
		return Alert{}, err
	}

	a := recognise(obj)
	a.Data = obj
	a.Type = clip.String(strings.TrimSpace(a.Type), maxSummaryBytes)
	a.Title = clip.String(strings.TrimSpace(a.Title), maxSummaryBytes)
	if a.Title == "" {
		a.Title = a.Type
	}
	if a.Severity == "" {
		a.Severity = SeverityUnknown
	}
	a.ID, _, err = contentID(a.Source, obj)
	if err != nil {
		return Alert{}, fmt.Errorf("the alert cannot be encoded: %w", err)
	}
	// The document Create and Put write holds more than the data: its
	// indicator keys (up to MaxKeys of up to MaxIndicatorBytes) and the
	// normalised fields. An alert that passes here is one Firestore takes.
	keys := IndexKeys(Indicators(obj))
	if n := entries + len(keys) + 2*storedFields; n > maxIndexEntries {
		return Alert{}, fmt.Errorf("the alert has too many fields and array values to store: Firestore would index about %d entries for it, more than its limit of %d", n, maxIndexEntries)
	}
	if size := storedSize(a, dataSize, keys); size > maxDocBytes {
		return Alert{}, fmt.Errorf("the alert is too large to store: with its %d indicator keys it needs about %d bytes in Firestore, more than the 1 MiB document limit allows", len(keys), size)
	}
	return a, nil
}

// storedFields is how many fields a stored alert document has besides
// the data's own (the Alert fields and the content hash).
const storedFields = 10

// storedSize estimates the Firestore size of the document Create or Put
// writes for a, whose data's size is dataSize, with these indicator keys,
// by Firestore's rules
// (https://firebase.google.com/docs/firestore/storage-size): a string is
// its bytes plus 1, a number or timestamp 8, a field its name's size plus
// its value's, a document its name's size plus its fields' plus 32.
func storedSize(a Alert, dataSize int, keys []string) int {
	str := func(s string) int { return len(s) + 1 }
	name := str(collection) + str(a.ID) + 16
	size := name + 32
	size += str("id") + str(a.ID)
	size += str("source") + str(a.Source)
	size += str("type") + str(a.Type)
	size += str("severity") + str(a.Severity)
	size += str("title") + str(a.Title)
	size += str("observed_at") + 8 + str("imported_at") + 8
	size += str(hashField) + str(strings.Repeat("0", 2*sha256.Size))
	size += str("data") + dataSize
	size += str("indicators")
	for _, k := range keys {
		size += str(k)
	}
	return size
}

// contentID is the ID Parse gives an alert of source with this data, and
// the data's canonical JSON it hashes.
func contentID(source string, data map[string]any) (string, []byte, error) {
	canonical, err := json.Marshal(data) // compact, map keys sorted; an int64 prints as the float64 of old did
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(canonical)
	return source + "-" + hex.EncodeToString(sum[:])[:12], canonical, nil
}

// jsonErrorDetail describes a decoding error with its line and column.
func jsonErrorDetail(raw []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(raw, se.Offset)
		return fmt.Sprintf("%s (line %d, column %d)", se.Error(), line, col)
	}
	return err.Error()
}

// lineCol converts a byte offset into 1-based line and column numbers. The
// offset of a json.SyntaxError is just past the offending byte.
func lineCol(raw []byte, offset int64) (line, col int) {
	if offset > int64(len(raw)) {
		offset = int64(len(raw))
	}
	if offset > 0 {
		offset-- // point at the offending byte itself
	}
	before := raw[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	lastNL := bytes.LastIndexByte(before, '\n')
	col = utf8.RuneCount(before[lastNL+1:]) + 1
	return line, col
}

// jsonKind names the kind of a valid JSON text from its first byte, with an
// article.
func jsonKind(valid []byte) string {
	switch t := bytes.TrimSpace(valid); {
	case len(t) == 0:
		return "nothing"
	case t[0] == '{':
		return "an object"
	case t[0] == '[':
		return "an array"
	case t[0] == '"':
		return "a string"
	case t[0] == 't' || t[0] == 'f':
		return "a boolean"
	case t[0] == 'n':
		return "null"
	}
	return "a number"
}

// checkStorable rejects data that Firestore would refuse: empty, reserved or
// over-long field names, arrays directly inside arrays, too deep nesting,
// data over the size limit and too many index entries. It walks keys in
// sorted order so that the first problem reported is always the same one.
// It returns the data's estimated size and index entries (see indexCounter).
func checkStorable(obj map[string]any) (size, entries int, err error) {
	var path jsonPath
	idx := &indexCounter{}
	size, err = storableSize(obj, &path, idx)
	if err != nil {
		return 0, 0, err
	}
	if size > maxStoredBytes {
		return 0, 0, fmt.Errorf("the alert is too large to store: it needs about %d bytes in Firestore, more than the 1 MiB document limit allows", size)
	}
	return size, idx.n, nil
}

// indexCounter counts, generously, the index entries Firestore makes for
// the data: two (ascending, descending) for every field outside an array
// (a map's too), and one for every distinct value in an array. It stops
// counting once over the limit, so that its set of values stays small.
type indexCounter struct{ n int }

func (c *indexCounter) field() { c.n += 2 }

func (c *indexCounter) array(x []any) {
	seen := map[any]bool{}
	for _, e := range x {
		if c.n > maxIndexEntries {
			return
		}
		switch e.(type) {
		case string, int64, float64, bool, nil:
			if seen[e] {
				continue
			}
			seen[e] = true
		}
		c.n++
	}
}

// storableSize checks v, found at path (whose length is v's nesting depth
// less one), counts its index entries in idx (unless nil; nil inside an
// array, whose elements' fields are not indexed) and returns its estimated
// Firestore storage size.
func storableSize(v any, path *jsonPath, idx *indexCounter) (int, error) {
	switch x := v.(type) {
	case map[string]any:
		if path.depth() >= maxDepth {
			return 0, depthError(path)
		}
		size := 0
		for _, k := range sortedKeys(x) {
			switch {
			case k == "":
				return 0, fmt.Errorf("the alert has an empty field name %s, which Firestore cannot store", path.under())
			case len(k) > maxKeyBytes:
				return 0, fmt.Errorf("the alert has a field name longer than %d bytes %s, which Firestore cannot store", maxKeyBytes, path.under())
			case reservedName(k):
				path.pushKey(k)
				return 0, fmt.Errorf("the alert field %s uses a name of the form __name__, which Firestore reserves", path.where())
			}
			if idx != nil {
				idx.field()
			}
			path.pushKey(k)
			n, err := storableSize(x[k], path, idx)
			path.pop()
			if err != nil {
				return 0, err
			}
			size += len(k) + 1 + n
		}
		return size, nil
	case []any:
		if path.depth() >= maxDepth {
			return 0, depthError(path)
		}
		if idx != nil {
			idx.array(x)
		}
		size := 0
		for i, e := range x {
			path.pushIndex(i)
			if _, ok := e.([]any); ok {
				return 0, fmt.Errorf("the alert has an array directly inside an array at %s, which Firestore cannot store", path.where())
			}
			n, err := storableSize(e, path, nil)
			path.pop()
			if err != nil {
				return 0, err
			}
			size += n
		}
		return size, nil
	case string:
		return len(x) + 1, nil
	case float64, int64:
		return 8, nil
	default: // bool, nil
		return 1, nil
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
