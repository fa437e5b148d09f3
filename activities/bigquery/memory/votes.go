package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Adjust records the votes of one voter: +1 to the score of each memory
// in helpful and -1 for each in harmful. It then deletes every voted-on
// approved memory whose score is below PruneBelow (-3) and returns the IDs
// it deleted, sorted.
//
// Each memory takes at most one vote per voter, so a retried call (a
// Temporal activity run again after a lost completion, or after some IDs
// failed) changes no score twice: the vote is a document
// memories/{id}/votes/{hash of voter}, created in the same atomic commit
// as the score's increment, and a commit whose vote already exists changes
// nothing. The sub-agent votes as its parent investigation (its session),
// not as its own run, since one alert can start several bigquery_agent
// calls that recall the same memory: four runs of one investigation must
// not delete a memory. voter must not be blank.
//
// Only an approved memory is deleted: votes on one that is not (rejected
// by an operator while a session that recalled it ran) still count, but a
// rejected memory stays, so its claim stays rejected and is not proposed
// (or approved at once) again.
//
// An ID listed more than once in the same list counts once; an ID in both
// lists nets to 0 and is left alone. IDs of memories that do not exist (any
// more) are ignored: no document is created for them. Each change is an
// atomic server-side increment, so votes from concurrent sessions all
// count. A memory is deleted, together with its votes, only if it is
// unchanged since its score and status were read (a precondition on its
// update time), so a concurrent increment that lifts it back to -3, or a
// review, keeps it, and of several callers that push it below -3 exactly
// one reports it deleted.
//
// Failures for some IDs do not stop the others: the error joins them all,
// and deleted lists what was deleted before and despite them.
func (s *Store) Adjust(ctx context.Context, voter string, helpful, harmful []string) (deleted []string, err error) {
	if strings.TrimSpace(voter) == "" {
		return nil, errors.New("adjust memories: the voter (the investigation's session) is empty")
	}
	deltas := map[string]int{}
	for _, id := range uniqueIDs(helpful) {
		deltas[id]++
	}
	for _, id := range uniqueIDs(harmful) {
		deltas[id]--
	}
	ids := make([]string, 0, len(deltas))
	for id, d := range deltas {
		if d != 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)

	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, adjustParallelism)
	)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			gone, err := s.adjustOne(ctx, id, voter, deltas[id])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if gone {
				deleted = append(deleted, id)
			}
		}()
	}
	wg.Wait()
	slices.Sort(deleted)
	if len(errs) > 0 {
		return deleted, fmt.Errorf("adjust memories: %w", errors.Join(errs...))
	}
	return deleted, nil
}

// adjustOne adds delta to the score of memory id, if it exists and voter
// has not voted on it yet, and then deletes it if it is approved and its
// score is below PruneBelow.
func (s *Store) adjustOne(ctx context.Context, id, voter string, delta int) (deleted bool, err error) {
	ref := s.col.Doc(id)
	sum := sha256.Sum256([]byte(voter))
	vote := ref.Collection(votesCollection).Doc(hex.EncodeToString(sum[:16]))
	// One commit, without reads (so without lock contention): Create fails
	// if the voter voted already, and Update if the memory does not
	// exist, and either failure leaves both documents as they were.
	err = s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := tx.Create(vote, map[string]any{"session": voter, "delta": delta, "at": firestore.ServerTimestamp}); err != nil {
			return err
		}
		return tx.Update(ref, []firestore.Update{
			{Path: "score", Value: firestore.Increment(delta)},
			{Path: "updated_at", Value: firestore.ServerTimestamp},
		})
	})
	switch status.Code(err) {
	case codes.NotFound:
		return false, nil
	case codes.OK, codes.AlreadyExists:
		// Counted now or before; a retry may still find it left below -3.
	default:
		return false, fmt.Errorf("memory %q: change the score by %+d: %w", id, delta, err)
	}
	deleted, err = s.prune(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("memory %q: %w", id, err)
	}
	return deleted, nil
}

// prune deletes the memory at ref, and its votes, if it is approved and
// its score is below PruneBelow. The memory and its votes go in one commit, so no vote
// outlives its memory, and the memory's delete carries a precondition that
// it is unchanged since its score and votes were read (optimistic
// concurrency, like a transaction that re-reads them, but without the lock
// contention that such transactions meet when parallel callers prune the
// same memory): every vote also updates the memory, so should another
// caller vote in between, the commit fails and both are read again.
func (s *Store) prune(ctx context.Context, ref *firestore.DocumentRef) (deleted bool, err error) {
	for range pruneAttempts {
		snap, err := ref.Get(ctx)
		if status.Code(err) == codes.NotFound {
			return false, nil // never there, or deleted by another caller
		}
		if err != nil {
			return false, fmt.Errorf("read the score: %w", err)
		}
		if score, ok := scoreOf(snap); !ok || score >= PruneBelow || !approved(snap) {
			return false, nil
		}
		votes, err := ref.Collection(votesCollection).DocumentRefs(ctx).GetAll()
		if err != nil {
			return false, fmt.Errorf("read the votes: %w", err)
		}
		err = s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			for _, v := range votes {
				if err := tx.Delete(v); err != nil {
					return err
				}
			}
			return tx.Delete(ref, firestore.LastUpdateTime(snap.UpdateTime))
		})
		switch status.Code(err) {
		case codes.OK:
			return true, nil
		case codes.FailedPrecondition, codes.NotFound, codes.Aborted:
			continue // changed or deleted meanwhile: look again
		}
		return false, fmt.Errorf("delete below score %d: %w", PruneBelow, err)
	}
	return false, fmt.Errorf("delete below score %d: the memory kept changing over %d attempts", PruneBelow, pruneAttempts)
}

// approved says whether the memory read is approved: only such a memory is
// recalled, so only its votes may delete it.
func approved(snap *firestore.DocumentSnapshot) bool {
	v, err := snap.DataAt("status")
	return err == nil && v == string(StatusApproved)
}
