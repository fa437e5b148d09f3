package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// countingProxy forwards TCP connections to the Firestore emulator and
// counts the gRPC calls that clients start through it. gRPC runs on HTTP/2
// (cleartext, with prior knowledge, against the emulator), and each call
// opens a new stream with one HEADERS frame from the client: the proxy reads
// the client's frame headers (9 bytes each) as they pass and counts HEADERS
// frames on stream IDs it has not seen. A streamed call counts once,
// however many messages it carries.
type countingProxy struct {
	ln     net.Listener
	target string
	calls  atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

const (
	h2Preface     = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	h2FrameHeader = 9
	h2Headers     = 0x1
)

func startProxy(target string) (*countingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the host:port clients should use instead of the target.
func (p *countingProxy) Addr() string { return p.ln.Addr().String() }

// Calls is the number of gRPC calls started through the proxy so far.
func (p *countingProxy) Calls() int64 { return p.calls.Load() }

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
	fc := &frameCounter{onCall: func() { p.calls.Add(1) }}
	_, _ = io.Copy(up, io.TeeReader(c, fc))
	_ = up.Close()
	<-done
}

// frameCounter parses the client side of an HTTP/2 connection as it is
// written to it and calls onCall for each HEADERS frame that opens a
// stream. A connection that does not start with the HTTP/2 preface is not
// parsed.
type frameCounter struct {
	onCall   func()
	preface  int // bytes of the preface matched so far
	notH2    bool
	hdr      [h2FrameHeader]byte
	hdrN     int
	skip     int    // payload bytes of the current frame still to pass
	lastOpen uint32 // highest stream ID opened so far
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
		case f.skip > 0:
			k := min(len(b), f.skip)
			f.skip -= k
			b = b[k:]
		default:
			k := copy(f.hdr[f.hdrN:], b)
			f.hdrN += k
			b = b[k:]
			if f.hdrN == h2FrameHeader {
				f.frame()
			}
		}
	}
	return n, nil
}

func (f *frameCounter) frame() {
	f.hdrN = 0
	length := int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
	stream := binary.BigEndian.Uint32(f.hdr[5:9]) & 0x7fffffff
	if f.hdr[3] == h2Headers && stream > f.lastOpen {
		f.lastOpen = stream
		f.onCall()
	}
	f.skip = length
}
