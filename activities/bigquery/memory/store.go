package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// embeddingField is the document field that holds the embedding.
	embeddingField = "embedding"
	// distanceField is where FindNearest writes each result's cosine
	// distance. It is never stored.
	distanceField = "vector_distance"
	// similarityTolerance absorbs rounding in the distance that Firestore
	// computes, so that a memory exactly at the threshold is kept.
	similarityTolerance = 1e-9
	// votesCollection is the subcollection of a memory that records which
	// sessions voted on it, one document per session.
	votesCollection = "votes"
	// adjustParallelism bounds the votes one Adjust call runs at once.
	adjustParallelism = 8
	// pruneAttempts bounds how often prune reads a memory that keeps
	// changing between its read and its delete.
	pruneAttempts = 10
)

// listFields are the fields List reads: all but the embedding.
var listFields = []string{"claim", "kind", "table", "columns", "status", "query_text", "score", "created_at", "updated_at", "reviewed_at"}

// Store keeps memories in Firestore. It is safe for concurrent use, also
// from several processes at once.
type Store struct {
	fs  *firestore.Client
	col *firestore.CollectionRef
}

// NewStore returns a store over the "memories" collection of fs.
func NewStore(fs *firestore.Client) *Store {
	return &Store{fs: fs, col: fs.Collection(Collection)}
}

// Recall returns the approved memories whose embeddings are most similar
// (cosine) to embedding, most similar first, at most limit of them, and only
// those with a similarity of at least minSimilarity. Each has Similarity set to
// 1 - cosine distance, and no Embedding (use Get for that).
//
// A minSimilarity of 0 means DefaultMinSimilarity (0.8); otherwise it must be
// within [-1, 1]. A limit of 0 or less means DefaultRecallLimit (32); limits
// above MaxRecallLimit (32) are lowered to it.
// embedding must have Dimensions finite values, not all zero. Memories whose
// stored embedding has another length are never returned.
//
// The search is one Firestore FindNearest query pre-filtered on status ==
// "approved", with a distance threshold of 1 - minSimilarity: the nearest
// approved memories, not the nearest memories of which the approved are
// kept (the emulator honours the pre-filter, TestRecallOnlyApproved; real
// Firestore needs the index in firestore.indexes.json). The results are also
// filtered and sorted here, so the answer holds even where a backend ignores
// the filter, the threshold or the order.
func (s *Store) Recall(ctx context.Context, embedding []float32, minSimilarity float64, limit int) ([]Memory, error) {
	if err := checkEmbedding(embedding); err != nil {
		return nil, fmt.Errorf("recall memories: %w", err)
	}
	if minSimilarity == 0 {
		minSimilarity = DefaultMinSimilarity
	}
	if math.IsNaN(minSimilarity) || minSimilarity < -1 || minSimilarity > 1 {
		return nil, fmt.Errorf("recall memories: the minimum similarity must be within [-1, 1], got %v", minSimilarity)
	}
	if limit <= 0 {
		limit = DefaultRecallLimit
	}
	limit = min(limit, MaxRecallLimit)

	threshold := 1 - minSimilarity
	// Read the results without their embeddings (about half the time over
	// 1,000 memories), asking for the distance field explicitly, since a
	// projection drops it otherwise. Should a backend still leave it out,
	// read them again whole, and compute what it leaves out here.
	docs, err := s.nearest(ctx, embedding, limit, threshold, distanceField, true)
	if err == nil && !allHaveField(docs, distanceField) {
		docs, err = s.nearest(ctx, embedding, limit, threshold, distanceField, false)
	}
	if err != nil {
		return nil, fmt.Errorf("recall memories: %w", err)
	}
	out, err := ranked(docs, distanceField, embedding, minSimilarity)
	if err != nil {
		return nil, fmt.Errorf("recall memories: %w", err)
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// nearest runs the FindNearest query of Recall; projected leaves the
// embeddings out. distField names the field for the distance ("" for none).
func (s *Store) nearest(ctx context.Context, embedding []float32, limit int, threshold float64, distField string, projected bool) ([]*firestore.DocumentSnapshot, error) {
	q := s.col.Where("status", "==", string(StatusApproved))
	if projected {
		fields := listFields
		if distField != "" {
			fields = append(slices.Clone(listFields), distField)
		}
		q = q.Select(fields...)
	}
	vq := q.FindNearest(embeddingField, firestore.Vector32(embedding), limit, firestore.DistanceMeasureCosine,
		&firestore.FindNearestOptions{DistanceThreshold: &threshold, DistanceResultField: distField})
	return vq.Documents(ctx).GetAll()
}

func allHaveField(docs []*firestore.DocumentSnapshot, field string) bool {
	for _, d := range docs {
		if _, err := d.DataAt(field); err != nil {
			return false
		}
	}
	return true
}

// ranked decodes the results of a vector query for the embedding query,
// drops those not approved, less similar than minSimilarity or whose
// similarity is unknown, and sorts the rest most similar first (then by ID).
// The embeddings, when read, are not returned.
func ranked(docs []*firestore.DocumentSnapshot, distField string, query []float32, minSimilarity float64) ([]Memory, error) {
	out := make([]Memory, 0, len(docs))
	for _, d := range docs {
		m, err := decode(d)
		if err != nil {
			return nil, err
		}
		sim, ok := similarity(d, distField, m.Embedding, query)
		if !ok || sim < minSimilarity-similarityTolerance || m.Status != StatusApproved {
			continue
		}
		m.Similarity = sim
		m.Embedding = nil
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b Memory) int {
		if c := cmp.Compare(b.Similarity, a.Similarity); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// similarity returns 1 - the cosine distance that FindNearest wrote into
// distField of the result or, where there is no such field, the cosine
// similarity computed from the stored embedding. ok is false when neither is
// available, or the distance is NaN (a stored all-zero vector).
func similarity(d *firestore.DocumentSnapshot, distField string, stored, query []float32) (sim float64, ok bool) {
	if distField != "" {
		if v, err := d.DataAt(distField); err == nil {
			switch x := v.(type) {
			case float64:
				return 1 - x, !math.IsNaN(x)
			case int64:
				return 1 - float64(x), true
			}
			return 0, false
		}
	}
	if len(stored) != len(query) {
		return 0, false
	}
	return cosine(stored, query)
}

// cosine returns the cosine similarity of a and b, which have equal length;
// ok is false when either is all zeros.
func cosine(a, b []float32) (sim float64, ok bool) {
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0, false
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb)), true
}

// Propose stores a checked claim (CheckClaim) under id with score 0 and the
// given status, StatusProposed or StatusApproved (auto-approval), and
// returns it with created true. id derives from the claim, so a retried
// write, or the same claim from another session, finds the memory already
// there: it is returned as stored, with created false, and nothing about it
// changes (a rejected claim stays rejected, an approved one keeps its
// score). queryText is the request that produced the claim; embedding must
// have Dimensions finite values, not all zero.
func (s *Store) Propose(ctx context.Context, id string, c Claim, queryText string, embedding []float32, st Status) (m Memory, created bool, err error) {
	switch {
	case !validID(id):
		return Memory{}, false, fmt.Errorf("propose memory: %q is not a valid memory ID", id)
	case strings.TrimSpace(c.Text) == "":
		return Memory{}, false, fmt.Errorf("propose memory %q: the claim is empty", id)
	case !slices.Contains(Kinds, c.Kind):
		return Memory{}, false, fmt.Errorf("propose memory %q: the claim has no kind (%q)", id, c.Kind)
	case st != StatusProposed && st != StatusApproved:
		return Memory{}, false, fmt.Errorf("propose memory %q: a new memory is proposed or approved, not %q", id, st)
	}
	if err := checkEmbedding(embedding); err != nil {
		return Memory{}, false, fmt.Errorf("propose memory %q: %w", id, err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	m = Memory{
		ID: id, Claim: strings.TrimSpace(c.Text), Kind: c.Kind, Table: c.Table, Columns: slices.Clone(c.Columns), Status: st,
		QueryText: strings.TrimSpace(queryText), Embedding: firestore.Vector32(slices.Clone(embedding)),
		CreatedAt: now, UpdatedAt: now,
	}
	_, err = s.col.Doc(id).Create(ctx, m)
	if status.Code(err) == codes.AlreadyExists {
		m, err = s.Get(ctx, id)
		return m, false, err
	}
	if err != nil {
		return Memory{}, false, fmt.Errorf("propose memory %q: %w", id, err)
	}
	return m, true, nil
}

// Review records a person's decision on a memory: StatusApproved (it is
// recalled from now on) or StatusRejected (it never is, and the same claim
// is not proposed again). It returns the memory as stored; the error wraps
// ErrNotFound when there is none.
func (s *Store) Review(ctx context.Context, id string, to Status) (Memory, error) {
	if to != StatusApproved && to != StatusRejected {
		return Memory{}, fmt.Errorf("review memory %q: a memory is approved or rejected, not %q", id, to)
	}
	if !validID(strings.TrimSpace(id)) {
		return Memory{}, notFoundError{id}
	}
	_, err := s.col.Doc(id).Update(ctx, []firestore.Update{
		{Path: "status", Value: string(to)},
		{Path: "reviewed_at", Value: firestore.ServerTimestamp},
		{Path: "updated_at", Value: firestore.ServerTimestamp},
	})
	if status.Code(err) == codes.NotFound {
		return Memory{}, notFoundError{id}
	}
	if err != nil {
		return Memory{}, fmt.Errorf("review memory %q: %w", id, err)
	}
	return s.Get(ctx, id)
}

type notFoundError struct{ id string }

func (e notFoundError) Error() string { return fmt.Sprintf("memory %q not found", e.id) }
func (e notFoundError) Unwrap() error { return ErrNotFound }

// checkEmbedding rejects embeddings that cannot be stored or searched for.
func checkEmbedding(e []float32) error {
	if len(e) != Dimensions {
		return fmt.Errorf("the embedding has %d dimensions, want %d", len(e), Dimensions)
	}
	zero := true
	for i, v := range e {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("the embedding's value %d is %v", i, v)
		}
		if v != 0 {
			zero = false
		}
	}
	if zero {
		return errors.New("the embedding is all zeros, which has no cosine similarity")
	}
	return nil
}

// validID reports whether id can name a Firestore document.
func validID(id string) bool {
	switch {
	case id == "", strings.Contains(id, "/"), id == ".", id == "..", len(id) > 1500,
		len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"):
		return false
	}
	return true
}

// uniqueIDs returns the valid IDs of ids, trimmed, each once. Invalid IDs
// name no stored memory, so there is nothing to adjust for them.
func uniqueIDs(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if !validID(id) || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, id)
	}
	return out
}

func scoreOf(snap *firestore.DocumentSnapshot) (int, bool) {
	v, err := snap.DataAt("score")
	if err != nil {
		return 0, false
	}
	switch x := v.(type) {
	case int64:
		return int(x), true
	case float64:
		return int(math.Floor(x)), true
	}
	return 0, false
}

func decode(snap *firestore.DocumentSnapshot) (Memory, error) {
	var m Memory
	if err := snap.DataTo(&m); err != nil {
		return Memory{}, fmt.Errorf("decode memory %q: %w", snap.Ref.ID, err)
	}
	m.ID = snap.Ref.ID
	if m.Status == "" { // stored before memories had a status
		m.Status = StatusProposed
	}
	return m, nil
}
