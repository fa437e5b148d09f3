package alerts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/internal/clip"
)

// ErrUnstorable is wrapped when Firestore refuses an alert as invalid
// (InvalidArgument, such as a document over 1 MiB): storing it again
// cannot succeed, unlike after an outage.
var ErrUnstorable = errors.New("Firestore cannot store the alert")

// ErrIDTaken is wrapped when another alert is stored under the alert's ID:
// an ID holds only 48 bits of the content's hash, so two alerts can share
// one, by chance or made to.
var ErrIDTaken = errors.New("an alert with the same ID but different content is stored")

// hashField holds the full SHA-256 of the alert's canonical data in its
// document, which tells two alerts with the same ID apart.
const hashField = "content_sha256"

// document is what an alert is stored as.
type document struct {
	Alert
	SHA256 string `firestore:"content_sha256"`
}

// Create stores a new alert, with its indicator keys and the current time
// as its import time, in one write and without a transaction: the ID is
// the content, so an alert already stored under it is the same alert and
// is left as it is (created is false), once its full content hash says so;
// another alert's content under the ID is refused with an error wrapping
// ErrIDTaken. The intake stores every message this way: a burst delivering
// one alert many times at once never makes transactions contend for its
// document. An alert Firestore refuses as invalid is an error wrapping
// ErrUnstorable.
func (s *Store) Create(ctx context.Context, a Alert) (created bool, err error) {
	if err := checkID(a.ID); err != nil {
		return false, err
	}
	doc, err := newDocument(a)
	if err != nil {
		return false, err
	}
	if doc.ImportedAt.IsZero() {
		doc.ImportedAt = time.Now().UTC().Truncate(time.Microsecond)
	}
	ref := s.col.Doc(a.ID)
	_, err = ref.Create(ctx, doc)
	switch {
	case status.Code(err) == codes.AlreadyExists:
		snap, err := ref.Get(ctx)
		if err != nil {
			return false, fmt.Errorf("read alert %q: %w", a.ID, err)
		}
		if err := checkSame(snap, doc.SHA256); err != nil {
			return false, err
		}
		return false, nil
	case err != nil:
		return false, writeError(a.ID, err)
	}
	return true, nil
}

// newDocument is a's document: its indicator keys (whatever a.Indicators
// held) and the hash of its data.
func newDocument(a Alert) (document, error) {
	a.Indicators = IndexKeys(Indicators(a.Data))
	sum, err := contentHash(a.Data)
	if err != nil {
		return document{}, fmt.Errorf("the alert %q cannot be encoded: %w", a.ID, err)
	}
	return document{Alert: a, SHA256: sum}, nil
}

// contentHash is the full SHA-256, in hex, of the canonical JSON whose
// first 48 bits name the alert (contentID).
func contentHash(data map[string]any) (string, error) {
	_, canonical, err := contentID("", data)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}

// checkSame refuses, with an error wrapping ErrIDTaken, a stored alert
// whose content hash is not sum. A document stored before the hash was
// has its data hashed.
func checkSame(snap *firestore.DocumentSnapshot, sum string) error {
	stored, _ := snap.DataAt(hashField)
	h, ok := stored.(string)
	if !ok {
		var old Alert
		if err := snap.DataTo(&old); err != nil {
			return fmt.Errorf("decode alert %q: %w", snap.Ref.ID, err)
		}
		var err error
		if h, err = contentHash(old.Data); err != nil {
			return fmt.Errorf("decode alert %q: %w", snap.Ref.ID, err)
		}
	}
	if h != sum {
		return idTakenError{snap.Ref.ID}
	}
	return nil
}

type idTakenError struct{ id string }

func (e idTakenError) Error() string {
	return fmt.Sprintf("%v: %s, so this alert was not stored", ErrIDTaken, e.id)
}
func (e idTakenError) Unwrap() error { return ErrIDTaken }

// writeError says why an alert's write failed; Firestore's
// InvalidArgument, which no retry mends, wraps ErrUnstorable.
func writeError(id string, err error) error {
	if status.Code(err) == codes.InvalidArgument {
		return unstorableError{id: id, reason: clip.String(status.Convert(err).Message(), 300)}
	}
	return fmt.Errorf("store alert %q: %w", id, err)
}

type unstorableError struct{ id, reason string }

func (e unstorableError) Error() string {
	return fmt.Sprintf("Firestore refused to store alert %s: %s", e.id, e.reason)
}
func (e unstorableError) Unwrap() error { return ErrUnstorable }
