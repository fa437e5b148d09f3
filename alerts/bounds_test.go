package alerts

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/clip"
)

// Memory bounds on hostile alerts. The limits asserted here are behaviour
// (how much a 1 MiB input may cost), measured by the runtime's allocation
// counters, not timings.

// maxAlertAlloc is what reading and describing any alert of at most MaxBytes
// may allocate in all: parsing, its indicators and its field guide.
const maxAlertAlloc = 64 << 20

// allocated returns the bytes f allocates (TotalAlloc: everything, freed or
// not, so an upper bound of its peak).
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// nestedObjects is depth objects one inside the other, each under a key of
// keyLen bytes: {"kkk…":{"kkk…":…1…}}.
func nestedObjects(depth, keyLen int) []byte {
	var b bytes.Buffer
	open := `{"` + strings.Repeat("k", keyLen) + `":`
	for range depth {
		b.WriteString(open)
	}
	b.WriteString("1")
	b.WriteString(strings.Repeat("}", depth))
	return b.Bytes()
}

// Depth over the limit is refused while decoding, before any work per
// level: the cost does not grow with the depth. Before, decoding built a
// path string at every level and checked depth only after decoding the
// whole document: 98-byte keys took 46, 188 and 773 MiB at depth 1,000,
// 2,000 and 4,000, and 4.4 GiB at 10,000.
func TestDeepAlertsAreRefusedWithoutWorkPerLevel(t *testing.T) {
	cases := []struct {
		name string
		raw  []byte
	}{
		{"depth 1,000, 98-byte keys", nestedObjects(1000, 98)},
		{"depth 2,000, 98-byte keys", nestedObjects(2000, 98)},
		{"depth 4,000, 98-byte keys", nestedObjects(4000, 98)},
		{"depth 10,000, 98-byte keys (1 MiB)", nestedObjects(10000, 98)},
		{"depth 150,000, 1-byte keys", nestedObjects(150000, 1)},
		{"arrays 500,000 deep", []byte(`{"a":` + strings.Repeat("[", 500000) + strings.Repeat("]", 500000) + `}`)},
		{"depth 21", nestedObjects(21, 3)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.LessOrEqual(t, len(c.raw), MaxBytes)
			var err error
			n := allocated(func() { _, err = Parse(c.raw) })
			require.Error(t, err)
			assert.Contains(t, err.Error(), "the alert is nested more than 20 levels deep at ")
			assert.NotContains(t, err.Error(), "\n")
			assert.Less(t, len(err.Error()), 400, "one sentence, its path clipped: %s", err)
			assert.Less(t, n, uint64(256<<10), "refusing costs no work per level: %d bytes allocated", n)
			t.Logf("%s: %d bytes of alert, %d bytes allocated", c.name, len(c.raw), n)

			allocs := testing.AllocsPerRun(3, func() { _, _ = Parse(c.raw) })
			assert.Less(t, allocs, 300.0, "allocations do not grow with the depth")
		})
	}

	long := strings.Repeat("k", 98)
	_, err := Parse(nestedObjects(10000, 98))
	require.Error(t, err)
	assert.True(t, clip.Clipped(strings.TrimSuffix(strings.TrimSuffix(err.Error(), ", which Firestore cannot store"), `"`)), "the long path is cut with the mark: %s", err)
	assert.Contains(t, err.Error(), `at "`+long+".kkk")

	_, err = Parse(nestedObjects(20, 3))
	require.NoError(t, err, "20 levels are allowed")
	_, err = Parse([]byte(`{"a":1 "b":` + strings.Repeat("[", 30) + `1,`))
	require.ErrorContains(t, err, "the alert is not valid JSON: invalid character '\"' after object key:value pair (line 1, column 8)",
		"a document broken before it is too deep is called invalid")
	_, err = Parse([]byte(`{"a":1,"a":2,"b":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}`))
	require.EqualError(t, err, `the alert has the key "a" twice at the top level`, "what comes first is reported first")
}

// longPath wraps body in 18 objects under 1,500-byte keys (Firestore's
// longest), so that every value under it has a path of 27 KiB.
func longPath(body string) []byte {
	var b bytes.Buffer
	for i := range 18 {
		b.WriteString(`{"` + strings.Repeat(string(rune('a'+i)), maxKeyBytes) + `":`)
	}
	b.WriteString(body)
	b.WriteString(strings.Repeat("}", 18))
	return b.Bytes()
}

// list writes n JSON values from item, separated by commas, up to size
// bytes.
func list(size int, item func(i int) string) (string, int) {
	var b strings.Builder
	n := 0
	for ; b.Len() < size; n++ {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item(n))
	}
	return b.String(), n
}

// Paths are written only for what is reported, each at most maxPathBytes,
// and a path's prefix once for all the values under it. Before, every value
// got its path (and Describe kept one per field): 74,400 addresses under a
// 27 KiB path allocated 5.9 GiB and peaked near 2 GiB; 100,000 keys under
// it 7.6 GiB.
func TestWideAlertsUnderLongPathsStaySmall(t *testing.T) {
	// As many distinct values and keys as Firestore indexes in one document
	// (Parse refuses more), under the path.
	ips, nIPs := list(500000, func(i int) string { return fmt.Sprintf(`"%d.%d.%d.7"`, 1+i/65536%200, i/256%256, i%256) })
	keys, nKeys := list(850000, func(i int) string { return fmt.Sprintf(`"key-%036d":0`, i) })
	cases := []struct {
		name           string
		raw            []byte
		indicators     int
		omitted, field int
	}{
		{"an array of addresses", longPath("[" + ips + "]"), MaxPerKind, nIPs - MaxPerKind, 1},
		{"an object of many keys", longPath("{" + keys + "}"), 0, 0, nKeys},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.LessOrEqual(t, len(c.raw), MaxBytes)
			var (
				a       Alert
				err     error
				found   []Indicator
				omitted int
				guide   string
			)
			n := allocated(func() {
				a, err = Parse(c.raw)
				if err == nil {
					found, omitted = ScanIndicators(a.Data)
					guide = Describe(a, 80)
				}
			})
			require.NoError(t, err)
			t.Logf("%s: %d bytes of alert, %d MiB allocated", c.name, len(c.raw), n>>20)
			assert.Less(t, n, uint64(maxAlertAlloc), "parse, indicators and guide of a 1 MiB alert stay under 64 MiB")
			assert.Len(t, found, c.indicators)
			assert.Equal(t, c.omitted, omitted)
			for _, in := range found {
				assert.LessOrEqual(t, len(in.Path), maxPathBytes)
				assert.True(t, clip.Clipped(in.Path), "a 27 KiB path is cut with the mark")
			}
			assert.Contains(t, guide, fmt.Sprintf("(%d in all, shallow first)", c.field))
			assert.LessOrEqual(t, strings.Count(guide, "\n- "), 80)
		})
	}
}
