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

// List returns up to limit memories, highest score first and, among equal
// scores, newest first, without their embeddings. A limit of 0 or less
// means 100; at most 1000 are returned.
func (s *Store) List(ctx context.Context, limit int) ([]Memory, error) {
	if limit <= 0 {
		limit = defaultListLimit
	}
	limit = min(limit, maxListLimit)
	docs, err := s.col.Select(listFields...).
		OrderBy("score", firestore.Desc).
		OrderBy("created_at", firestore.Desc).
		Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("list memories: %w", err)
	}
	out := make([]Memory, 0, len(docs))
	for _, d := range docs {
		m, err := decode(d)
		if err != nil {
			return nil, fmt.Errorf("list memories: %w", err)
		}
		out = append(out, m)
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
