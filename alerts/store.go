package alerts

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/internal/clip"
)

// collection is the Firestore collection that holds alerts, one document
// per alert, keyed by Alert.ID.
const collection = "alerts"

const (
	defaultLimit   = 10
	maxSearchLimit = 100
	maxListLimit   = 1000
	maxIn          = 30 // values in "in" and "array-contains-any" (Firestore's limit)
	maxNotIn       = 10 // values in "not-in" (Firestore's limit)
)

// ErrInvalidQuery is wrapped by Search when the query itself is wrong (bad
// field, operator or value), as opposed to a failure of the store.
var ErrInvalidQuery = errors.New("invalid alert query")

// Operators are the comparison operators that Search accepts.
var Operators = []string{"==", "!=", "<", "<=", ">", ">=", "array-contains", "array-contains-any", "in", "not-in"}

// topLevelFields are the normalised fields a query may name with "@".
var topLevelFields = []string{"source", "type", "severity", "title"}

// Store keeps alerts in Firestore.
type Store struct {
	fs  *firestore.Client
	col *firestore.CollectionRef
}

// NewStore returns a store over the "alerts" collection of fs.
func NewStore(fs *firestore.Client) *Store {
	return &Store{fs: fs, col: fs.Collection(collection)}
}

// Put stores a, with the keys of its data's indicators (IndexKeys, whatever
// a.Indicators held). When a.ImportedAt is zero, Put keeps the import time
// of the alert already stored under that ID, or uses the current time for
// a new one; so importing the same alert again changes nothing, except
// that an alert stored before indicator keys existed gets them. Another
// alert's content stored under the ID is left as it is, and Put fails with
// an error wrapping ErrIDTaken; an alert Firestore refuses as invalid with
// one wrapping ErrUnstorable.
func (s *Store) Put(ctx context.Context, a Alert) error {
	if err := checkID(a.ID); err != nil {
		return err
	}
	doc, err := newDocument(a)
	if err != nil {
		return err
	}
	doc.ImportedAt = doc.ImportedAt.UTC().Truncate(time.Microsecond)
	ref := s.col.Doc(a.ID)
	var taken error
	err = s.fs.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		b := doc
		taken = nil
		snap, err := tx.Get(ref)
		switch {
		case err == nil:
			if taken = checkSame(snap, b.SHA256); taken != nil {
				return taken
			}
			if t, ok := snap.Data()["imported_at"].(time.Time); ok && b.ImportedAt.IsZero() {
				b.ImportedAt = t
			}
		case status.Code(err) != codes.NotFound:
			return err
		}
		if b.ImportedAt.IsZero() {
			b.ImportedAt = time.Now().UTC().Truncate(time.Microsecond)
		}
		return tx.Set(ref, b)
	})
	switch {
	case taken != nil:
		return taken
	case err != nil:
		return writeError(a.ID, err)
	}
	return nil
}

// Get returns the alert with the given ID; the error wraps ErrNotFound when
// there is none. An alert stored without indicator keys (before they
// existed) gets them: in the alert returned, and written back to the store
// on the way, so that searches by indicator find it from then on.
func (s *Store) Get(ctx context.Context, id string) (Alert, error) {
	if strings.TrimSpace(id) == "" {
		return Alert{}, errors.New("the alert ID is empty")
	}
	if checkID(id) != nil {
		// Such an ID can never have been stored.
		return Alert{}, notFoundError{id}
	}
	snap, err := s.col.Doc(id).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return Alert{}, notFoundError{id}
	}
	if err != nil {
		return Alert{}, fmt.Errorf("read alert %q: %w", id, err)
	}
	a, err := decode(snap)
	if err == nil && !hasKeys(snap) {
		// Best effort: a failed write leaves the alert as it was, and the
		// next read tries again.
		_, _ = snap.Ref.Update(ctx, []firestore.Update{{Path: "indicators", Value: a.Indicators}},
			firestore.LastUpdateTime(snap.UpdateTime))
	}
	return a, err
}

// hasKeys says the stored document has its indicator keys.
func hasKeys(snap *firestore.DocumentSnapshot) bool {
	_, err := snap.DataAt("indicators")
	return err == nil
}

// List returns up to limit alerts, most recently imported first. A limit of
// zero or less means 10; at most 1000 are returned.
func (s *Store) List(ctx context.Context, limit int) ([]Alert, error) {
	limit = clampLimit(limit, maxListLimit)
	docs, err := s.col.OrderBy("imported_at", firestore.Desc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	return decodeAll(docs)
}

// Query is one condition on stored alerts.
type Query struct {
	// Field is a dotted path under the alert's data, e.g.
	// "service.action.actionType"; a key that contains a dot is written
	// between backticks, e.g. "labels.`app.kubernetes.io/name`". With an "@"
	// prefix it names a normalised field instead: "@source", "@type",
	// "@severity" or "@title".
	Field string
	// Op is one of Operators.
	Op string
	// Value is a string, finite number (int64 or float64, compared
	// numerically with stored numbers) or boolean; for "in", "not-in" and
	// "array-contains-any" a non-empty []any of them. nil works with "==" and
	// "!=" (a null field).
	Value any
	// Limit is the most alerts to return: default 10, at most 100.
	Limit int
	// Offset is how many matching alerts to skip.
	Offset int
	// Indicators, instead of Field, Op and Value, finds the alerts that
	// hold any of these indicator keys (SearchKeys makes them from a value),
	// at most 30.
	Indicators []string
}

// Search returns the alerts whose field matches the query's condition, in
// Firestore's order for it (by document ID, or by the field's value for
// range operators). Errors in the query wrap ErrInvalidQuery. Like Firestore,
// "!=" and "not-in" only match alerts that have the field.
//
// A query by Indicators finds the alerts holding any of the keys, in
// document order; alerts stored before indicator keys existed are found
// only once they have been read (Get) or imported again (Put).
func (s *Store) Search(ctx context.Context, q Query) ([]Alert, error) {
	if q.Offset < 0 {
		return nil, invalidf("the offset must not be negative, got %d", q.Offset)
	}
	var (
		query firestore.Query
		what  string
	)
	if len(q.Indicators) > 0 {
		switch {
		case q.Field != "" || q.Op != "" || q.Value != nil:
			return nil, invalidf("search by indicator or by field, not both")
		case len(q.Indicators) > maxIn:
			return nil, invalidf("at most %d indicator keys, got %d", maxIn, len(q.Indicators))
		}
		keys := make([]any, len(q.Indicators))
		for i, k := range q.Indicators {
			keys[i] = k
		}
		query = s.col.Where("indicators", "array-contains-any", keys)
		what = "holding " + strings.Join(q.Indicators, ", ")
	} else {
		path, err := queryPath(q.Field)
		if err != nil {
			return nil, err
		}
		value, err := queryValue(q.Op, q.Value)
		if err != nil {
			return nil, err
		}
		query = s.col.WherePath(path, q.Op, value)
		what = fmt.Sprintf("where %s %s %v", q.Field, q.Op, q.Value)
	}
	query = query.Limit(clampLimit(q.Limit, maxSearchLimit))
	if q.Offset > 0 {
		query = query.Offset(q.Offset)
	}
	docs, err := query.Documents(ctx).GetAll()
	if status.Code(err) == codes.InvalidArgument {
		// A query Firestore refuses stays refused: the caller (a model)
		// should read why and change it, not retry it.
		return nil, invalidf("Firestore refused the search: %s", clip.String(status.Convert(err).Message(), 300))
	}
	if err != nil {
		return nil, fmt.Errorf("search alerts %s: %w", what, err)
	}
	return decodeAll(docs)
}

// queryPath turns a query field into a Firestore field path.
func queryPath(field string) (firestore.FieldPath, error) {
	field = strings.TrimSpace(field)
	if field == "" {
		return nil, invalidf("the search field is empty")
	}
	if name, ok := strings.CutPrefix(field, "@"); ok {
		for _, f := range topLevelFields {
			if name == f {
				return firestore.FieldPath{f}, nil
			}
		}
		return nil, invalidf("unknown field %q: the fields with @ are @source, @type, @severity and @title", field)
	}
	segs, err := splitPath(field)
	if err != nil {
		return nil, err
	}
	return append(firestore.FieldPath{"data"}, segs...), nil
}

// splitPath splits a dotted path; a segment between backticks may contain
// dots, and inside backticks a backslash escapes the next character. A
// segment of the form __name__ is refused: Firestore reserves it (no
// alert field has one, checkStorable refuses them).
func splitPath(field string) ([]string, error) {
	segs, err := splitSegments(field)
	if err != nil {
		return nil, err
	}
	for _, seg := range segs {
		if reservedName(seg) {
			return nil, invalidf("the search field %q names %q, a name of the form __name__, which Firestore reserves and no alert has", field, seg)
		}
	}
	return segs, nil
}

// reservedName says Firestore reserves a field name (__.*__).
func reservedName(k string) bool {
	return len(k) >= 4 && strings.HasPrefix(k, "__") && strings.HasSuffix(k, "__")
}

func splitSegments(field string) ([]string, error) {
	var segs []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(field); i++ {
		c := field[i]
		switch {
		case quoted && c == '\\' && i+1 < len(field):
			i++
			cur.WriteByte(field[i])
		case c == '`':
			quoted = !quoted
		case c == '.' && !quoted:
			if cur.Len() == 0 {
				return nil, invalidf("the search field %q has an empty segment", field)
			}
			segs = append(segs, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	if quoted {
		return nil, invalidf("the search field %q has an unclosed backtick", field)
	}
	if cur.Len() == 0 {
		return nil, invalidf("the search field %q has an empty segment", field)
	}
	return append(segs, cur.String()), nil
}

// queryValue checks op and the value's shape for it, and converts Go
// integers and []string to the types alerts are stored with.
func queryValue(op string, v any) (any, error) {
	known := false
	for _, o := range Operators {
		if op == o {
			known = true
			break
		}
	}
	if !known {
		return nil, invalidf("unknown operator %q: use one of %s", op, strings.Join(Operators, ", "))
	}
	switch op {
	case "in", "not-in", "array-contains-any":
		list, ok := toList(v)
		if !ok || len(list) == 0 {
			return nil, invalidf("the %q operator needs a non-empty list of values", op)
		}
		limit := maxIn
		if op == "not-in" {
			limit = maxNotIn
		}
		if len(list) > limit {
			return nil, invalidf("the %q operator accepts at most %d values, got %d", op, limit, len(list))
		}
		for i, e := range list {
			s, ok, notFinite := toScalar(e)
			if notFinite {
				return nil, invalidf("value %d of the %q list is %v: compare with a finite number", i+1, op, e)
			}
			if !ok || s == nil {
				return nil, invalidf("value %d of the %q list must be a string, number or boolean, got %s", i+1, op, goKind(e))
			}
			list[i] = s
		}
		return list, nil
	}
	s, ok, notFinite := toScalar(v)
	if notFinite {
		return nil, invalidf("the value %v is not a finite number: compare with a finite number", v)
	}
	if !ok {
		return nil, invalidf("the %q operator needs a single string, number or boolean value, got %s", op, goKind(v))
	}
	if s == nil && op != "==" && op != "!=" {
		return nil, invalidf("the %q operator needs a string, number or boolean value, got null", op)
	}
	return s, nil
}

func toList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return append([]any(nil), x...), true
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true
	case []float64:
		out := make([]any, len(x))
		for i, f := range x {
			out[i] = f
		}
		return out, true
	}
	return nil, false
}

// toScalar accepts strings, booleans, nil and finite numbers: integers
// become int64 and other numbers float64, the types alerts are stored with
// (Firestore compares the two numerically). ok is false for anything else;
// notFinite says the number was NaN or infinite, which matches no alert.
func toScalar(v any) (s any, ok, notFinite bool) {
	switch x := v.(type) {
	case nil, string, bool, int64:
		return x, true, false
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, false, true
		}
		return x, true, false
	case float32:
		return toScalar(float64(x))
	case int:
		return int64(x), true, false
	case int32:
		return int64(x), true, false
	}
	return nil, false, false
}

func goKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any, []string, []float64:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

func invalidf(format string, args ...any) error {
	return &invalidQueryError{msg: fmt.Sprintf(format, args...)}
}

type invalidQueryError struct{ msg string }

func (e *invalidQueryError) Error() string { return e.msg }
func (e *invalidQueryError) Unwrap() error { return ErrInvalidQuery }

type notFoundError struct{ id string }

func (e notFoundError) Error() string { return fmt.Sprintf("alert %q not found", e.id) }
func (e notFoundError) Unwrap() error { return ErrNotFound }

// checkID rejects IDs that cannot name a Firestore document.
func checkID(id string) error {
	switch {
	case id == "":
		return errors.New("the alert has no ID; parse it with alerts.Parse first")
	case strings.Contains(id, "/"), id == ".", id == "..", len(id) > 1500,
		len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"):
		return fmt.Errorf("alert ID %q is not valid", id)
	}
	return nil
}

func clampLimit(limit, most int) int {
	if limit <= 0 {
		return defaultLimit
	}
	return min(limit, most)
}

// decode reads a stored alert; one stored before indicator keys existed
// gets them, from its data.
func decode(snap *firestore.DocumentSnapshot) (Alert, error) {
	var a Alert
	if err := snap.DataTo(&a); err != nil {
		return Alert{}, fmt.Errorf("decode alert %q: %w", snap.Ref.ID, err)
	}
	if a.ID == "" {
		a.ID = snap.Ref.ID
	}
	if !hasKeys(snap) {
		a.Indicators = IndexKeys(Indicators(a.Data))
	}
	return a, nil
}

func decodeAll(docs []*firestore.DocumentSnapshot) ([]Alert, error) {
	out := make([]Alert, 0, len(docs))
	for _, d := range docs {
		a, err := decode(d)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
