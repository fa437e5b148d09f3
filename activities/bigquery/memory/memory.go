// Package memory keeps the reusable technical knowledge that the BigQuery
// sub-agent learns ("auth_events.source_ip is a STRING; filter failed SSH
// with event_type = 'ssh_failed'") in the Firestore collection "memories",
// one document per memory, with a 768-dimensional embedding of the request
// that produced it.
//
// Before a session the sub-agent embeds its request and calls Store.Recall,
// a Firestore vector search (FindNearest, cosine distance, a similarity
// threshold, at most 32 results); after it, introspection calls Store.Add (or
// Store.Put, under an ID of its own so that a retry rewrites rather than
// duplicates) for new claims and Store.Adjust to score recalled memories as
// helpful (+1) or harmful (-1). Each session votes at most once on a memory
// (the vote is recorded in the memory's "votes" subcollection, so a retry
// changes nothing), and Adjust deletes memories whose score falls below -3,
// votes included.
//
// # Indexes
//
// Production Firestore needs a vector index on "embedding" for Recall, and a
// composite index on (score desc, created_at desc) for List. Both are in
// firestore.indexes.json next to this file (Firebase CLI format, deployed with
// `firebase deploy --only firestore:indexes`), or can be created with gcloud:
//
//	gcloud firestore indexes composite create --project=PROJECT --collection-group=memories --query-scope=COLLECTION --field-config=field-path=embedding,vector-config='{"dimension":"768","flat":"{}"}'
//	gcloud firestore indexes composite create --project=PROJECT --collection-group=memories --query-scope=COLLECTION --field-config=field-path=score,order=descending --field-config=field-path=created_at,order=descending
//
// Add --database=DATABASE for a database other than (default). The Firestore
// emulator needs no index.
package memory

import (
	"errors"
	"time"

	"cloud.google.com/go/firestore"
)

// Dimensions is the length of every embedding stored or searched for.
const Dimensions = 768

// Collection is the Firestore collection that holds the memories.
const Collection = "memories"

const (
	// DefaultMinSimilarity is the cosine similarity below which Recall drops
	// a memory when it is given a minimum similarity of 0.
	DefaultMinSimilarity = 0.8
	// DefaultRecallLimit is how many memories Recall returns at most when it
	// is given a limit of 0 or less.
	DefaultRecallLimit = 32
	// MaxRecallLimit is the largest limit Firestore's FindNearest accepts;
	// larger limits are lowered to it.
	MaxRecallLimit = 1000
	// PruneBelow is the score below which Adjust deletes a memory: a memory
	// at -3 stays, one at -4 goes.
	PruneBelow = -3

	defaultListLimit = 100
	maxListLimit     = 1000
)

// ErrNotFound is wrapped by Get and Delete when no memory has the given ID.
var ErrNotFound = errors.New("memory not found")

// Memory is one piece of reusable technical knowledge.
type Memory struct {
	ID        string             `firestore:"-" json:"id"`
	Claim     string             `firestore:"claim" json:"claim"`
	QueryText string             `firestore:"query_text" json:"query_text"`
	Embedding firestore.Vector32 `firestore:"embedding" json:"-"`
	Score     int                `firestore:"score" json:"score"`
	CreatedAt time.Time          `firestore:"created_at" json:"created_at"`
	UpdatedAt time.Time          `firestore:"updated_at" json:"updated_at"`
	// Similarity is set by Recall: 1 - the cosine distance between the
	// memory's embedding and the one searched for.
	Similarity float64 `firestore:"-" json:"similarity,omitempty"`
}
