package alerts

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// usersAlert is an alert whose 100 DOMAIN\user names of about 500 bytes
// make 200 indicator keys (about 100 KB) beside a pad of padBytes.
func usersAlert(padBytes int) string {
	var users []string
	for i := range 100 {
		users = append(users, fmt.Sprintf("%q", fmt.Sprintf(`CORP\%s%03d`, strings.Repeat("u", 490), i)))
	}
	return `{"userName":[` + strings.Join(users, ",") + `],"pad":"` + strings.Repeat("x", padBytes) + `"}`
}

// The indicator keys Create adds count towards the 1 MiB document: an
// alert whose data fits but whose document would not is refused by Parse,
// not by Firestore (which the intake took for an outage, forever). One
// just under the estimate's bound is stored: the estimate is not short.
func TestParseCountsIndicatorKeysInTheDocument(t *testing.T) {
	raw := usersAlert(940000)
	require.LessOrEqual(t, len(raw), MaxBytes)
	_, err := Parse([]byte(raw))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the alert is too large to store: with its 200 indicator keys it needs about")

	// The largest pad Parse accepts.
	lo, hi := 0, 940000
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if _, err := Parse([]byte(usersAlert(mid))); err == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	a, err := Parse([]byte(usersAlert(lo)))
	require.NoError(t, err)
	require.Len(t, IndexKeys(Indicators(a.Data)), 200)
	s := newTestStore(t)
	created, err := s.Create(t.Context(), a)
	require.NoError(t, err, "what Parse accepts, Create stores")
	require.True(t, created)
	require.NoError(t, s.Put(t.Context(), a))
}

// Firestore indexes at most 40,000 entries of a document; the emulator
// stores more, production refuses them. Parse refuses them first.
func TestParseBoundsIndexEntries(t *testing.T) {
	fields := func(n int) []byte {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"f%d":%d`, i, i)
		}
		b.WriteString("}")
		return []byte(b.String())
	}
	_, err := Parse(fields(25000))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the alert has too many fields and array values to store")
	_, err = Parse(fields(19000))
	require.NoError(t, err)

	// Array values count once each, however often they repeat.
	var distinct []string
	for i := range 45000 {
		distinct = append(distinct, fmt.Sprint(i))
	}
	_, err = Parse([]byte(`{"n":[` + strings.Join(distinct, ",") + `]}`))
	require.Error(t, err)
	_, err = Parse([]byte(`{"n":[` + strings.TrimSuffix(strings.Repeat("1,", 120000), ",") + `]}`))
	require.NoError(t, err)
}

// An alert Firestore refuses as invalid (here one not from Parse) is an
// error wrapping ErrUnstorable from Create and Put, not one a retry mends.
func TestStoreMapsInvalidArgumentToUnstorable(t *testing.T) {
	s := newTestStore(t)
	a := Alert{ID: "generic-0123456789ab", Source: SourceGeneric, Data: map[string]any{"pad": strings.Repeat("x", 1100000)}}
	_, err := s.Create(t.Context(), a)
	require.ErrorIs(t, err, ErrUnstorable)
	assert.Contains(t, err.Error(), "Firestore refused to store alert generic-0123456789ab: ")
	err = s.Put(t.Context(), a)
	require.ErrorIs(t, err, ErrUnstorable)
}

// Two alerts with one ID (48 bits of the content's hash: a pair takes 2^24
// work to find) are two alerts: the second is refused by Create and by
// Put, and the first stays as it was, also when it was stored before the
// document held its full hash.
func TestStoreRefusesAnotherAlertUnderTheSameID(t *testing.T) {
	first, err := Parse([]byte(`{"id":"a-1","title":"odd login","src_ip":"203.0.113.4"}`))
	require.NoError(t, err)
	other, err := Parse([]byte(`{"id":"a-2","title":"malware","src_ip":"198.51.100.9"}`))
	require.NoError(t, err)
	other.ID = first.ID // as a collision would make it

	for _, old := range []bool{false, true} {
		t.Run(fmt.Sprintf("stored before the hash: %v", old), func(t *testing.T) {
			s := newTestStore(t)
			ctx := t.Context()
			if old {
				// A document as Put wrote it before the hash was stored.
				first.Indicators = IndexKeys(Indicators(first.Data))
				_, err := s.col.Doc(first.ID).Set(ctx, first)
				require.NoError(t, err)
			} else {
				created, err := s.Create(ctx, first)
				require.NoError(t, err)
				require.True(t, created)
			}
			created, err := s.Create(ctx, first)
			require.NoError(t, err, "the same alert again")
			require.False(t, created)

			_, err = s.Create(ctx, other)
			require.ErrorIs(t, err, ErrIDTaken)
			assert.Equal(t, `an alert with the same ID but different content is stored: `+first.ID+`, so this alert was not stored`, err.Error())
			err = s.Put(ctx, other)
			require.ErrorIs(t, err, ErrIDTaken)

			got, err := s.Get(ctx, first.ID)
			require.NoError(t, err)
			assert.Equal(t, "a-1", got.Data["id"], "the stored alert is the first")
			require.NoError(t, s.Put(ctx, first), "the same alert again")
		})
	}
}

// A reserved field name (__name__) is a query Firestore refuses: Search
// says so as an invalid query (the model reads it), without asking.
func TestSearchRefusesReservedNames(t *testing.T) {
	s := &Store{} // validation happens before any Firestore call
	for _, f := range []string{"__name__", "`__name__`", "a.__x__", "a.`__x.y__`"} {
		_, err := s.Search(t.Context(), Query{Field: f, Op: "==", Value: "x"})
		require.ErrorIs(t, err, ErrInvalidQuery, f)
		assert.Contains(t, err.Error(), "which Firestore reserves", f)
	}
}

// A query Firestore itself refuses (InvalidArgument) is an invalid query
// too, not an outage to retry.
func TestSearchMapsInvalidArgumentToInvalidQuery(t *testing.T) {
	s := newTestStore(t)
	_, err := s.Search(t.Context(), Query{Field: strings.Repeat("a", 2000), Op: "==", Value: "x"})
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrInvalidQuery), "%v", err)
}
