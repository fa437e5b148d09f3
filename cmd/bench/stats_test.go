package main

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2/hpack"
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

// frame is an HTTP/2 frame: its header, then payload.
func frame(typ, flags byte, stream uint32, payload []byte) []byte {
	b := make([]byte, 9, 9+len(payload))
	n := len(payload)
	b[0], b[1], b[2] = byte(n>>16), byte(n>>8), byte(n)
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:9], stream)
	return append(b, payload...)
}

// TestFrameCounter: the proxy counts HEADERS frames that open a stream and
// names each call by the :path of its header block (HPACK, the dynamic
// table kept in step across blocks), whatever the write boundaries:
// padding, priority and CONTINUATION frames are read, trailers and DATA
// that look like frames are not counted, and a connection that is not
// HTTP/2 is not parsed.
func TestFrameCounter(t *testing.T) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	block := func(method string) []byte {
		buf.Reset()
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":path", Value: "/google.firestore.v1.Firestore/" + method}, {Name: "content-type", Value: "application/grpc"}} {
			require.NoError(t, enc.WriteField(f))
		}
		return bytes.Clone(buf.Bytes())
	}
	var wire []byte
	wire = append(wire, h2Preface...)
	wire = append(wire, frame(0x4, 0, 0, make([]byte, 12))...)                 // SETTINGS
	wire = append(wire, frame(h2Headers, h2EndHeaders, 1, block("Commit"))...) // call 1
	data := make([]byte, 300)                                                  // DATA holding bytes that look like a HEADERS frame
	copy(data, frame(h2Headers, h2EndHeaders, 99, nil))
	wire = append(wire, frame(0x0, 0, 1, data)...)
	b2 := block("BatchGetDocuments") // call 2: padded, with priority, split in two
	padded := append(append(append([]byte{3}, 0, 0, 0, 0, 16), b2[:2]...), 0, 0, 0)
	wire = append(wire, frame(h2Headers, h2Padded|h2Priority, 3, padded)...)
	wire = append(wire, frame(h2Continuation, h2EndHeaders, 3, b2[2:])...)
	buf.Reset()
	require.NoError(t, enc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: "0"}))
	wire = append(wire, frame(h2Headers, h2EndHeaders, 3, bytes.Clone(buf.Bytes()))...) // trailers on an open stream
	wire = append(wire, frame(0x8, 0, 0, make([]byte, 4))...)                           // WINDOW_UPDATE
	wire = append(wire, frame(h2Headers, h2EndHeaders, 5, block("Commit"))...)          // call 3: :path from the dynamic table
	wire = append(wire, frame(0x0, 0, 5, make([]byte, 70000))...)
	for _, chunk := range []int{1, 7, 9, 1000, len(wire)} {
		var calls []string
		fc := &frameCounter{onCall: func(m string) { calls = append(calls, m) }}
		for i := 0; i < len(wire); i += chunk {
			_, _ = fc.Write(wire[i:min(i+chunk, len(wire))])
		}
		require.Equal(t, []string{"Commit", "BatchGetDocuments", "Commit"}, calls, "chunks of %d bytes", chunk)
	}
	calls := 0
	fc := &frameCounter{onCall: func(string) { calls++ }}
	_, _ = fc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	_, _ = fc.Write(frame(h2Headers, h2EndHeaders, 1, nil))
	require.Zero(t, calls)

	before := callCount{"Commit": 2}
	require.Equal(t, callCount{"Commit": 1, "RunQuery": 1}, callCount{"Commit": 3, "RunQuery": 1, "Get": 0}.since(callCount{"Commit": 2}))
	require.Equal(t, int64(2), before.total())
}

// TestStepOf: a turn is routed to the step its request executes, in the
// wording of this prompt and of earlier ones, whatever other steps the
// request lists after it.
func TestStepOf(t *testing.T) {
	sc := standard("guardduty-1")
	for req, want := range map[string]int{
		"## Execute this step\nstep_2: Find earlier alerts from the remote IP.\n\nEarlier: step_1: Read the full alert.": 2,
		"Execute this step: Read the full alert.\nExpected outcome: the alert":                                           1,
		"Plan: Find earlier alerts from the remote IP.\nExecute this step: Read the full alert.":                         1,
		"Summarize the investigation.": 0,
	} {
		require.Equal(t, want, sc.stepOf(req), req)
	}
}

// The workflow ID is found in the starter's output, without the sentence's
// full stop after it.
func TestStartedID(t *testing.T) {
	out := "Investigating guardduty-b6b95f1bc667 as investigation-guardduty-b6b95f1bc667-20261127-181005.123.\nVERDICT benign"
	if got := workflowID([]byte(out)); got != "investigation-guardduty-b6b95f1bc667-20261127-181005.123" {
		t.Fatalf("found %q", got)
	}
	if got := workflowID([]byte("no-investigation-here")); got != "" {
		t.Fatal("found an ID inside a word")
	}
}
