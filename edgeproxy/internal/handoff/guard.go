package handoff

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// Request guards of the net/http path (connections handed off by the
// HTTP/1.1 loop: bodies, upgrades, anything the loop does not serve
// itself).
//
// net/http reads a request with both Content-Length and Transfer-Encoding:
// chunked as chunked and deletes the Content-Length before the handler
// sees it, and keeps the connection open: behind a front proxy that frames
// by Content-Length, the bytes after the chunked body become another
// user's request (request smuggling). RFC 9112 §6.1 says to close such a
// connection. TrackedConn follows the framing of every request that
// crosses a handed-off connection (heads, Content-Length and chunked
// bodies) and records, per head, whether it named both; ServeHTTP then
// answers such a request 400 and closes the connection, as nginx does.

// TrackedConnKey is the context key of a handed-off connection's
// TrackedConn (http.Server.ConnContext).
type TrackedConnKey struct{}

// TrackedConn is a handed-off client connection whose request framing is
// followed as net/http reads it.
type TrackedConn struct {
	*ReplayConn
	mu sync.Mutex
	ft framingTracker
}

func NewTrackedConn(rc *ReplayConn) *TrackedConn { return &TrackedConn{ReplayConn: rc} }

func (c *TrackedConn) Read(p []byte) (int, error) {
	n, err := c.ReplayConn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.ft.feed(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

// Smuggling returns why the head of r (matched by method and target, in
// order) must be refused ("": it need not): both Content-Length and
// Transfer-Encoding, Transfer-Encoding in an HTTP/1.0 request, or a
// header line folded onto the previous one; the
// verdicts of heads before it are dropped.
func (c *TrackedConn) Smuggling(r *http.Request) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.ft.verdicts) > 0 {
		v := c.ft.verdicts[0]
		c.ft.verdicts = c.ft.verdicts[1:]
		if v.method == r.Method && v.target == r.RequestURI {
			return v.refuse
		}
	}
	return ""
}

// headVerdict is what framingTracker saw in one request head.
type headVerdict struct {
	method, target string
	// refuse says why the request must be answered 400 and its connection
	// closed ("": it is fine).
	refuse string
}

// Tracker states.
const (
	ftHead = iota
	ftBody
	ftChunkLine
	ftChunkData
	ftChunkEnd
	ftTrailer
	ftOff // an upgrade tunnel, or framing net/http rejects: no more heads
)

// framingTrackerMaxHead bounds a head the tracker holds (net/http refuses
// larger ones with 431 and closes).
const framingTrackerMaxHead = 1 << 20

// framingTracker is a minimal HTTP/1.1 request framing state machine
// (RFC 9112 §6): it finds each request head, skips its body by
// Content-Length or chunk sizes, and records a headVerdict per head. It
// costs a few comparisons per body chunk; heads are scanned once.
type framingTracker struct {
	state    int
	buf      []byte // the head or chunk line being read
	left     int64  // body or chunk bytes still to skip
	verdicts []headVerdict
}

func (t *framingTracker) feed(p []byte) {
	for len(p) > 0 {
		switch t.state {
		case ftOff:
			return
		case ftBody, ftChunkData:
			n := int64(len(p))
			if n > t.left {
				n = t.left
			}
			t.left -= n
			p = p[n:]
			if t.left == 0 {
				if t.state == ftBody {
					t.state = ftHead
				} else {
					t.state = ftChunkEnd
				}
			}
		default:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				t.buf = append(t.buf, p...)
				if len(t.buf) > framingTrackerMaxHead {
					t.off()
				}
				return
			}
			t.buf = append(t.buf, p[:i+1]...)
			p = p[i+1:]
			t.line()
		}
	}
}

func (t *framingTracker) off() {
	t.state = ftOff
	t.buf = nil
}

// line handles the line (through its LF) that ends t.buf.
func (t *framingTracker) line() {
	b := t.buf
	end := len(b) - 1 // its LF
	j := bytes.LastIndexByte(b[:end], '\n')
	last := bytes.TrimSuffix(b[j+1:end], []byte("\r"))
	switch t.state {
	case ftHead:
		if len(last) > 0 {
			return // more header lines follow
		}
		if len(bytes.TrimLeft(b, "\r\n")) == 0 {
			t.buf = t.buf[:0] // empty lines before a request line
			return
		}
		t.head(bytes.TrimLeft(b, "\r\n"))
	case ftChunkLine:
		size := last
		if k := bytes.IndexByte(size, ';'); k >= 0 {
			size = size[:k]
		}
		n, ok := h1wire.ParseChunkSize(bytes.TrimRight(size, " \t"))
		t.buf = t.buf[:0]
		switch {
		case !ok:
			t.off() // net/http rejects the body; the connection closes
		case n == 0:
			t.state = ftTrailer
		default:
			t.state, t.left = ftChunkData, n
		}
	case ftChunkEnd:
		t.buf = t.buf[:0]
		if len(last) != 0 {
			t.off()
			return
		}
		t.state = ftChunkLine
	case ftTrailer:
		if len(last) == 0 {
			t.buf = t.buf[:0]
			t.state = ftHead
		}
	}
}

// head records the verdict of a whole request head and sets the body's
// framing.
func (t *framingTracker) head(h []byte) {
	defer func() {
		if t.state != ftOff {
			t.buf = t.buf[:0]
		}
	}()
	line, rest, _ := bytes.Cut(h, []byte("\n"))
	f := strings.Fields(string(bytes.TrimRight(line, "\r")))
	v := headVerdict{}
	http10 := false
	if len(f) == 3 {
		v.method, v.target = f[0], f[1]
		major, minor, ok := http.ParseHTTPVersion(f[2])
		http10 = ok && (major < 1 || major == 1 && minor < 1)
	}
	var cl, te, upgradeHdr, connUpgrade bool
	chunked := false
	var length int64 = -1
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\n"))
		l = bytes.TrimRight(l, "\r")
		if len(l) > 0 && (l[0] == ' ' || l[0] == '\t') {
			// Obsolete line folding (RFC 9112 §5.2): net/http joins the
			// line to the previous one; a proxy in front may not. Refused,
			// as nginx does.
			v.refuse = "a header line is folded onto the previous one (obsolete line folding)"
		}
		colon := bytes.IndexByte(l, ':')
		if colon <= 0 {
			continue
		}
		name, value := l[:colon], bytes.Trim(l[colon+1:], " \t")
		switch {
		case h1wire.ASCIIEqualFold(name, "content-length"):
			cl = true
			if n, err := h1wire.ParseDecimal(value); err == nil {
				length = int64(n)
			}
		case h1wire.ASCIIEqualFold(name, "transfer-encoding"):
			te = true
			tok := value
			if k := bytes.LastIndexByte(value, ','); k >= 0 {
				tok = bytes.Trim(value[k+1:], " \t")
			}
			chunked = h1wire.ASCIIEqualFold(tok, "chunked")
		case h1wire.ASCIIEqualFold(name, "upgrade"):
			upgradeHdr = true
		case h1wire.ASCIIEqualFold(name, "connection"):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				if h1wire.ASCIIEqualFold(bytes.Trim(tok, " \t"), "upgrade") {
					connUpgrade = true
				}
			}
		}
	}
	switch {
	case cl && te:
		v.refuse = "the request has both Content-Length and Transfer-Encoding"
	case te && http10:
		// RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has
		// faulty framing. net/http ignores the header and reads the body
		// as the next request; a front proxy may read it as chunked.
		// Refused, as nginx does.
		v.refuse = "an HTTP/1.0 request has Transfer-Encoding"
	}
	t.verdicts = append(t.verdicts, v)
	if len(t.verdicts) > 64 {
		// net/http serves in order and matches by method and target; a
		// verdict nobody took (a request net/http answered itself) is old.
		t.verdicts = append(t.verdicts[:0], t.verdicts[len(t.verdicts)-32:]...)
	}
	switch {
	case v.refuse != "", upgradeHdr && connUpgrade, te && !chunked:
		t.off() // the connection closes, or becomes a tunnel
	case chunked:
		t.state = ftChunkLine
	case length > 0:
		t.state, t.left = ftBody, length
	case cl && length < 0:
		t.off() // a bad Content-Length: net/http answers 400 and closes
	default:
		t.state = ftHead
	}
}

// ConnTracked returns the TrackedConn of the connection r came on (nil:
// not a handed-off connection).
func ConnTracked(ctx context.Context) *TrackedConn {
	tc, _ := ctx.Value(TrackedConnKey{}).(*TrackedConn)
	return tc
}

// Request body guard.

// errBodyTimeout ends a request body whose client sent nothing for the
// body timeout (408).
var errBodyTimeout = errors.New("client sent no request body bytes within the body timeout")

// BodyGuard bounds the idle time between a request body's bytes (the
// client connection's read deadline, re-armed as bytes come) and records
// why a body read failed, so the error page is the client's fault (408,
// 400) rather than the backend's (502).
type BodyGuard struct {
	RC      io.ReadCloser
	Ctl     *http.ResponseController
	Timeout time.Duration

	mu      sync.Mutex
	armedAt time.Time
	closed  bool
	// code is the client's fault in a failed read (408, 400; 0: none).
	code int
}

// Failure returns the status a failed body read calls for (0: none).
func (g *BodyGuard) Failure() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.code
}

func (g *BodyGuard) Read(p []byte) (int, error) {
	g.mu.Lock()
	if !g.closed {
		// Re-armed at most every timeout/8 (at most 1 s): the idle bound is
		// thus between 7/8 of the timeout and the timeout.
		if now := time.Now(); now.Sub(g.armedAt) >= min(g.Timeout/8, time.Second) {
			g.armedAt = now
			_ = g.Ctl.SetReadDeadline(now.Add(g.Timeout))
		}
	}
	g.mu.Unlock()
	n, err := g.RC.Read(p)
	if err != nil {
		g.mu.Lock()
		if errors.Is(err, io.EOF) {
			g.disarmLocked(time.Time{}) // net/http's next read must not inherit it
		} else {
			if g.code == 0 {
				g.code = http.StatusBadRequest
				if isTimeoutErr(err) {
					g.code = http.StatusRequestTimeout
					err = errBodyTimeout
				}
			}
			// Past: net/http's discard of the rest fails at once and the
			// connection closes (it would wait for the client otherwise).
			g.disarmLocked(time.Unix(1, 0))
		}
		g.mu.Unlock()
	}
	return n, err
}

// Close keeps an armed deadline: a body closed before its end (a backend
// that answered early) is then discarded by net/http under it.
func (g *BodyGuard) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	return g.RC.Close()
}

// disarmLocked stops re-arming and sets the read deadline to until (zero:
// none), once.
func (g *BodyGuard) disarmLocked(until time.Time) {
	if !g.closed {
		g.closed = true
		if !g.armedAt.IsZero() {
			_ = g.Ctl.SetReadDeadline(until)
		}
	}
}

func isTimeoutErr(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// Header names spelled with underscores.
