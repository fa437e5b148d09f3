package alerts

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNumberKeepsEveryDigit(t *testing.T) {
	for lit, want := range map[string]any{
		"0":                        int64(0),
		"42":                       int64(42),
		"-7":                       int64(-7),
		"9007199254740993":         int64(9007199254740993), // 2^53+1: float64 would read 9007199254740992
		"9223372036854775807":      int64(math.MaxInt64),
		"-9223372036854775808":     int64(math.MinInt64),
		"9223372036854775808":      "9223372036854775808", // past int64, and float64 rounds it
		"123456789012345678901234": "123456789012345678901234",
		"100000000000000000000":    1e20, // past int64, but a float64 holds it exactly
		"1.5":                      1.5,
		"0.1":                      0.1,      // the float's shortest form is 0.1 again
		"1.0":                      int64(1), // whole: the same as 1
		"1e3":                      int64(1000),
		"-2E2":                     int64(-200),
		"-12.25E-3":                -0.01225,
		"2.5e-300":                 2.5e-300,
		"1.7976931348623157e308":   math.MaxFloat64,
		"0.30000000000000004":      0.30000000000000004,
		"0.1000000000000000000001": "0.1000000000000000000001",
		"1e999":                    "1e999",
		"-1e999":                   "-1e999",
		"1e-400":                   "1e-400", // underflows to 0
		"0e99999999999999999999":   0.0,      // zero, whatever the exponent
		"9.2233720368547758e18":    "9.2233720368547758e18",
		"1e99999999999999999999":   "1e99999999999999999999",
		"0.0":                      0.0,
	} {
		got := Number(lit)
		assert.Equal(t, want, got, "Number(%s)", lit)
	}
	negZero, ok := Number("-0").(float64)
	require.True(t, ok, "-0 stays the float it always decoded to")
	assert.True(t, math.Signbit(negZero))
}

func TestDecodeJSONExactNumbersAndDuplicates(t *testing.T) {
	v, err := DecodeJSON([]byte(`{"id": 1234567890123456789, "n": [1, 2.5, 1e400], "s": "x", "b": true, "z": null, "o": {}}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"id": int64(1234567890123456789),
		"n":  []any{int64(1), 2.5, "1e400"},
		"s":  "x", "b": true, "z": nil, "o": map[string]any{},
	}, v)

	for in, want := range map[string]string{
		`{"type":"a","type":"b"}`:                         `the alert has the key "type" twice at the top level`,
		`{"detail":{"type":"a","x":1,"type":"a"}}`:        `the alert has the key "type" twice at "detail"`,
		`{"a":[{"b":1},{"c":{"k":1,"k":2}}]}`:             `the alert has the key "k" twice at "a[1].c"`,
		`{"a":1,"\u0061":2}`:                              `the alert has the key "a" twice at the top level`,
		"{\"x\":{\"line\\nbreak\":1,\"line\\nbreak\":2}}": `the alert has the key "line\nbreak" twice at "x"`,
	} {
		_, err := DecodeJSON([]byte(in))
		require.Error(t, err, in)
		assert.Equal(t, want, err.Error(), in)
	}
}

// Parse refuses duplicate keys with the same sentence, and keeps exact
// numbers through the canonical JSON that names the alert.
func TestParseExactAlert(t *testing.T) {
	_, err := Parse([]byte(`{"detail-type":"GuardDuty Finding","detail":{"type":"A","severity":5,"type":"B"}}`))
	require.EqualError(t, err, `the alert has the key "type" twice at "detail"`)

	a, err := Parse([]byte(`{"type":"x","eventId":9007199254740993,"big":123456789012345678901234567890,"severity":8}`))
	require.NoError(t, err)
	assert.Equal(t, int64(9007199254740993), a.Data["eventId"])
	assert.Equal(t, "123456789012345678901234567890", a.Data["big"])
	assert.Equal(t, SeverityHigh, a.Severity, "an int64 severity is read like a float one")
	b, err := Parse([]byte(`{"type":"x","eventId":9007199254740992,"big":123456789012345678901234567890,"severity":8}`))
	require.NoError(t, err)
	assert.NotEqual(t, a.ID, b.ID, "IDs that differ past 2^53 are different alerts")

	c, err := Parse([]byte(`{"type":"x","createdAt":1763600000123456789}`))
	require.NoError(t, err)
	assert.Equal(t, int64(1763600000123456), c.ObservedAt.UnixMicro(), "epoch nanoseconds are read exactly")
}

func TestParseNumber(t *testing.T) {
	for in, want := range map[string]any{"7": int64(7), "+7": int64(7), " -2.5 ": -2.5, "1e3": int64(1000), "9007199254740993": int64(9007199254740993)} {
		got, err := ParseNumber(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"NaN", "nan", "+Inf", "-Inf", "Inf", "infinity", "1e999", "-1e999"} {
		_, err := ParseNumber(in)
		assert.ErrorIs(t, err, ErrNotFinite, in)
	}
	for _, in := range []string{"123456789012345678901234", "0.1000000000000000000001", "1e-400"} {
		_, err := ParseNumber(in)
		assert.ErrorIs(t, err, ErrInexact, in)
	}
	for _, in := range []string{"", "x", "0x10", "1_000", `"7"`, "07", "1.", ".5", "[1]"} {
		_, err := ParseNumber(in)
		require.Error(t, err, in)
		assert.False(t, errors.Is(err, ErrNotFinite) || errors.Is(err, ErrInexact), in)
	}
}

// Search refuses NaN and infinities as an invalid query (never sent to
// Firestore, never retried).
func TestSearchRejectsNonFiniteNumbers(t *testing.T) {
	s := &Store{}
	for _, q := range []Query{
		{Field: "severity", Op: "==", Value: math.NaN()},
		{Field: "severity", Op: ">", Value: math.Inf(1)},
		{Field: "severity", Op: "<", Value: float32(math.Inf(-1))},
		{Field: "severity", Op: "in", Value: []any{1.0, math.NaN()}},
	} {
		_, err := s.Search(t.Context(), q)
		require.ErrorIs(t, err, ErrInvalidQuery, "%v", q.Value)
		assert.Contains(t, err.Error(), "finite number")
	}
}

// The canonical JSON of an alert with every number form decodes back to
// the same values (a stored alert re-parsed keeps its ID).
func TestExactNumbersRoundTrip(t *testing.T) {
	a, err := Parse([]byte(numbersAlert))
	require.NoError(t, err)
	canonical, err := json.Marshal(a.Data)
	require.NoError(t, err)
	again, err := Parse(canonical)
	require.NoError(t, err)
	assert.Equal(t, a.ID, again.ID)
	assert.Equal(t, a.Data, again.Data)
}
