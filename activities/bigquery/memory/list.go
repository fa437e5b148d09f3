package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// List returns up to limit memories with the given status (any status
// when it is ""), highest score first and, among equal scores, newest
// first, without their embeddings. A limit of 0 or less means 100; at most
// 1000 are returned. Memories stored before memories had a status count as
// proposed.
//
// With a status, List reads the collection in that order a page at a time
// and keeps the matching ones, since a Firestore query cannot find the
// documents that lack the field; the collection is an operator's review
// list, small next to what a page holds.
func (s *Store) List(ctx context.Context, limit int, status Status) ([]Memory, error) {
	if limit <= 0 {
		limit = defaultListLimit
	}
	limit = min(limit, maxListLimit)
	q := s.col.Select(listFields...).OrderBy("score", firestore.Desc).OrderBy("created_at", firestore.Desc)
	page := limit
	if status != "" {
		page = listPage
	}
	out := make([]Memory, 0, min(limit, page))
	var last *firestore.DocumentSnapshot
	for len(out) < limit {
		pq := q.Limit(page)
		if last != nil {
			pq = pq.StartAfter(last)
		}
		docs, err := pq.Documents(ctx).GetAll()
		if err != nil {
			return nil, fmt.Errorf("list memories: %w", err)
		}
		for _, d := range docs {
			m, err := decode(d)
			if err != nil {
				return nil, fmt.Errorf("list memories: %w", err)
			}
			if (status == "" || m.Status == status) && len(out) < limit {
				out = append(out, m)
			}
		}
		if len(docs) < page {
			break
		}
		last = docs[len(docs)-1]
	}
	return out, nil
}

// Get returns the memory with the given ID, embedding included; the error
// wraps ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, id string) (Memory, error) {
	if strings.TrimSpace(id) == "" {
		return Memory{}, errors.New("get memory: the ID is empty")
	}
	if !validID(id) {
		return Memory{}, notFoundError{id} // such an ID can never have been stored
	}
	snap, err := s.col.Doc(id).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return Memory{}, notFoundError{id}
	}
	if err != nil {
		return Memory{}, fmt.Errorf("get memory %q: %w", id, err)
	}
	return decode(snap)
}

// Delete deletes the memory with the given ID; the error wraps ErrNotFound
// when there is none.
func (s *Store) Delete(ctx context.Context, id string) error {
	if strings.TrimSpace(id) == "" {
		return errors.New("delete memory: the ID is empty")
	}
	if !validID(id) {
		return notFoundError{id}
	}
	_, err := s.col.Doc(id).Delete(ctx, firestore.Exists)
	if status.Code(err) == codes.NotFound {
		return notFoundError{id}
	}
	if err != nil {
		return fmt.Errorf("delete memory %q: %w", id, err)
	}
	return nil
}
