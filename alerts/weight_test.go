package alerts

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// fillTo repeats item, comma-separated, between prefix and suffix, up to
// size bytes.
func fillTo(prefix, item, suffix string, size int) []byte {
	n := (size - len(prefix) - len(suffix)) / (len(item) + 1)
	return []byte(prefix + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + suffix)
}

// liveDecoded is the heap DecodeJSON's tree of raw holds once built.
func liveDecoded(raw []byte) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v, _ := DecodeJSON(raw)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return after.HeapAlloc - before.HeapAlloc
}

// The estimate Parse refuses by follows the heap the decoded tree really
// takes (measured: 0.94 to 2.7 times it), so a change of Go's maps or
// slices that makes them costlier fails here, not in production.
func TestDecodedBytesEstimate(t *testing.T) {
	for _, item := range []string{`{}`, `0`, `null`, `1.5`, `""`, `"abcdefghijk"`, `{"k":null}`, `{"c":[{}]}`,
		`{"a":null,"b":null,"c":null,"d":null,"e":null,"f":null,"g":null,"h":null,"i":null}`,
		`{"src":"10.0.0.1","dst":"10.0.0.2","port":443}`, `123456789012345678901234`} {
		raw := fillTo(`{"a":[{"b":[`, item, `]}]}`, 512<<10)
		est, _ := decodedBytes(raw)
		live := liveDecoded(raw)
		ratio := float64(est) / float64(live)
		t.Logf("%.24s: estimate %d, live %d (%.2f)", item, est, live, ratio)
		if ratio < 0.85 || ratio > 3 {
			t.Errorf("%.24s: estimate %d for %d live, %.2f times it", item, est, live, ratio)
		}
	}
	// A wide object: one map of many distinct keys.
	var b strings.Builder
	b.WriteString(`{"x":0`)
	for i := 0; b.Len() < 512<<10; i++ {
		fmt.Fprintf(&b, `,"key-%d":%d`, i, i)
	}
	b.WriteString(`}`)
	est, _ := decodedBytes([]byte(b.String()))
	live := liveDecoded([]byte(b.String()))
	if ratio := float64(est) / float64(live); ratio < 0.85 || ratio > 3 {
		t.Errorf("a wide object: estimate %d for %d live, %.2f times it", est, live, ratio)
	}
}
