package alerts

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Create stores a new alert, with its indicator keys and the current time
// as its import time, in one write and without a transaction: the ID is
// the content, so an alert already stored under it is the same alert and
// is left as it is (created is false). The intake stores every message
// this way: a burst delivering one alert many times at once never makes
// transactions contend for its document.
func (s *Store) Create(ctx context.Context, a Alert) (created bool, err error) {
	if err := checkID(a.ID); err != nil {
		return false, err
	}
	a.Indicators = IndexKeys(Indicators(a.Data))
	if a.ImportedAt.IsZero() {
		a.ImportedAt = time.Now().UTC().Truncate(time.Microsecond)
	}
	_, err = s.col.Doc(a.ID).Create(ctx, a)
	switch {
	case status.Code(err) == codes.AlreadyExists:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store alert %q: %w", a.ID, err)
	}
	return true, nil
}
