// Package transcript stores the pieces of a step's tool loop (model turns and
// tool results) in Firestore, so workflow history carries keys instead of
// re-sending every earlier result to every later model turn (claim check).
package transcript

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/internal/clip"
)

// Entry kinds.
const (
	KindModel = "model"
	KindTool  = "tool"
)

// Entry is one stored piece of a transcript.
type Entry struct {
	Kind string `firestore:"kind"`
	// Content is the model's genai.Content as JSON (kind model), kept whole so
	// thought signatures and call IDs go back to the model unchanged.
	Content string `firestore:"content,omitempty"`
	// Text is the model's plain answer (kind model; clipped like Content's
	// text) and a context's JSON.
	Text string `firestore:"text,omitempty"`
	// CallID, Tool and Response describe a tool result (kind tool); Response
	// is the JSON object sent back as the function response.
	CallID    string    `firestore:"call_id,omitempty"`
	Tool      string    `firestore:"tool,omitempty"`
	Response  string    `firestore:"response,omitempty"`
	CreatedAt time.Time `firestore:"created_at"`
}

// Store keeps entries under sessions/{session}/entries/{key}.
type Store struct{ fs *firestore.Client }

// NewStore returns a store on the given Firestore client.
func NewStore(fs *firestore.Client) *Store { return &Store{fs: fs} }

func (s *Store) doc(session, key string) *firestore.DocumentRef {
	return s.fs.Collection("sessions").Doc(session).Collection("entries").Doc(key)
}

// Put stores an entry under session/key unless one is there already, and
// returns the entry the store holds. A key is written once: when two
// attempts of one activity race (a timed-out attempt still running while
// its retry ran), the first write wins and both return it, so the workflow
// history and the transcript never disagree.
func (s *Store) Put(ctx context.Context, session, key string, e Entry) (Entry, error) {
	if e.CreatedAt.IsZero() {
		e.CreatedAt = time.Now()
	}
	// Firestore keeps microseconds: the entry returned is the one stored.
	e.CreatedAt = e.CreatedAt.UTC().Truncate(time.Microsecond)
	if err := CheckKey(key); err != nil {
		return Entry{}, err
	}
	ref := s.doc(session, key)
	_, err := ref.Create(ctx, e)
	if status.Code(err) == codes.AlreadyExists {
		snap, gerr := ref.Get(ctx)
		if gerr != nil {
			return Entry{}, fmt.Errorf("read transcript entry %s/%s: %w", session, key, gerr)
		}
		var stored Entry
		if err := snap.DataTo(&stored); err != nil {
			return Entry{}, fmt.Errorf("decode transcript entry %s/%s: %w", session, key, err)
		}
		return stored, nil
	}
	if err != nil {
		return Entry{}, fmt.Errorf("store transcript entry %s/%s: %w", session, key, err)
	}
	return e, nil
}

// GetAll reads entries in the order of keys; a missing key is a
// *MissingError, a key no entry can have a *KeyError.
func (s *Store) GetAll(ctx context.Context, session string, keys []string) ([]Entry, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	refs := make([]*firestore.DocumentRef, len(keys))
	for i, k := range keys {
		if err := CheckKey(k); err != nil {
			return nil, err
		}
		refs[i] = s.doc(session, k)
	}
	snaps, err := s.fs.GetAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("read transcript of %s: %w", session, err)
	}
	out := make([]Entry, len(snaps))
	for i, snap := range snaps {
		if !snap.Exists() {
			return nil, &MissingError{Session: session, Key: keys[i]}
		}
		if err := snap.DataTo(&out[i]); err != nil {
			return nil, fmt.Errorf("decode transcript entry %s/%s: %w", session, keys[i], err)
		}
	}
	return out, nil
}

// MissingError says a transcript entry the caller named is not stored (the
// store lost it, or it was never written).
type MissingError struct{ Session, Key string }

func (e *MissingError) Error() string {
	return fmt.Sprintf("transcript entry %s/%s is missing", e.Session, e.Key)
}

// KeyError says a caller named a key no entry can have (empty, or one
// Firestore cannot take as a document ID). Its text names no store path:
// a model may read it.
type KeyError struct{ Key string }

func (e *KeyError) Error() string {
	return fmt.Sprintf("%q is not a transcript key", clip.String(e.Key, 64))
}

// CheckKey refuses a key Firestore would refuse with InvalidArgument (or
// read as a path into another collection): an error no retry mends, whose
// text names the project and the session.
func CheckKey(key string) error {
	if key == "" || key == "." || key == ".." || strings.Contains(key, "/") || len(key) > 1500 || !utf8.ValidString(key) ||
		strings.HasPrefix(key, "__") && strings.HasSuffix(key, "__") {
		return &KeyError{Key: key}
	}
	return nil
}
