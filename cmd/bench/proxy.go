package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"maps"
	"net"
	"path"
	"sync"

	"golang.org/x/net/http2/hpack"
)

// countingProxy forwards TCP connections to the Firestore emulator and
// counts the gRPC calls that clients start through it, by method. gRPC runs
// on HTTP/2 (cleartext, with prior knowledge, against the emulator), and
// each call opens a new stream with one header block from the client: the
// proxy reads the client's frames as they pass, counts HEADERS frames on
// stream IDs it has not seen, and decodes their header blocks (HPACK, in
// connection order, so the dynamic table stays in step) for the :path, the
// gRPC method. A streamed call counts once, however many messages it
// carries.
type countingProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	calls map[string]int64 // by method: "Commit", "RunQuery", ...
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

const (
	h2Preface      = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	h2FrameHeader  = 9
	h2Headers      = 0x1
	h2Continuation = 0x9
	h2EndHeaders   = 0x4
	h2Padded       = 0x8
	h2Priority     = 0x20
	// unknownMethod counts a call whose header block could not be decoded.
	unknownMethod = "?"
)

func startProxy(target string) (*countingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{ln: ln, target: target, calls: map[string]int64{}, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the host:port clients should use instead of the target.
func (p *countingProxy) Addr() string { return p.ln.Addr().String() }

// Calls returns the gRPC calls started through the proxy so far, by method.
func (p *countingProxy) Calls() callCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls)
}

func (p *countingProxy) count(method string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[method]++
}

// callCount is a number of gRPC calls by method.
type callCount map[string]int64

// since is the calls made after before was taken.
func (c callCount) since(before callCount) callCount {
	d := callCount{}
	for m, n := range c {
		if n -= before[m]; n > 0 {
			d[m] = n
		}
	}
	return d
}

func (c callCount) total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Close stops accepting, closes every open connection and waits.
func (p *countingProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *countingProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *countingProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *countingProxy) handle(c net.Conn) {
	defer p.wg.Done()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.track(c, true)
	p.track(up, true)
	defer func() {
		_ = c.Close()
		_ = up.Close()
		p.track(c, false)
		p.track(up, false)
	}()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, up)
		_ = c.Close()
		close(done)
	}()
	fc := &frameCounter{onCall: p.count}
	_, _ = io.Copy(up, io.TeeReader(c, fc))
	_ = up.Close()
	<-done
}

// frameCounter parses the client side of an HTTP/2 connection as it is
// written to it and calls onCall with the gRPC method of each HEADERS frame
// that opens a stream. A connection that does not start with the HTTP/2
// preface is not parsed.
type frameCounter struct {
	onCall   func(method string)
	preface  int // bytes of the preface matched so far
	notH2    bool
	hdr      [h2FrameHeader]byte
	hdrN     int
	frame    frameHeader
	left     int    // payload bytes of the current frame still to pass
	block    []byte // the header block being gathered (HEADERS + CONTINUATION)
	opening  bool   // the block opens a new stream
	lastOpen uint32 // highest stream ID opened so far
	dec      *hpack.Decoder
	broken   bool // a block failed to decode: the table is out of step
}

type frameHeader struct {
	length int
	typ    byte
	flags  byte
	stream uint32
}

func (f *frameCounter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 && !f.notH2 {
		switch {
		case f.preface < len(h2Preface):
			k := min(len(b), len(h2Preface)-f.preface)
			if !bytes.Equal(b[:k], []byte(h2Preface[f.preface:f.preface+k])) {
				f.notH2 = true
				return n, nil
			}
			f.preface += k
			b = b[k:]
		case f.left > 0:
			k := min(len(b), f.left)
			if f.frame.typ == h2Headers || f.frame.typ == h2Continuation {
				f.block = append(f.block, b[:k]...)
			}
			f.left -= k
			b = b[k:]
			if f.left == 0 {
				f.endFrame()
			}
		default:
			k := copy(f.hdr[f.hdrN:], b)
			f.hdrN += k
			b = b[k:]
			if f.hdrN == h2FrameHeader {
				f.startFrame()
			}
		}
	}
	return n, nil
}

func (f *frameCounter) startFrame() {
	f.hdrN = 0
	f.frame = frameHeader{
		length: int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2]),
		typ:    f.hdr[3],
		flags:  f.hdr[4],
		stream: binary.BigEndian.Uint32(f.hdr[5:9]) & 0x7fffffff,
	}
	if f.frame.typ == h2Headers {
		f.block = f.block[:0]
		f.opening = f.frame.stream > f.lastOpen
		f.lastOpen = max(f.lastOpen, f.frame.stream)
	}
	f.left = f.frame.length
	if f.left == 0 {
		f.endFrame()
	}
}

// endFrame decodes a header block once its last frame has passed.
func (f *frameCounter) endFrame() {
	if f.frame.typ == h2Headers {
		// Padding and priority come before the block, the padding also after.
		body, pad := f.block, 0
		if f.frame.flags&h2Padded != 0 && len(body) > 0 {
			pad, body = int(body[0]), body[1:]
		}
		if f.frame.flags&h2Priority != 0 && len(body) >= 5 {
			body = body[5:]
		}
		if pad <= len(body) {
			body = body[:len(body)-pad]
		}
		f.block = append(f.block[:0], body...)
	}
	if (f.frame.typ == h2Headers || f.frame.typ == h2Continuation) && f.frame.flags&h2EndHeaders != 0 {
		method := f.method()
		if f.opening {
			f.onCall(method)
		}
	}
}

// method decodes the gathered block and returns the last element of its
// :path ("/google.firestore.v1.Firestore/Commit" is "Commit").
func (f *frameCounter) method() string {
	if f.dec == nil {
		f.dec = hpack.NewDecoder(4096, nil)
		f.dec.SetAllowedMaxDynamicTableSize(1 << 20)
	}
	if f.broken {
		return unknownMethod
	}
	fields, err := f.dec.DecodeFull(f.block)
	if err != nil {
		f.broken = true
		return unknownMethod
	}
	for _, hf := range fields {
		if hf.Name == ":path" {
			return path.Base(hf.Value)
		}
	}
	return unknownMethod
}
