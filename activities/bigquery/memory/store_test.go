package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/internal/testenv"
)

// emulatorHost is the Firestore emulator that TestMain starts for the
// whole package.
var emulatorHost string

func TestMain(m *testing.M) {
	host, stop, err := testenv.StartFirestore()
	if err != nil {
		fmt.Fprintln(os.Stderr, "memory tests need the Firestore emulator:", err)
		os.Exit(1)
	}
	emulatorHost = host
	os.Setenv("FIRESTORE_EMULATOR_HOST", host)
	code := m.Run()
	stop()
	os.Exit(code)
}

// newTestStore returns a store on an emptied emulator database, and its
// Firestore client.
func newTestStore(tb testing.TB) (*Store, *firestore.Client) {
	tb.Helper()
	require.NoError(tb, testenv.ResetFirestore(emulatorHost, testenv.Project))
	fs, err := firestore.NewClient(context.Background(), testenv.Project)
	require.NoError(tb, err)
	tb.Cleanup(func() { fs.Close() })
	return NewStore(fs), fs
}

// unitVector returns a random vector of length 1.
func unitVector(r *rand.Rand) []float64 {
	v := make([]float64, Dimensions)
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return normalize(v)
}

func normalize(v []float64) []float64 {
	var n float64
	for _, x := range v {
		n += x * x
	}
	n = math.Sqrt(n)
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x / n
	}
	return out
}

// orthogonal returns a random unit vector orthogonal to the unit vector q.
func orthogonal(r *rand.Rand, q []float64) []float64 {
	u := unitVector(r)
	var dot float64
	for i := range u {
		dot += u[i] * q[i]
	}
	for i := range u {
		u[i] -= dot * q[i]
	}
	return normalize(u)
}

// atSimilarity returns a vector whose cosine similarity to the unit vector q
// is sim, scaled by scale (cosine ignores the length).
func atSimilarity(r *rand.Rand, q []float64, sim, scale float64) []float32 {
	u := orthogonal(r, q)
	s := math.Sqrt(1 - sim*sim)
	out := make([]float32, Dimensions)
	for i := range out {
		out[i] = float32(scale * (sim*q[i] + s*u[i]))
	}
	return out
}

func toFloat32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func claims(ms []Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Claim
	}
	return out
}

// ids numbers the memories the tests store.
var ids atomic.Int64

// testClaim is a claim with the given text, as CheckClaim returns one.
func testClaim(text string) Claim {
	return Claim{Kind: KindColumnMeaning, Table: "security_logs.auth_events", Columns: []string{"user"}, Text: text}
}

// add stores an approved memory under a new ID: a proposal a person
// approved.
func add(ctx context.Context, s *Store, claim, queryText string, embedding []float32) (Memory, error) {
	m, _, err := s.Propose(ctx, fmt.Sprint("m-", ids.Add(1)), testClaim(claim), queryText, embedding, StatusApproved)
	return m, err
}

// mustAdd stores an approved memory with a random embedding drawn from r.
func mustAdd(t *testing.T, s *Store, r *rand.Rand, claim string) Memory {
	t.Helper()
	m, err := add(t.Context(), s, claim, "", toFloat32(unitVector(r)))
	require.NoError(t, err)
	return m
}

func TestRecallOrderAndThreshold(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(1, 2))
	q := unitVector(r)

	// Stored out of order, with various lengths.
	sims := map[string]float64{"s85": 0.85, "s20": 0.2, "s99": 0.99, "s79": 0.79, "s90": 0.9}
	for i, name := range []string{"s85", "s20", "s99", "s79", "s90"} {
		_, err := add(ctx, s, "claim "+name, "request "+name, atSimilarity(r, q, sims[name], 0.5+float64(i)))
		require.NoError(t, err)
	}

	got, err := s.Recall(ctx, toFloat32(q), 0.8, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"claim s99", "claim s90", "claim s85"}, claims(got))
	for _, m := range got {
		assert.InDelta(t, sims[m.Claim[len("claim "):]], m.Similarity, 1e-4, m.Claim)
		assert.NotEmpty(t, m.ID)
		assert.Nil(t, m.Embedding, "Recall leaves embeddings out")
		assert.Equal(t, "request "+m.Claim[len("claim "):], m.QueryText)
	}

	// 0 means the default threshold, 0.8.
	got, err = s.Recall(ctx, toFloat32(q), 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"claim s99", "claim s90", "claim s85"}, claims(got))

	// The limit keeps the most similar.
	got, err = s.Recall(ctx, toFloat32(q), 0.8, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"claim s99", "claim s90"}, claims(got))

	// A lower threshold lets the 0.79 one in, still in order.
	got, err = s.Recall(ctx, toFloat32(q), 0.5, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"claim s99", "claim s90", "claim s85", "claim s79"}, claims(got))

	// -1 takes everything.
	got, err = s.Recall(ctx, toFloat32(q), -1, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"claim s99", "claim s90", "claim s85", "claim s79", "claim s20"}, claims(got))

	// The query's length does not matter either.
	scaled := toFloat32(q)
	for i := range scaled {
		scaled[i] *= 7
	}
	got, err = s.Recall(ctx, scaled, 0.8, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"claim s99", "claim s90", "claim s85"}, claims(got))
}

func TestRecallIgnoresOtherDimensions(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(3, 4))
	q := unitVector(r)
	_, err := add(ctx, s, "good", "", atSimilarity(r, q, 0.95, 1))
	require.NoError(t, err)
	// A document written by something else, with a short vector.
	_, err = fs.Collection(Collection).Doc("short").Set(ctx, map[string]any{
		"claim": "short", "status": "approved", "score": 0, "embedding": firestore.Vector32{1, 2, 3},
	})
	require.NoError(t, err)

	got, err := s.Recall(ctx, toFloat32(q), 0.5, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"good"}, claims(got))
}

// TestRecallWithoutServerDistance covers the fallback for a backend that
// returns no distance field: the similarity is computed from the embeddings.
func TestRecallWithoutServerDistance(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(23, 24))
	q := unitVector(r)
	for _, sim := range []float64{0.3, 0.95, 0.81, 0.7} {
		_, err := add(ctx, s, fmt.Sprint(sim), "", atSimilarity(r, q, sim, 3))
		require.NoError(t, err)
	}
	// A stored all-zero vector has no cosine similarity to anything.
	_, err := fs.Collection(Collection).Doc("zero").Set(ctx, map[string]any{
		"claim": "zero", "status": "approved", "score": 0, "embedding": make(firestore.Vector32, Dimensions),
	})
	require.NoError(t, err)

	docs, err := s.nearest(ctx, toFloat32(q), 10, 2, "", false)
	require.NoError(t, err)
	// The emulator leaves the zero vector (distance NaN) out under any
	// threshold; ranked drops it anyway.
	require.GreaterOrEqual(t, len(docs), 4)
	got, err := ranked(docs, "", toFloat32(q), 0.8)
	require.NoError(t, err)
	require.Equal(t, []string{"0.95", "0.81"}, claims(got))
	assert.InDelta(t, 0.95, got[0].Similarity, 1e-4)
	assert.InDelta(t, 0.81, got[1].Similarity, 1e-4)
	assert.Nil(t, got[0].Embedding)

	// Projected without a distance field, nothing is known: nothing passes.
	docs, err = s.nearest(ctx, toFloat32(q), 10, 2, "", true)
	require.NoError(t, err)
	require.False(t, allHaveField(docs, distanceField))
	got, err = ranked(docs, "", toFloat32(q), 0.8)
	require.NoError(t, err)
	assert.Empty(t, got)

	// Recall itself never returns the zero vector, even with -1.
	got, err = s.Recall(ctx, toFloat32(q), -1, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"0.95", "0.81", "0.7", "0.3"}, claims(got))
}

// TestRecallOnlyApproved: proposed, rejected and status-less (stored
// before the lifecycle) memories are never recalled, however close, and
// the status filter runs before the nearest-neighbour limit: forty closer
// proposals do not crowd out the approved memories.
func TestRecallOnlyApproved(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(41, 42))
	q := unitVector(r)
	var approved []string
	for i := range 5 {
		m, _, err := s.Propose(ctx, fmt.Sprint("ok-", i), testClaim(fmt.Sprint("approved ", i)), "", atSimilarity(r, q, 0.85+0.01*float64(i), 1), StatusProposed)
		require.NoError(t, err)
		_, err = s.Review(ctx, m.ID, StatusApproved)
		require.NoError(t, err)
		approved = append([]string{m.Claim}, approved...) // most similar first
	}
	for i := range 40 {
		_, _, err := s.Propose(ctx, fmt.Sprint("new-", i), testClaim(fmt.Sprint("proposed ", i)), "", atSimilarity(r, q, 0.99, 1), StatusProposed)
		require.NoError(t, err)
	}
	for i := range 5 {
		m, _, err := s.Propose(ctx, fmt.Sprint("no-", i), testClaim(fmt.Sprint("rejected ", i)), "", atSimilarity(r, q, 0.98, 1), StatusApproved)
		require.NoError(t, err)
		_, err = s.Review(ctx, m.ID, StatusRejected)
		require.NoError(t, err)
	}
	_, err := fs.Collection(Collection).Doc("legacy").Set(ctx, map[string]any{
		"claim": "auth_events rows of svc_backup are load tests", "score": 3, "embedding": firestore.Vector32(atSimilarity(r, q, 0.99, 1)),
	})
	require.NoError(t, err)

	got, err := s.Recall(ctx, toFloat32(q), 0.8, 5)
	require.NoError(t, err)
	assert.Equal(t, approved, claims(got), "the five approved, though 46 others are closer")
	got, err = s.Recall(ctx, toFloat32(q), -1, 0)
	require.NoError(t, err)
	assert.Equal(t, approved, claims(got))

	// A backend that ignored the filter would still not pass them on.
	docs, err := s.col.FindNearest(embeddingField, firestore.Vector32(toFloat32(q)), 100, firestore.DistanceMeasureCosine,
		&firestore.FindNearestOptions{DistanceResultField: distanceField}).Documents(ctx).GetAll()
	require.NoError(t, err)
	require.Len(t, docs, 51)
	got, err = ranked(docs, distanceField, toFloat32(q), 0.8)
	require.NoError(t, err)
	assert.Equal(t, approved, claims(got))

	legacy, err := s.Get(ctx, "legacy")
	require.NoError(t, err)
	assert.Equal(t, StatusProposed, legacy.Status, "a memory stored before the lifecycle reads as proposed")
}

// TestListByStatus: the review list of each status, in score order, legacy
// memories among the proposed ones, across several pages.
func TestListByStatus(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(43, 44))
	want := map[Status][]string{}
	for i := range listPage + 20 { // more than a page of approved ones first
		st := StatusApproved
		switch {
		case i >= listPage+15:
			st = StatusProposed
		case i >= listPage+10:
			st = StatusRejected
		}
		id := fmt.Sprintf("m-%03d", i)
		_, _, err := s.Propose(ctx, id, testClaim(id), "", toFloat32(unitVector(r)), StatusProposed)
		require.NoError(t, err)
		if st != StatusProposed {
			_, err = s.Review(ctx, id, st)
			require.NoError(t, err)
		}
		want[st] = append(want[st], id)
	}
	_, err := fs.Collection(Collection).Doc("legacy").Set(ctx, map[string]any{"claim": "legacy", "score": -1,
		"created_at": time.Now(), "embedding": firestore.Vector32(toFloat32(unitVector(r)))})
	require.NoError(t, err)
	want[StatusProposed] = append(want[StatusProposed], "legacy") // lowest score

	ids := func(ms []Memory) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = m.ID
		}
		return out
	}
	for _, st := range []Status{StatusProposed, StatusRejected} {
		got, err := s.List(ctx, 0, st)
		require.NoError(t, err)
		assert.ElementsMatch(t, want[st], ids(got), st)
		for _, m := range got {
			assert.Equal(t, st, m.Status)
		}
	}
	got, err := s.List(ctx, 3, StatusProposed)
	require.NoError(t, err)
	assert.Len(t, got, 3)
	got, err = s.List(ctx, 1000, StatusApproved)
	require.NoError(t, err)
	assert.Len(t, got, listPage+10)
	got, err = s.List(ctx, 1000, "")
	require.NoError(t, err)
	assert.Len(t, got, listPage+21)
}

func TestRecallEmpty(t *testing.T) {
	s, _ := newTestStore(t)
	got, err := s.Recall(t.Context(), toFloat32(unitVector(rand.New(rand.NewPCG(5, 6)))), 0.8, 0)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestInvalidInput(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	good := toFloat32(unitVector(rand.New(rand.NewPCG(7, 8))))

	_, err := s.Recall(ctx, make([]float32, 3), 0.8, 0)
	require.ErrorContains(t, err, "the embedding has 3 dimensions, want 768")
	_, err = s.Recall(ctx, nil, 0.8, 0)
	require.ErrorContains(t, err, "the embedding has 0 dimensions, want 768")
	_, err = s.Recall(ctx, make([]float32, Dimensions), 0.8, 0)
	require.ErrorContains(t, err, "all zeros")
	_, err = s.Recall(ctx, good, 1.5, 0)
	require.ErrorContains(t, err, "minimum similarity")
	_, err = s.Recall(ctx, good, math.NaN(), 0)
	require.ErrorContains(t, err, "minimum similarity")

	_, err = add(ctx, s, "claim", "q", make([]float32, 1024))
	require.ErrorContains(t, err, "the embedding has 1024 dimensions, want 768")
	_, err = add(ctx, s, "  \n", "q", good)
	require.ErrorContains(t, err, "the claim is empty")
	nan := slices.Clone(good)
	nan[5] = float32(math.NaN())
	_, err = add(ctx, s, "claim", "q", nan)
	require.ErrorContains(t, err, "value 5")
	_, _, err = s.Propose(ctx, "m-x", Claim{Text: "an untyped claim"}, "q", good, StatusApproved)
	require.ErrorContains(t, err, "the claim has no kind")
	_, _, err = s.Propose(ctx, "m-x", testClaim("claim"), "q", good, StatusRejected)
	require.ErrorContains(t, err, "a new memory is proposed or approved")
	_, _, err = s.Propose(ctx, "a/b", testClaim("claim"), "q", good, StatusProposed)
	require.ErrorContains(t, err, "not a valid memory ID")
	_, _, err = s.Propose(ctx, "", testClaim("claim"), "q", good, StatusProposed)
	require.ErrorContains(t, err, "not a valid memory ID")

	list, err := s.List(ctx, 0, "")
	require.NoError(t, err)
	assert.Empty(t, list, "nothing invalid was stored")
}

func TestAddGetDelete(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	emb := toFloat32(unitVector(rand.New(rand.NewPCG(9, 10))))
	before := time.Now()
	m, err := add(ctx, s, "  auth_events.source_ip is a STRING  ", "failed SSH logins", emb)
	require.NoError(t, err)
	assert.NotEmpty(t, m.ID)
	assert.Equal(t, "auth_events.source_ip is a STRING", m.Claim)
	assert.Equal(t, 0, m.Score)
	assert.WithinDuration(t, before, m.CreatedAt, time.Minute)

	emb[0] = 42 // the store kept its own copy
	got, err := s.Get(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, m.ID, got.ID)
	assert.Equal(t, m.Claim, got.Claim)
	assert.Equal(t, "failed SSH logins", got.QueryText)
	assert.Equal(t, m.Embedding, got.Embedding)
	assert.NotEqual(t, float32(42), got.Embedding[0])
	assert.True(t, m.CreatedAt.Equal(got.CreatedAt))

	b, err := json.Marshal(got)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "embedding", "embeddings stay out of JSON (and prompts)")

	require.NoError(t, s.Delete(ctx, m.ID))
	_, err = s.Get(ctx, m.ID)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, s.Delete(ctx, m.ID), ErrNotFound)
}

// TestPropose: a claim proposed again (a retried activity, or the same
// claim from another session) is the memory already stored, whatever its
// status, score or embedding; after a delete it is proposed afresh.
func TestPropose(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(29, 30))
	q := unitVector(r)
	c := Claim{Kind: KindTypeFormat, Table: "security_logs.auth_events", Columns: []string{"event_time"}, Text: " event_time is a TIMESTAMP in UTC "}

	m, created, err := s.Propose(ctx, "m-1", c, "request", atSimilarity(r, q, 0.9, 1), StatusProposed)
	require.NoError(t, err)
	require.True(t, created)
	assert.Equal(t, Memory{ID: "m-1", Claim: "event_time is a TIMESTAMP in UTC", Kind: KindTypeFormat, Table: "security_logs.auth_events",
		Columns: []string{"event_time"}, Status: StatusProposed, QueryText: "request", Score: 0, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
		Embedding: m.Embedding}, m)
	got, err := s.Get(ctx, "m-1")
	require.NoError(t, err)
	assert.Equal(t, m, got, "stored as returned")

	again, created, err := s.Propose(ctx, "m-1", c, "request 2", atSimilarity(r, q, 0.95, 1), StatusApproved)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, m, again, "nothing changed: still proposed, the first request and embedding")

	rejected, err := s.Review(ctx, "m-1", StatusRejected)
	require.NoError(t, err)
	assert.Equal(t, StatusRejected, rejected.Status)
	again, created, err = s.Propose(ctx, "m-1", c, "request 3", atSimilarity(r, q, 0.95, 1), StatusApproved)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, StatusRejected, again.Status, "a rejected claim stays rejected, even under auto-approval")

	require.NoError(t, s.Delete(ctx, "m-1"))
	fresh, created, err := s.Propose(ctx, "m-1", c, "", atSimilarity(r, q, 0.9, 1), StatusApproved)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, StatusApproved, fresh.Status)
}

// TestReview: approve and reject change the status and say when; unknown
// IDs and other statuses are refused.
func TestReview(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	emb := toFloat32(unitVector(rand.New(rand.NewPCG(31, 32))))
	m, _, err := s.Propose(ctx, "m-1", testClaim("user holds the account"), "", emb, StatusProposed)
	require.NoError(t, err)
	require.Nil(t, m.ReviewedAt)

	before := time.Now().Add(-time.Minute)
	ok, err := s.Review(ctx, "m-1", StatusApproved)
	require.NoError(t, err)
	assert.Equal(t, StatusApproved, ok.Status)
	require.NotNil(t, ok.ReviewedAt)
	assert.True(t, ok.ReviewedAt.After(before))
	assert.Equal(t, m.Claim, ok.Claim)
	assert.Equal(t, m.Embedding, ok.Embedding)

	_, err = s.Review(ctx, "m-1", StatusProposed)
	require.ErrorContains(t, err, "approved or rejected")
	for _, id := range []string{"nope", "a/b", " "} {
		_, err = s.Review(ctx, id, StatusApproved)
		require.ErrorIs(t, err, ErrNotFound, id)
	}
	_, err = s.Get(ctx, "nope")
	require.ErrorIs(t, err, ErrNotFound, "review created nothing")
}

func TestGetDeleteNotFound(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	for _, id := range []string{"nope", "a/b", "__x__"} {
		_, err := s.Get(ctx, id)
		assert.ErrorIs(t, err, ErrNotFound, id)
		assert.ErrorIs(t, s.Delete(ctx, id), ErrNotFound, id)
	}
	_, err := s.Get(ctx, "")
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrNotFound)
}

func TestAdjustUnknownIDsIgnored(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	m, err := add(ctx, s, "known", "", toFloat32(unitVector(rand.New(rand.NewPCG(11, 12)))))
	require.NoError(t, err)

	deleted, err := s.Adjust(ctx, "session-1", []string{"ghost", m.ID, "a/b", ""}, []string{"ghost2", "ghost2", "ghost3"})
	require.NoError(t, err)
	assert.Empty(t, deleted)

	docs, err := fs.Collection(Collection).Documents(ctx).GetAll()
	require.NoError(t, err)
	require.Len(t, docs, 1, "no documents were created for unknown IDs")
	assert.Equal(t, m.ID, docs[0].Ref.ID)
	votes, err := fs.CollectionGroup(votesCollection).Documents(ctx).GetAll()
	require.NoError(t, err)
	require.Len(t, votes, 1, "nor votes on them")
	assert.Equal(t, m.ID, votes[0].Ref.Parent.Parent.ID)
	for _, id := range []string{"ghost", "ghost2", "ghost3"} {
		_, err := s.Get(ctx, id)
		assert.ErrorIs(t, err, ErrNotFound, id)
	}
	got, err := s.Get(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, got.Score)
	assert.True(t, got.UpdatedAt.After(m.UpdatedAt) || got.UpdatedAt.Equal(m.UpdatedAt))
}

func TestAdjustNetsAndDeduplicates(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(13, 14))
	both, err := add(ctx, s, "both", "", toFloat32(unitVector(r)))
	require.NoError(t, err)
	twice, err := add(ctx, s, "twice", "", toFloat32(unitVector(r)))
	require.NoError(t, err)

	_, err = s.Adjust(ctx, "session-1", []string{both.ID, twice.ID, twice.ID, " " + twice.ID + " "}, []string{both.ID})
	require.NoError(t, err)

	got, err := s.Get(ctx, both.ID)
	require.NoError(t, err)
	assert.Equal(t, 0, got.Score, "helpful and harmful in one call net to 0")
	got, err = s.Get(ctx, twice.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, got.Score, "an ID repeated in one list counts once")
}

func TestAdjustPrunesBelowMinusThree(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(15, 16))
	doomed, err := add(ctx, s, "doomed", "", toFloat32(unitVector(r)))
	require.NoError(t, err)
	kept, err := add(ctx, s, "kept", "", toFloat32(unitVector(r)))
	require.NoError(t, err)

	// doomed: 0 -> -3, kept: 0 -> -2; nothing is below -3 yet.
	for i := range 3 {
		harmful := []string{doomed.ID}
		if i < 2 {
			harmful = append(harmful, kept.ID)
		}
		deleted, err := s.Adjust(ctx, fmt.Sprint("session-", i), nil, harmful)
		require.NoError(t, err)
		require.Empty(t, deleted)
	}
	got, err := s.Get(ctx, doomed.ID)
	require.NoError(t, err)
	require.Equal(t, -3, got.Score, "a memory at -3 stays")

	// doomed: -3 -> -4 (deleted), kept: -2 -> -3 (stays).
	deleted, err := s.Adjust(ctx, "session-3", nil, []string{doomed.ID, kept.ID})
	require.NoError(t, err)
	assert.Equal(t, []string{doomed.ID}, deleted)
	_, err = s.Get(ctx, doomed.ID)
	require.ErrorIs(t, err, ErrNotFound)
	got, err = s.Get(ctx, kept.ID)
	require.NoError(t, err)
	assert.Equal(t, -3, got.Score)

	// Adjusting the deleted one again neither fails nor recreates it.
	deleted, err = s.Adjust(ctx, "session-4", []string{doomed.ID}, []string{doomed.ID + "x"})
	require.NoError(t, err)
	assert.Empty(t, deleted)
	_, err = s.Get(ctx, doomed.ID)
	require.ErrorIs(t, err, ErrNotFound)
}

// TestAdjustPrunesLeftovers covers memories left below -3 (say, by a
// caller that crashed between its increment and its delete): any adjustment
// that leaves them below -3 deletes them.
func TestAdjustPrunesLeftovers(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	emb := firestore.Vector32(toFloat32(unitVector(rand.New(rand.NewPCG(25, 26)))))
	for id, score := range map[string]int{"at-5": -5, "at-4": -4} {
		_, err := fs.Collection(Collection).Doc(id).Set(ctx, Memory{Claim: id, Embedding: emb, Score: score, Status: StatusApproved})
		require.NoError(t, err)
	}
	deleted, err := s.Adjust(ctx, "session-1", []string{"at-5", "at-4"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"at-5"}, deleted, "-5+1 is still below -3; -4+1 is not")
	got, err := s.Get(ctx, "at-4")
	require.NoError(t, err)
	assert.Equal(t, -3, got.Score)
}

// TestVotesNeverDeleteARejectedMemory: an operator rejects an approved
// memory while sessions that recalled it run; their harmful votes push it
// below -3 but never delete it, so its claim stays rejected rather than
// free to be proposed (and approved at once) again. Nor are memories
// without a status (read as proposed) deleted.
func TestVotesNeverDeleteARejectedMemory(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(35, 36))
	m := mustAdd(t, s, r, "m")
	for i := range 3 {
		_, err := s.Adjust(ctx, fmt.Sprint("inv-", i), nil, []string{m.ID})
		require.NoError(t, err)
	}
	_, err := s.Review(ctx, m.ID, StatusRejected)
	require.NoError(t, err)
	for i := range 3 {
		deleted, err := s.Adjust(ctx, fmt.Sprint("inv-late-", i), nil, []string{m.ID})
		require.NoError(t, err)
		assert.Empty(t, deleted)
	}
	got, err := s.Get(ctx, m.ID)
	require.NoError(t, err, "the rejected memory is still there")
	assert.Equal(t, StatusRejected, got.Status)
	assert.Equal(t, -6, got.Score)
	again, created, err := s.Propose(ctx, m.ID, testClaim("m"), "", toFloat32(unitVector(r)), StatusApproved)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, StatusRejected, again.Status, "the claim proposed again stays rejected")

	_, err = fs.Collection(Collection).Doc("legacy").Set(ctx, Memory{Claim: "legacy", Embedding: firestore.Vector32(toFloat32(unitVector(r))), Score: -5})
	require.NoError(t, err)
	deleted, err := s.Adjust(ctx, "inv-x", nil, []string{"legacy"})
	require.NoError(t, err)
	assert.Empty(t, deleted)
}

// TestStaleDeleteFails checks the Firestore behaviour that prune relies on:
// a commit that deletes a memory, conditioned on its update time, fails as a
// whole once the memory has changed, so its votes stay too.
func TestStaleDeleteFails(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	m, err := add(ctx, s, "m", "", toFloat32(unitVector(rand.New(rand.NewPCG(27, 28)))))
	require.NoError(t, err)
	ref := s.col.Doc(m.ID)
	snap, err := ref.Get(ctx)
	require.NoError(t, err)
	_, err = s.Adjust(ctx, "child-1", []string{m.ID}, nil)
	require.NoError(t, err)
	votes, err := ref.Collection(votesCollection).DocumentRefs(ctx).GetAll()
	require.NoError(t, err)
	require.Len(t, votes, 1)
	err = fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := tx.Delete(votes[0]); err != nil {
			return err
		}
		return tx.Delete(ref, firestore.LastUpdateTime(snap.UpdateTime))
	})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	_, err = s.Get(ctx, m.ID)
	require.NoError(t, err, "the memory is still there")
	_, err = votes[0].Get(ctx)
	require.NoError(t, err, "and so is its vote")
}

// TestAdjustConcurrent runs many sessions' votes at once, each sent twice
// (as a retry racing the attempt it replaces): every session counts exactly
// once.
func TestAdjustConcurrent(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(17, 18))
	up := mustAdd(t, s, r, "up")
	down := mustAdd(t, s, r, "down")

	const callers = 40
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		deletions []string
		errs      []error
	)
	start := make(chan struct{})
	vote := func(session string, helpful, harmful []string) {
		<-start
		d, err := s.Adjust(ctx, session, helpful, harmful)
		mu.Lock()
		defer mu.Unlock()
		deletions = append(deletions, d...)
		errs = append(errs, err)
	}
	for i := range 2 * callers {
		wg.Go(func() { vote(fmt.Sprint("up-", i%callers), []string{up.ID}, nil) })
		wg.Go(func() { vote(fmt.Sprint("down-", i%callers), nil, []string{down.ID}) })
	}
	close(start)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	got, err := s.Get(ctx, up.ID)
	require.NoError(t, err)
	assert.Equal(t, callers, got.Score, "every session's concurrent +1 counted once")
	assert.Len(t, voters(t, fs, up.ID), callers)

	// down fell below -3 during the run: exactly one caller deleted it, and
	// the later decrements did not bring it back.
	assert.Equal(t, []string{down.ID}, deletions)
	_, err = s.Get(ctx, down.ID)
	require.ErrorIs(t, err, ErrNotFound)
	docs, err := fs.Collection(Collection).Documents(ctx).GetAll()
	require.NoError(t, err)
	assert.Len(t, docs, 1)
	votes, err := fs.CollectionGroup(votesCollection).Documents(ctx).GetAll()
	require.NoError(t, err)
	assert.Len(t, votes, callers, "the deleted memory's votes went with it")
}

// TestAdjustOncePerSession covers retried activities: a session's vote on
// a memory counts once, however often it is sent, while votes from
// different sessions add up.
func TestAdjustOncePerSession(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(31, 32))
	a := mustAdd(t, s, r, "a")
	b := mustAdd(t, s, r, "b")
	score := func(id string) int {
		t.Helper()
		m, err := s.Get(ctx, id)
		require.NoError(t, err)
		return m.Score
	}

	for range 3 {
		_, err := s.Adjust(ctx, "child-1", []string{a.ID}, []string{b.ID})
		require.NoError(t, err)
	}
	assert.Equal(t, 1, score(a.ID), "a repeated helpful vote counts once")
	assert.Equal(t, -1, score(b.ID), "a repeated harmful vote counts once")

	// A retry with more IDs (the first attempt failed part way) counts only
	// the new ones; a changed vote of the same session is ignored too.
	c := mustAdd(t, s, r, "c")
	_, err := s.Adjust(ctx, "child-1", []string{a.ID, b.ID, c.ID}, nil)
	require.NoError(t, err)
	assert.Equal(t, []int{1, -1, 1}, []int{score(a.ID), score(b.ID), score(c.ID)})

	// Other sessions add up.
	_, err = s.Adjust(ctx, "child-2", []string{a.ID, b.ID}, nil)
	require.NoError(t, err)
	_, err = s.Adjust(ctx, "child-3", []string{a.ID}, nil)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 0}, []int{score(a.ID), score(b.ID)})

	// Session IDs need not be valid document IDs.
	_, err = s.Adjust(ctx, "child.4/x y", []string{a.ID}, nil)
	require.NoError(t, err)
	_, err = s.Adjust(ctx, "child.4/x y", []string{a.ID}, nil)
	require.NoError(t, err)
	assert.Equal(t, 4, score(a.ID))

	// Proposing the memory again keeps its votes.
	_, _, err = s.Propose(ctx, c.ID, testClaim("c again"), "", toFloat32(unitVector(r)), StatusApproved)
	require.NoError(t, err)
	_, err = s.Adjust(ctx, "child-1", []string{c.ID}, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, score(c.ID))

	assert.ElementsMatch(t, []string{"child-1", "child-2", "child-3", "child.4/x y"}, voters(t, fs, a.ID))

	_, err = s.Adjust(ctx, " ", []string{a.ID}, nil)
	require.ErrorContains(t, err, "the voter (the investigation's session) is empty")
	assert.Equal(t, 4, score(a.ID))
}

// TestAdjustRetryDoesNotPrune checks that a session repeating its harmful
// vote cannot push a memory below -3 on its own, while a new session can.
func TestAdjustRetryDoesNotPrune(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	m := mustAdd(t, s, rand.New(rand.NewPCG(33, 34)), "m")
	for i := range 3 {
		_, err := s.Adjust(ctx, fmt.Sprint("child-", i), nil, []string{m.ID})
		require.NoError(t, err)
	}
	for range 3 {
		deleted, err := s.Adjust(ctx, "child-2", nil, []string{m.ID})
		require.NoError(t, err)
		assert.Empty(t, deleted)
	}
	got, err := s.Get(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, -3, got.Score)
	require.Len(t, voters(t, fs, m.ID), 3)

	deleted, err := s.Adjust(ctx, "child-3", nil, []string{m.ID})
	require.NoError(t, err)
	assert.Equal(t, []string{m.ID}, deleted)
	_, err = s.Get(ctx, m.ID)
	require.ErrorIs(t, err, ErrNotFound)
	assert.Empty(t, voters(t, fs, m.ID), "the votes went with the memory")

	// A late retry neither recreates the memory nor leaves a vote behind.
	deleted, err = s.Adjust(ctx, "child-4", nil, []string{m.ID})
	require.NoError(t, err)
	assert.Empty(t, deleted)
	assert.Empty(t, voters(t, fs, m.ID))
	docs, err := fs.CollectionGroup(votesCollection).Documents(ctx).GetAll()
	require.NoError(t, err)
	assert.Empty(t, docs, "no vote anywhere outlived its memory")
}

// voters returns the sessions recorded as having voted on memory id.
func voters(t *testing.T, fs *firestore.Client, id string) []string {
	t.Helper()
	docs, err := fs.Collection(Collection).Doc(id).Collection(votesCollection).Documents(t.Context()).GetAll()
	require.NoError(t, err)
	out := []string{}
	for _, d := range docs {
		v, err := d.DataAt("session")
		require.NoError(t, err)
		out = append(out, v.(string))
	}
	return out
}

func TestList(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	r := rand.New(rand.NewPCG(19, 20))
	ids := map[string]string{}
	for _, name := range []string{"a", "b", "c", "d"} {
		m, err := add(ctx, s, name, "", toFloat32(unitVector(r)))
		require.NoError(t, err)
		ids[name] = m.ID
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	// Scores: a 0, b 2, c 0, d -1.
	_, err := s.Adjust(ctx, "session-1", []string{ids["b"]}, []string{ids["d"]})
	require.NoError(t, err)
	_, err = s.Adjust(ctx, "session-2", []string{ids["b"]}, nil)
	require.NoError(t, err)

	got, err := s.List(ctx, 0, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c", "a", "d"}, claims(got), "highest score first, then newest")
	assert.Equal(t, []int{2, 0, 0, -1}, []int{got[0].Score, got[1].Score, got[2].Score, got[3].Score})
	for _, m := range got {
		assert.Equal(t, ids[m.Claim], m.ID)
		assert.Nil(t, m.Embedding, "List leaves embeddings out")
	}

	got, err = s.List(ctx, 2, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c"}, claims(got))
}

// TestIndexFile checks that the shipped index definition matches the code.
func TestIndexFile(t *testing.T) {
	b, err := os.ReadFile("firestore.indexes.json")
	require.NoError(t, err)
	var f struct {
		Indexes []struct {
			CollectionGroup string `json:"collectionGroup"`
			QueryScope      string `json:"queryScope"`
			Fields          []struct {
				FieldPath    string `json:"fieldPath"`
				Order        string `json:"order"`
				VectorConfig *struct {
					Dimension int             `json:"dimension"`
					Flat      json.RawMessage `json:"flat"`
				} `json:"vectorConfig"`
			} `json:"fields"`
		} `json:"indexes"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	require.Len(t, f.Indexes, 2)
	vec := f.Indexes[0]
	assert.Equal(t, Collection, vec.CollectionGroup)
	assert.Equal(t, "COLLECTION", vec.QueryScope)
	require.Len(t, vec.Fields, 2, "the status pre-filter, then the vector")
	assert.Equal(t, "status", vec.Fields[0].FieldPath)
	assert.Equal(t, "ASCENDING", vec.Fields[0].Order)
	assert.Equal(t, embeddingField, vec.Fields[1].FieldPath)
	require.NotNil(t, vec.Fields[1].VectorConfig)
	assert.Equal(t, Dimensions, vec.Fields[1].VectorConfig.Dimension)
	assert.JSONEq(t, `{}`, string(vec.Fields[1].VectorConfig.Flat))
	list := f.Indexes[1]
	assert.Equal(t, Collection, list.CollectionGroup)
	require.Len(t, list.Fields, 2)
	assert.Equal(t, "score", list.Fields[0].FieldPath)
	assert.Equal(t, "DESCENDING", list.Fields[0].Order)
	assert.Equal(t, "created_at", list.Fields[1].FieldPath)
	assert.Equal(t, "DESCENDING", list.Fields[1].Order)
}

const (
	loadMemories = 1000
	loadClusters = 20
	// loadProposed more memories, proposed ones, lie closer to the centres
	// than any approved one: a search that filtered after taking the
	// nearest would find none of the approved.
	loadProposed = 200
)

// loadThousand writes loadMemories approved memories with BulkWriter, in
// loadClusters clusters of 50 around random centres, so that a query at a
// centre finds about 40 memories above the default threshold (more than the
// default limit), and loadProposed proposed ones nearer still; it returns
// the centres.
func loadThousand(tb testing.TB, s *Store, fs *firestore.Client) [][]float32 {
	tb.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(21, 22))
	centres := make([][]float64, loadClusters)
	for i := range centres {
		centres[i] = unitVector(r)
	}
	bw := fs.BulkWriter(ctx)
	now := time.Now().UTC().Truncate(time.Microsecond)
	var jobs []*firestore.BulkWriterJob
	for i := range loadMemories + loadProposed {
		sim := 0.75 + 0.24*r.Float64() // about 1 in 5 below 0.8
		st := StatusApproved
		if i >= loadMemories {
			sim, st = 0.995, StatusProposed
		}
		m := Memory{
			Claim:     fmt.Sprintf("claim %d: table_%d.column_%d is a STRING", i, i%50, i%7),
			Kind:      KindTypeFormat,
			Status:    st,
			QueryText: fmt.Sprintf("request %d", i),
			Embedding: atSimilarity(r, centres[i%loadClusters], sim, 1),
			Score:     r.IntN(7) - 3,
			CreatedAt: now,
			UpdatedAt: now,
		}
		job, err := bw.Create(s.col.NewDoc(), m)
		require.NoError(tb, err)
		jobs = append(jobs, job)
	}
	bw.End()
	for _, j := range jobs {
		_, err := j.Results()
		require.NoError(tb, err)
	}
	out := make([][]float32, len(centres))
	for i, c := range centres {
		out[i] = toFloat32(c)
	}
	return out
}

func TestRecallLatency1000(t *testing.T) {
	s, fs := newTestStore(t)
	ctx := t.Context()
	loadStart := time.Now()
	centres := loadThousand(t, s, fs)
	t.Logf("loaded %d approved and %d proposed memories with BulkWriter in %s", loadMemories, loadProposed, time.Since(loadStart).Round(time.Millisecond))

	// Warm-up (the emulator is a JVM), also a sanity check.
	const warmUp = 5
	for i := range warmUp {
		got, err := s.Recall(ctx, centres[i%len(centres)], 0, 0)
		require.NoError(t, err)
		require.Len(t, claims(got), DefaultRecallLimit)
		require.GreaterOrEqual(t, got[len(got)-1].Similarity, DefaultMinSimilarity)
		for _, m := range got {
			require.Equal(t, StatusApproved, m.Status, "the nearer proposals are never recalled")
		}
	}

	const runs = 20
	times := make([]time.Duration, runs)
	for i := range runs {
		start := time.Now()
		got, err := s.Recall(ctx, centres[(i+1)%len(centres)], 0, 0)
		times[i] = time.Since(start)
		require.NoError(t, err)
		require.NotEmpty(t, got)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	median := (times[runs/2-1] + times[runs/2]) / 2
	p95 := times[int(math.Ceil(0.95*runs))-1]
	t.Logf("REPORT recall over %d approved (and %d nearer proposed) memories: median %s p95 %s (min %s, max %s, %d runs after %d warm-up, limit %d, threshold %.1f)",
		loadMemories, loadProposed, median.Round(time.Microsecond), p95.Round(time.Microsecond),
		times[0].Round(time.Microsecond), times[runs-1].Round(time.Microsecond), runs, warmUp, DefaultRecallLimit, DefaultMinSimilarity)
}

func BenchmarkRecall1000(b *testing.B) {
	s, fs := newTestStore(b)
	centres := loadThousand(b, s, fs)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		got, err := s.Recall(ctx, centres[i%len(centres)], 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			b.Fatal("nothing recalled")
		}
		i++
	}
}

// TestRecallNeverReturnsMoreThan32: however large a limit Recall is given,
// it returns at most MaxRecallLimit (32) memories, each of which would ride
// in every sub-agent model call's input.
func TestRecallNeverReturnsMoreThan32(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := t.Context()
	q := unitVector(rand.New(rand.NewPCG(37, 38)))
	for i := range 40 {
		_, err := add(ctx, s, fmt.Sprint("m", i), "", toFloat32(q))
		require.NoError(t, err)
	}
	got, err := s.Recall(ctx, toFloat32(q), 0.8, 1000)
	require.NoError(t, err)
	assert.Len(t, got, 32)
}
