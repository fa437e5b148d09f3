// Package progress keeps an investigation's progress events and its latest
// status in Firestore, beside its transcript (sessions/{workflow ID}/...),
// so a follower reads them after a continue-as-new and after the workers of
// the run's version are gone, and waits for new ones without asking
// Temporal (design/durability.md, "Where progress lives").
package progress

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/investigation"
)

// MaxStored is how many events an investigation keeps in the store: each
// write deletes the events MaxStored numbers older than the ones it adds.
const MaxStored = 4000

// Store reads and writes progress under sessions/{session}/progress/{seq}
// and sessions/{session}/state/status.
type Store struct{ fs *firestore.Client }

// NewStore returns a store on a Firestore client.
func NewStore(fs *firestore.Client) *Store { return &Store{fs: fs} }

// record is one stored event: its number (ordered on) and the event as JSON.
type record struct {
	Seq   int    `firestore:"seq"`
	Event string `firestore:"event"`
}

// statusRecord is the stored status as JSON and when it was written.
type statusRecord struct {
	Status    string    `firestore:"status"`
	UpdatedAt time.Time `firestore:"updated_at"`
}

func (s *Store) events(session string) *firestore.CollectionRef {
	return s.fs.Collection("sessions").Doc(session).Collection("progress")
}

func (s *Store) statusDoc(session string) *firestore.DocumentRef {
	return s.fs.Collection("sessions").Doc(session).Collection("state").Doc("status")
}

// docID orders events by number in the document ID too.
func docID(seq int) string { return fmt.Sprintf("%010d", seq) }

// Put stores events (a run numbers them, Seq) and, when st is not nil, the
// status, and deletes the events past MaxStored: one atomic batch per
// maxWrites writes or maxBatchBytes, so a listener sees a flush at once. Writing an event
// twice writes the same document (a retried write is harmless).
func (s *Store) Put(ctx context.Context, session string, events []investigation.Event, st *investigation.Status) error {
	type write struct {
		ref   *firestore.DocumentRef
		data  any // nil: delete
		bytes int // estimated size in the request
	}
	var writes []write
	for _, e := range events {
		raw, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode progress event %d: %w", e.Seq, err)
		}
		ref := s.events(session).Doc(docID(e.Seq))
		writes = append(writes, write{ref, record{Seq: e.Seq, Event: string(raw)}, len(raw) + len(ref.Path) + writeOverhead})
		if old := e.Seq - MaxStored; old > 0 {
			ref := s.events(session).Doc(docID(old))
			writes = append(writes, write{ref: ref, bytes: len(ref.Path) + writeOverhead})
		}
	}
	if st != nil {
		raw, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("encode the status: %w", err)
		}
		ref := s.statusDoc(session)
		writes = append(writes, write{ref, statusRecord{Status: string(raw), UpdatedAt: time.Now().UTC()}, len(raw) + len(ref.Path) + writeOverhead})
	}
	for len(writes) > 0 {
		// At most maxWrites writes and maxBatchBytes, but at least one.
		n, size := 1, writes[0].bytes
		for n < len(writes) && n < maxWrites && size+writes[n].bytes <= maxBatchBytes {
			size += writes[n].bytes
			n++
		}
		chunk := writes[:n]
		writes = writes[n:]
		// One atomic commit, one round trip (a transaction takes two). The
		// SDK prefers BulkWriter, which is neither atomic nor one call.
		b := s.fs.Batch() //nolint:staticcheck // see above
		for _, w := range chunk {
			if w.data == nil {
				b.Delete(w.ref)
			} else {
				b.Set(w.ref, w.data)
			}
		}
		if _, err := b.Commit(ctx); err != nil {
			return fmt.Errorf("store progress of %s: %w", session, err)
		}
	}
	return nil
}

// maxWrites keeps a batch under Firestore's 500 writes, and maxBatchBytes
// its request under Firestore's 10 MiB and the emulator's 4 MiB (a flush
// of a few large events reaches them long before 400 writes). A write is
// its event or status JSON, its document path and writeOverhead for the
// field names, the number and the encoding.
const (
	maxWrites     = 400
	maxBatchBytes = 3 << 20
	writeOverhead = 256
)

// After returns at most limit stored events numbered above after, in order.
func (s *Store) After(ctx context.Context, session string, after, limit int) ([]investigation.Event, error) {
	it := s.events(session).Where("seq", ">", after).OrderBy("seq", firestore.Asc).Limit(limit).Documents(ctx)
	defer it.Stop()
	var out []investigation.Event
	for {
		snap, err := it.Next()
		if err == iterator.Done {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the progress of %s: %w", session, err)
		}
		e, err := decode(snap)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
}

func decode(snap *firestore.DocumentSnapshot) (investigation.Event, error) {
	var r record
	var e investigation.Event
	if err := snap.DataTo(&r); err != nil {
		return e, fmt.Errorf("decode progress event %s: %w", snap.Ref.ID, err)
	}
	if err := json.Unmarshal([]byte(r.Event), &e); err != nil {
		return e, fmt.Errorf("decode progress event %s: %w", snap.Ref.ID, err)
	}
	return e, nil
}

// Status returns the stored status and when it was written; found is false
// when the investigation stored none.
func (s *Store) Status(ctx context.Context, session string) (st investigation.Status, at time.Time, found bool, err error) {
	snap, err := s.statusDoc(session).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return st, at, false, nil
	}
	if err != nil {
		return st, at, false, fmt.Errorf("read the stored status of %s: %w", session, err)
	}
	var r statusRecord
	if err := snap.DataTo(&r); err != nil {
		return st, at, false, fmt.Errorf("decode the stored status of %s: %w", session, err)
	}
	if err := json.Unmarshal([]byte(r.Status), &st); err != nil {
		return st, at, false, fmt.Errorf("decode the stored status of %s: %w", session, err)
	}
	return st, r.UpdatedAt, true, nil
}

// Watch listens for events numbered above after: one long-lived Firestore
// listen stream, no polling. Each batch of new events (in order) goes to
// got; Watch returns when ctx ends or the stream fails.
func (s *Store) Watch(ctx context.Context, session string, after int, got func([]investigation.Event)) error {
	it := s.events(session).Where("seq", ">", after).OrderBy("seq", firestore.Asc).Snapshots(ctx)
	defer it.Stop()
	for {
		snap, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("watch the progress of %s: %w", session, err)
		}
		var batch []investigation.Event
		for _, ch := range snap.Changes {
			if ch.Kind == firestore.DocumentRemoved {
				continue
			}
			e, err := decode(ch.Doc)
			if err != nil {
				return err
			}
			batch = append(batch, e)
		}
		sort.Slice(batch, func(i, j int) bool { return batch[i].Seq < batch[j].Seq })
		if len(batch) > 0 {
			got(batch)
		}
	}
}
