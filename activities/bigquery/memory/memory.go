// Package memory keeps the reusable technical knowledge that the BigQuery
// sub-agent learns about the schema and SQL of its tables ("event_time is a
// TIMESTAMP in UTC") in the Firestore collection "memories", one document
// per memory, with a 768-dimensional embedding of its text.
//
// # Lifecycle
//
// A memory is learned only from what a session can prove and used only once
// a person approved it:
//
//   - proposed: after a session, introspection proposes typed claims
//     (Claim: kind, table, columns, text) that CheckClaim accepts against
//     the schemas the session read; Store.Propose keeps each under an ID
//     derived from its content, as StatusProposed, or StatusApproved when
//     the worker runs with --auto-approve-memories and ApprovableAtOnce
//     takes it (SQL about its own columns; never what a value or column
//     means). A claim proposed again
//     is the same memory, whatever its status: a rejected claim stays
//     rejected.
//   - approved or rejected: an operator decides (`starter memory approve
//     ID`, `starter memory reject ID`, Store.Review). Only approved
//     memories are recalled: Store.Recall is a Firestore vector search
//     (FindNearest, cosine distance, a similarity threshold, at most 32
//     results) pre-filtered on status == "approved".
//   - votes: introspection rates the memories its session was given as
//     helpful (+1) or harmful (-1), once per memory per investigation
//     (Store.Adjust records the vote of the parent's session in the
//     memory's "votes" subcollection, so a retry, or another sub-agent run
//     of the same investigation, changes nothing).
//   - pruned: Adjust deletes an approved memory whose score falls below
//     -3, votes included (never a rejected one: its claim stays rejected);
//     `starter memory delete ID` deletes one by hand.
//
// Documents written before memories had a status have none: they read as
// proposed (decode), so they are never recalled until approved, since they
// passed only the older word-list check.
//
// # Indexes
//
// Production Firestore needs a vector index on "embedding" with "status" as
// its pre-filter field for Recall, and a composite index on (score desc,
// created_at desc) for List. Both are in firestore.indexes.json next to this
// file (Firebase CLI format, deployed with `firebase deploy --only
// firestore:indexes`), or can be created with gcloud:
//
//	gcloud firestore indexes composite create --project=PROJECT --collection-group=memories --query-scope=COLLECTION --field-config=field-path=status,order=ascending --field-config=field-path=embedding,vector-config='{"dimension":"768","flat":"{}"}'
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
	// MaxRecallLimit is the most memories Recall returns, whatever limit
	// it is given: each recalled memory rides in every sub-agent model
	// call's input (--memory-recall-limit is bounded by it too).
	MaxRecallLimit = 32
	// PruneBelow is the score below which Adjust deletes a memory: a memory
	// at -3 stays, one at -4 goes.
	PruneBelow = -3

	defaultListLimit = 100
	maxListLimit     = 1000
	// listPage is how many memories List reads at a time when it picks
	// those of one status.
	listPage = 300
)

// ErrNotFound is wrapped by Get, Review and Delete when no memory has the
// given ID.
var ErrNotFound = errors.New("memory not found")

// Status is where a memory is in its lifecycle.
type Status string

const (
	// StatusProposed: learned, waiting for a person; never recalled.
	StatusProposed Status = "proposed"
	// StatusApproved: recalled, voted on, pruned.
	StatusApproved Status = "approved"
	// StatusRejected: kept so that the same claim is not proposed again;
	// never recalled.
	StatusRejected Status = "rejected"
)

// Memory is one piece of reusable technical knowledge.
type Memory struct {
	ID string `firestore:"-" json:"id"`
	// Claim is the text; Kind, Table and Columns say what it is about
	// (empty for memories stored before claims were typed).
	Claim   string   `firestore:"claim" json:"claim"`
	Kind    string   `firestore:"kind,omitempty" json:"kind,omitempty"`
	Table   string   `firestore:"table,omitempty" json:"table,omitempty"`
	Columns []string `firestore:"columns,omitempty" json:"columns,omitempty"`
	Status  Status   `firestore:"status" json:"status"`
	// QueryText is the request of the session that proposed it, which the
	// parent's model wrote from the alert: untrusted text, labelled so
	// wherever it is shown.
	QueryText string             `firestore:"query_text" json:"untrusted_request_text"`
	Embedding firestore.Vector32 `firestore:"embedding" json:"-"`
	Score     int                `firestore:"score" json:"score"`
	CreatedAt time.Time          `firestore:"created_at" json:"created_at"`
	UpdatedAt time.Time          `firestore:"updated_at" json:"updated_at"`
	// ReviewedAt is when a person last approved or rejected it.
	ReviewedAt *time.Time `firestore:"reviewed_at,omitempty" json:"reviewed_at,omitempty"`
	// Similarity is set by Recall: 1 - the cosine distance between the
	// memory's embedding and the one searched for.
	Similarity float64 `firestore:"-" json:"similarity,omitempty"`
}
