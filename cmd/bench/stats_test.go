package main

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestIntervals(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ivs := []interval{{at(0), at(100)}, {at(50), at(150)}, {at(300), at(400)}, {at(400), at(450)}, {at(60), at(130)}}
	require.Equal(t, 300*time.Millisecond, union(ivs), "0-150 and 300-450")
	require.Equal(t, 3, maxOverlap(ivs), "0-100, 50-150 and 60-130 at 65 ms")
	require.Equal(t, 1, maxOverlap([]interval{{at(0), at(10)}, {at(10), at(20)}}), "touching ends do not overlap")
	require.Equal(t, time.Duration(0), union(nil))

	ds := []time.Duration{5, 1, 4, 2, 3}
	p50, _ := median(ds)
	p95, _ := percentile(ds, 95)
	require.Equal(t, time.Duration(3), p50)
	require.Equal(t, time.Duration(5), p95)
	_, ok := median(nil)
	require.False(t, ok)
	mid, text := medianOf([]float64{0.9, 0.3, 0.5})
	require.Equal(t, 2, mid)
	require.Equal(t, "; median of 3 runs, range 0.30–0.90", text)
}

// frame is an HTTP/2 frame header and payload.
func frame(typ byte, stream uint32, payload int) []byte {
	b := make([]byte, 9+payload)
	b[0], b[1], b[2] = byte(payload>>16), byte(payload>>8), byte(payload)
	b[3] = typ
	binary.BigEndian.PutUint32(b[5:9], stream)
	return b
}

// TestFrameCounter: the proxy counts HEADERS frames that open a stream,
// whatever the write boundaries, and nothing on a connection that is not
// HTTP/2.
func TestFrameCounter(t *testing.T) {
	var wire []byte
	wire = append(wire, h2Preface...)
	wire = append(wire, frame(0x4, 0, 12)...)       // SETTINGS
	wire = append(wire, frame(h2Headers, 1, 40)...) // call 1
	wire = append(wire, frame(0x0, 1, 300)...)      // DATA with bytes that look like a HEADERS frame
	copy(wire[len(wire)-300:], frame(h2Headers, 99, 0))
	wire = append(wire, frame(h2Headers, 3, 20)...) // call 2
	wire = append(wire, frame(0x9, 3, 10)...)       // CONTINUATION
	wire = append(wire, frame(h2Headers, 3, 5)...)  // trailers on an open stream
	wire = append(wire, frame(0x8, 0, 4)...)        // WINDOW_UPDATE
	wire = append(wire, frame(h2Headers, 5, 70000)...)
	for _, chunk := range []int{1, 7, 9, 1000, len(wire)} {
		calls := 0
		fc := &frameCounter{onCall: func() { calls++ }}
		for i := 0; i < len(wire); i += chunk {
			_, _ = fc.Write(wire[i:min(i+chunk, len(wire))])
		}
		require.Equal(t, 3, calls, "chunks of %d bytes", chunk)
	}
	calls := 0
	fc := &frameCounter{onCall: func() { calls++ }}
	_, _ = fc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	_, _ = fc.Write(frame(h2Headers, 1, 0))
	require.Zero(t, calls)
}
