package h2srv

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The edge's own HTTP/2 server (SPEC R62), for HTTPS connections that
// negotiated h2.
//
// net/http's HTTP/2 server runs every frame through the connection's serve
// goroutine over channels, and flushes each time its write queue empties;
// under 16 streams per connection that cost 70–100 µs of CPU per request.
// Here one goroutine per connection reads and dispatches frames
// (x/net/http2's Framer and HPACK), each stream's handler runs on its own
// goroutine and writes its frames straight into the connection's output
// buffer under one mutex, and one flusher per connection sends, in one TLS
// write, whatever the runnable handlers added meanwhile.
//
// Streams are served by the edge's Handler: its fast path (ServeFast), else
// its ServeHTTP, as every request net/http hands the edge: the same
// routing, TLS policy, drain accounting, h2c backends (trailers included),
// streaming (Flush) and body guard.
//
// Flow control: the client may send each stream h2StreamWindow bytes and
// the connection h2ConnWindow bytes ahead of what handlers have read; what
// we send is bounded by the client's windows, and a connection's buffered
// output by h2MaxBuffered (handlers wait beyond it).
//
// Drain (Conn.Drain, from the edge's shutdown): GOAWAY with the last
// stream id 2³¹−1 first (the client stops opening streams), then, after
// the grace the edge gives (its drainIdleGrace), GOAWAY
// with the last stream actually taken; the streams taken are served, the
// connection is closed once they are done.

// Abuse bounds (SPEC R62): at most h2MaxStreams streams open at once;
// h2StreamBudget streams per connection, refused and reset ones included,
// then GOAWAY (a client that goes on opening streams past h2MaxStreams
// more is cut with ENHANCE_YOUR_CALM); a header list over h2MaxHeaderList
// bytes (RFC 9113 §6.5.2 size) is answered 431 on its stream, one over
// h2HeaderDecodeBound ends the connection (GOAWAY ENHANCE_YOUR_CALM, or the
// framer's COMPRESSION_ERROR or PROTOCOL_ERROR when it stops first), as does
// header decoding past h2DecodeAllowance + h2DecodeRatio × the bytes the
// client sent (an HPACK bomb); at most h2MaxStalledPerConn streams of a
// connection, and h2MaxStalled of the whole edge, wait for send window
// at once, holding their backend connections: a stream that would wait
// beyond either is reset (CANCEL).
const (
	h2MaxStreams        = 128
	h2StreamBudget      = 1000
	h2MaxHeaderList     = MaxHeaderList
	h2HeaderDecodeBound = 256 << 10
	h2DecodeAllowance   = 1 << 20
	h2DecodeRatio       = 64
	h2MaxStalledPerConn = 16
	h2MaxStalled        = 256
)

const (
	h2StreamWindow  = 1 << 20
	h2ConnWindow    = 1 << 20
	h2MaxBuffered   = 256 << 10
	h2MaxOutput     = 4 * h2MaxBuffered
	h2MaxFrameSize  = 16 << 10
	h2GoAwayLinger  = time.Second
	h2MaxStreamID   = 1<<31 - 1
	h2WindowRefresh = h2StreamWindow / 4
)

// MaxHeaderList is the largest header list a request may have (RFC 9113
// §6.5.2 size; the edge's bound on an HTTP/1.1 request head): a larger
// one is answered 431. 32 KiB is nginx's default bound too (4 buffers of
// 8 KiB, large_client_header_buffers; R62).
const MaxHeaderList = 32 << 10

// Conn is one HTTP/2 client connection.
type Conn struct {
	cfg    Config
	tc     *tls.Conn
	st     *tls.ConnectionState
	remote string
	br     *bufio.Reader
	fr     *http2.Framer
	// Read loop only: the bytes read from the client, the header list
	// bytes decoded, the streams opened and those ignored after the
	// final GOAWAY (the abuse bounds).
	wire    h2WireCount
	decoded int64
	opened  int
	ignored int
	ctx     context.Context
	// handlers counts the stream handlers running (close waits for them).
	handlers sync.WaitGroup
	cancel   context.CancelFunc

	// wmu guards the write side: the framer's writes, the HPACK encoder,
	// the send windows, the output buffer and the stream states below.
	wmu   sync.Mutex
	wcond sync.Cond
	// flushMu orders the flushes: one TLS write at a time, in buffer
	// order.
	flushMu     sync.Mutex
	out         h2Out
	spare       []byte
	henc        *hpack.Encoder
	hbuf        h2Out
	names       map[string]string   // lowerName's interned names
	fieldBuf    []hpack.HeaderField // writeRespHeadLocked's fields
	flushQueued bool
	flushSig    chan struct{}
	werr        error
	wcut        time.Time // once set, no write may end later (outOverBound)
	peerMaxRead uint32    // SETTINGS_MAX_FRAME_SIZE of the client
	peerWindow  int32     // SETTINGS_INITIAL_WINDOW_SIZE of the client
	sendWindow  int32     // the connection's send window
	stalled     int       // streams waiting for send window (h2MaxStalledPerConn)

	// mu guards the stream registry and the drain state.
	mu        sync.Mutex
	streams   map[uint32]*Stream
	active    int // handlers running
	maxID     uint32
	goAway    bool // final GOAWAY sent or received: no new stream
	draining  bool // first GOAWAY sent
	closing   bool // close once active reaches 0
	idleTimer *time.Timer

	// recvWindow is the connection's receive window and recvUnacked
	// what handlers read since the last WINDOW_UPDATE (under mu).
	recvWindow  int32
	recvUnacked int32
}

// h2WireCount counts the bytes read from r.
type h2WireCount struct {
	r io.Reader
	n int64
}

func (w *h2WireCount) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	w.n += int64(n)
	return n, err
}

// h2Out is an append-only byte buffer (the framer's io.Writer).
type h2Out struct{ b []byte }

func (o *h2Out) Write(p []byte) (int, error) { o.b = append(o.b, p...); return len(p), nil }

// h2HTTPServer is the http.ServerContextKey value of the streams'
// contexts: ReverseProxy panics with http.ErrAbortHandler on a body it
// could not relay whole only under a server (shouldPanicOnCopyError), and
// the stream is then reset; without it a backend that cut its answer short
// would end the stream as if the answer were whole.
var h2HTTPServer = &http.Server{}

// h2Preface is the client connection preface (RFC 9113 §3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// NewConn prepares tc (handshaken, ALPN h2) for Serve.
func NewConn(tc *tls.Conn, cfg Config) *Conn {
	st := tc.ConnectionState()
	c := &Conn{
		cfg: cfg, tc: tc, st: &st, remote: tc.RemoteAddr().String(),
		flushSig:    make(chan struct{}, 1),
		peerMaxRead: 16 << 10,
		peerWindow:  65535,
		sendWindow:  65535,
		streams:     map[uint32]*Stream{},
		recvWindow:  h2ConnWindow,
		names:       map[string]string{},
	}
	c.ctx, c.cancel = context.WithCancel(context.WithValue(context.Background(), http.ServerContextKey, h2HTTPServer))
	c.wcond.L = &c.wmu
	c.wire.r = tc
	c.br = bufio.NewReaderSize(&c.wire, 32<<10)
	c.fr = http2.NewFramer(&c.out, c.br)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = h2HeaderDecodeBound
	c.fr.SetMaxReadFrameSize(h2MaxFrameSize)
	c.henc = hpack.NewEncoder(&c.hbuf)
	// The server preface, queued before the connection is registered (a
	// drain's GOAWAY must not come first); serve sends it.
	_ = c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: h2MaxStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2StreamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: h2MaxHeaderList},
	)
	_ = c.fr.WriteWindowUpdate(0, h2ConnWindow-65535)
	return c
}

// Serve runs the connection until it ends: the preface, then frames.
func (c *Conn) Serve() {
	defer c.close()
	go c.flushLoop()
	c.wmu.Lock()
	c.kickLocked() // the server preface (NewConn)
	c.wmu.Unlock()
	if to := c.cfg.ReadHeaderTimeout; to > 0 {
		_ = c.tc.SetReadDeadline(time.Now().Add(to))
	}
	if err := c.readPreface(); err != nil {
		c.cfg.Logger.Debug("http2: bad client preface", "remote", c.remote, "error", err)
		return
	}
	_ = c.tc.SetReadDeadline(time.Time{})
	c.armIdle()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.frameStreamError(se)
				continue
			}
			c.readFailed(err)
			return
		}
		err = c.dispatch(f)
		if err == nil && c.outOverBound() {
			// Control answers (PING and SETTINGS acks, resets) piling up
			// unread: a client that sends and never reads.
			err = http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
		if err != nil {
			if errors.Is(err, errH2Done) {
				c.closeWrite()
			} else {
				c.connError(err)
			}
			return
		}
	}
}

// readPreface reads the client preface and its first frame, which must
// be SETTINGS.
func (c *Conn) readPreface() error {
	var buf [len(h2Preface)]byte
	if _, err := io.ReadFull(c.br, buf[:]); err != nil {
		return err
	}
	if string(buf[:]) != h2Preface {
		return errors.New("not the HTTP/2 preface")
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return c.connError(http2.ConnectionError(http2.ErrCodeProtocol))
	}
	return c.onSettings(sf)
}

// frameStreamError resets the stream of a frame the framer refused (an
// invalid header field, bad pseudo-headers, bad padding); reading goes
// on. A stream it opens counts as taken.
func (c *Conn) frameStreamError(se http2.StreamError) {
	c.mu.Lock()
	if se.StreamID%2 == 1 && se.StreamID > c.maxID {
		c.maxID = se.StreamID
	}
	st := c.streams[se.StreamID]
	c.mu.Unlock()
	if st != nil {
		c.wmu.Lock()
		st.resetLocked(se.Code, true)
		c.wmu.Unlock()
		return
	}
	c.streamError(se.StreamID, se.Code)
}

// readFailed ends the read loop on err: a connection error or an
// oversized frame is answered with GOAWAY; EOF or a closed connection
// ends quietly.
func (c *Conn) readFailed(err error) {
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		c.connError(ce)
		return
	}
	if errors.Is(err, http2.ErrFrameTooLarge) {
		c.connError(http2.ConnectionError(http2.ErrCodeFrameSize))
		return
	}
	c.cfg.Logger.Debug("http2: connection ended", "remote", c.remote, "error", err)
}

// connError sends GOAWAY with err's code (a protocol error of the
// client) and returns err.
func (c *Conn) connError(err error) error {
	code := http2.ErrCodeInternal
	var ce http2.ConnectionError
	if errors.As(err, &ce) {
		code = http2.ErrCode(ce)
	}
	c.mu.Lock()
	last := c.maxID
	c.goAway = true
	c.mu.Unlock()
	c.wmu.Lock()
	_ = c.fr.WriteGoAway(last, code, nil)
	c.kickLocked()
	c.wmu.Unlock()
	c.cfg.Logger.Debug("http2: connection error", "remote", c.remote, "code", code.String())
	c.linger()
	return err
}

// linger sends what is buffered (the GOAWAY), half-closes and discards
// what the client still sends for up to h2GoAwayLinger: closing with
// unread bytes would reset the connection, and the client could lose the
// GOAWAY that says why.
func (c *Conn) linger() {
	c.closeWrite()
	_, _ = io.Copy(io.Discard, c.tc.NetConn())
}

// dispatch handles one frame read; a returned error is a connection
// error.
func (c *Conn) dispatch(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.onHeaders(f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		return c.onSettings(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		if f.StreamID != 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.wmu.Lock()
		_ = c.fr.WritePing(true, f.Data)
		c.kickLocked()
		c.wmu.Unlock()
	case *http2.RSTStreamFrame:
		if c.isIdle(f.StreamID) {
			return http2.ConnectionError(http2.ErrCodeProtocol) // RFC 9113 §6.4
		}
		c.onReset(f.StreamID, f.ErrCode)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			c.streamError(f.StreamID, http2.ErrCodeProtocol) // RFC 9113 §5.3.1
		}
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.goAway = true
		c.closing = true
		done := c.active == 0
		c.mu.Unlock()
		if done {
			return errH2Done
		}
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	case *http2.ContinuationFrame:
		// ReadMetaHeaders joins CONTINUATION frames to their HEADERS; a
		// lone one is a protocol error.
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil // unknown frame types are ignored
}

// isIdle reports whether stream id is idle (RFC 9113 §5.1): a stream the
// client has not opened yet, or an even one (the edge opens none).
func (c *Conn) isIdle(id uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return id%2 == 0 || id > c.maxID
}

// onSettings applies the client's settings and acknowledges them. The
// streams' send windows move once per frame, by the last
// SETTINGS_INITIAL_WINDOW_SIZE it carries: a frame of thousands of them
// cost a pass over every stream each.
func (c *Conn) onSettings(f *http2.SettingsFrame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	window := c.peerWindow
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxFrameSize:
			c.peerMaxRead = s.Val
		case http2.SettingInitialWindowSize:
			window = int32(s.Val)
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
		}
		return nil
	})
	if err == nil && window != c.peerWindow {
		err = c.setPeerWindowLocked(window)
	}
	if err != nil {
		return err
	}
	_ = c.fr.WriteSettingsAck()
	c.kickLocked()
	return nil
}

// setPeerWindowLocked applies a new SETTINGS_INITIAL_WINDOW_SIZE to the
// open streams' send windows (under wmu); a window past 2³¹−1 is a
// connection error.
func (c *Conn) setPeerWindowLocked(window int32) error {
	delta := window - c.peerWindow
	c.peerWindow = window
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.streams {
		if int64(st.sendWindow)+int64(delta) > h2MaxStreamID {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		st.sendWindow += delta
	}
	c.wcond.Broadcast()
	return nil
}

// onWindowUpdate widens the connection's or a stream's send window.
func (c *Conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if f.StreamID == 0 {
		if int64(c.sendWindow)+int64(f.Increment) > h2MaxStreamID {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.sendWindow += int32(f.Increment)
		c.wcond.Broadcast()
		return nil
	}
	c.mu.Lock()
	st := c.streams[f.StreamID]
	idle := f.StreamID%2 == 0 || f.StreamID > c.maxID
	c.mu.Unlock()
	if idle {
		return http2.ConnectionError(http2.ErrCodeProtocol) // RFC 9113 §6.9
	}
	if st == nil {
		return nil // a closed stream
	}
	if int64(st.sendWindow)+int64(f.Increment) > h2MaxStreamID {
		st.resetLocked(http2.ErrCodeFlowControl, true)
		return nil
	}
	st.sendWindow += int32(f.Increment)
	c.wcond.Broadcast()
	return nil
}

// onReset ends a stream the client reset: its handler's context is
// canceled, its writes and body reads fail.
func (c *Conn) onReset(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	st := c.streams[id]
	c.mu.Unlock()
	if st == nil {
		return
	}
	c.wmu.Lock()
	st.peerReset = true
	st.resetLocked(code, false)
	c.wmu.Unlock()
}

// streamError resets stream id (our RST_STREAM with code).
func (c *Conn) streamError(id uint32, code http2.ErrCode) {
	c.wmu.Lock()
	_ = c.fr.WriteRSTStream(id, code)
	c.kickLocked()
	c.wmu.Unlock()
}

// outOverBound reports whether the output buffer passed h2MaxOutput (DATA
// alone stays within h2MaxBuffered: writers wait for room). Past it the
// client is not reading: every write, the one under way included, ends
// within h2GoAwayLinger (not Config.WriteTimeout), and so the connection.
func (c *Conn) outOverBound() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.out.b) <= h2MaxOutput {
		return false
	}
	c.wcut = time.Now().Add(h2GoAwayLinger)
	_ = c.tc.SetWriteDeadline(c.wcut)
	return true
}

// kickLocked queues a flush of the output buffer (under wmu); none once
// the connection is closed.
func (c *Conn) kickLocked() {
	if c.werr == nil && !c.flushQueued {
		c.flushQueued = true
		select {
		case c.flushSig <- struct{}{}:
		default:
		}
	}
}

// flushLoop sends the output buffer whenever a flush is queued, after
// letting the runnable handlers add theirs; it ends when the connection
// closes (flushSig closed).
func (c *Conn) flushLoop() {
	for range c.flushSig {
		yieldToRunnable()
		c.flushOnce()
	}
}

// flushOnce writes what is buffered in one TLS write (bounded by
// Config.WriteTimeout); a failed write closes the connection.
func (c *Conn) flushOnce() {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.wmu.Lock()
	c.flushQueued = false
	buf := c.out.b
	c.out.b = c.spare[:0]
	c.spare = nil
	err := c.werr
	if dl := time.Now().Add(c.cfg.WriteTimeout); len(buf) > 0 && err == nil {
		if !c.wcut.IsZero() && c.wcut.Before(dl) {
			dl = c.wcut
		}
		_ = c.tc.SetWriteDeadline(dl) // under wmu: outOverBound's cut stays
	}
	c.wmu.Unlock()
	if len(buf) > 0 && err == nil {
		if _, err = c.tc.Write(buf); err != nil {
			_ = c.tc.Close()
		}
	}
	c.wmu.Lock()
	if err != nil && c.werr == nil {
		c.werr = err
	}
	if cap(buf) <= 4*h2MaxBuffered {
		c.spare = buf[:0]
	}
	if len(buf) > 0 || err != nil {
		c.wcond.Broadcast() // room in the buffer, or the connection failed
	}
	c.wmu.Unlock()
}

// armIdle starts (or restarts) the idle timer: IdleTimeout with no stream
// open ends the connection with a GOAWAY.
func (c *Conn) armIdle() {
	to := c.cfg.IdleTimeout
	if to <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idleTimer == nil {
		c.idleTimer = time.AfterFunc(to, c.idleExpired)
		return
	}
	c.idleTimer.Reset(to)
}

func (c *Conn) idleExpired() {
	c.mu.Lock()
	idle := c.active == 0
	c.mu.Unlock()
	if idle {
		c.finalGoAway()
	}
}

// Drain begins a graceful close (the edge's shutdown): GOAWAY 2³¹−1 now,
// the final GOAWAY after grace.
func (c *Conn) Drain(grace time.Duration) {
	c.mu.Lock()
	if c.draining || c.goAway {
		c.mu.Unlock()
		return
	}
	c.draining = true
	c.mu.Unlock()
	c.wmu.Lock()
	_ = c.fr.WriteGoAway(h2MaxStreamID, http2.ErrCodeNo, nil)
	c.kickLocked()
	c.wmu.Unlock()
	time.AfterFunc(grace, c.finalGoAway)
}

// finalGoAway sends GOAWAY with the last stream taken; the connection
// closes once the streams taken are done.
func (c *Conn) finalGoAway() {
	c.mu.Lock()
	if c.goAway {
		c.mu.Unlock()
		return
	}
	c.goAway = true
	c.closing = true
	last := c.maxID
	done := c.active == 0
	c.mu.Unlock()
	c.wmu.Lock()
	_ = c.fr.WriteGoAway(last, http2.ErrCodeNo, nil)
	c.kickLocked()
	c.wmu.Unlock()
	if done {
		c.closeWrite()
	}
}

// closeWrite sends what is buffered, then TLS close_notify and a TCP
// half-close; the read loop ends on the client's close or after
// h2GoAwayLinger, so a request in flight to us is not met with a reset.
func (c *Conn) closeWrite() {
	c.flushOnce()
	_ = c.tc.SetWriteDeadline(time.Now().Add(h2GoAwayLinger))
	_ = c.tc.CloseWrite()
	_ = c.tc.SetReadDeadline(time.Now().Add(h2GoAwayLinger))
}

// close ends the connection: every stream's context is canceled, the
// flusher stops, the socket closes.
func (c *Conn) close() {
	c.cancel()
	c.mu.Lock()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	streams := make([]*Stream, 0, len(c.streams))
	for _, st := range c.streams {
		streams = append(streams, st)
	}
	c.mu.Unlock()
	c.flushOnce()
	c.wmu.Lock()
	for _, st := range streams {
		st.resetLocked(http2.ErrCodeCancel, false)
	}
	if c.werr == nil {
		c.werr = errH2Closed
	}
	c.wcond.Broadcast()
	c.wmu.Unlock()
	_ = c.tc.Close()
	if c.cfg.Closed != nil {
		c.cfg.Closed(c)
	}
	// The handlers still running end on their canceled context; the
	// connection leaves the drain's count once they have. No flush is
	// queued after werr is set (kickLocked), so flushSig can close.
	go func() {
		c.handlers.Wait()
		close(c.flushSig)
		if c.cfg.Done != nil {
			c.cfg.Done()
		}
	}()
}

var (
	errH2Closed = errors.New("http2: connection closed")
	// errH2Done ends the read loop of a connection the client sent
	// GOAWAY on, once its streams are done.
	errH2Done = errors.New("http2: connection done")
)

// yieldToRunnable lets the goroutines that are runnable (handlers about
// to add their frames) run before a flush.
func yieldToRunnable() { runtime.Gosched() }

// CloseNow closes the connection's socket at once (the drain's deadline):
// the read loop ends, and with it the connection.
func (c *Conn) CloseNow() { _ = c.tc.NetConn().Close() }
