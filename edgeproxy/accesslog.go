package edgeproxy

import (
	"bufio"
	"cmp"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// Access log (issue 27 item 5): one JSON object per line for every HTTP
// request, proxied or answered by the edge itself (unknown host, stopped
// or held service, redirect), written to Config.AccessLog. A line is encoded by appending into a pooled buffer
// (no reflection, no per-field allocation), copied into one buffered writer
// under a mutex, and the writer is flushed every accessLogFlushEvery and on
// Close. Fields, in this order:
//
//	time         RFC 3339 UTC with milliseconds, when the request ended
//	host         the Host (HTTP/1.1) or :authority (HTTP/2) as sent
//	method, path the request method and target (path and query)
//	status       the status answered (499: the client went away first)
//	duration_ms  from routing to the end of the answer, in ms (3 decimals)
//	bytes_out    response body bytes sent to the client (chunk framing
//	             included when the backend chunked)
//	app, service the route's ("" for an unknown host)
//	instance     the container that answered ("" when none did)
//	client       the client address after trusted proxies (the rightmost
//	             X-Forwarded-For entry that is not a trusted proxy)
//	request_id   the X-Request-Id sent to the backend (the client's, or
//	             the one the edge generated)
//	protocol     "HTTP/1.1", "HTTP/1.0" or "HTTP/2"
type accessLog struct {
	mu sync.Mutex
	bw *bufio.Writer
	// trusted are the proxies whose X-Forwarded-For is followed (Config.TrustedProxies).
	trusted []netip.Prefix
	times   timeCache
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// accessLogFlushEvery bounds how long a line waits in the buffer.
const accessLogFlushEvery = 500 * time.Millisecond

var accessBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// newAccessLog starts an access log writing to out (buffered, 64 KiB)
// with its periodic flush; Close flushes and stops it.
func newAccessLog(out io.Writer, trusted []netip.Prefix) *accessLog {
	a := &accessLog{
		bw: bufio.NewWriterSize(out, 64<<10), trusted: trusted,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go a.flushLoop()
	return a
}

func (a *accessLog) flushLoop() {
	defer close(a.done)
	t := time.NewTicker(accessLogFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			a.Flush()
		}
	}
}

// Flush writes the buffered lines out.
func (a *accessLog) Flush() {
	a.mu.Lock()
	_ = a.bw.Flush()
	a.mu.Unlock()
}

// Close stops the periodic flush and flushes. The output is the caller's
// to close (Config.AccessLog). Idempotent.
func (a *accessLog) Close() error {
	var err error
	a.once.Do(func() {
		close(a.stop)
		<-a.done
		a.mu.Lock()
		defer a.mu.Unlock()
		err = a.bw.Flush()
	})
	return err
}

// accessEntry is one request's line before encoding. The byte slices
// point into the connection's buffers and are only read while the entry
// is encoded.
type accessEntry struct {
	host, method, path []byte
	// hostS, methodS, pathS are used when the []byte forms are nil.
	hostS, methodS, pathS string
	status                int
	start                 time.Time
	bytesOut              int64
	rm                    *routeMetrics // nil: not proxied
	// rt is the route when rm is nil (nil: unknown host).
	rt         *httpRoute
	client     string
	requestID  []byte
	requestIDS string
	protocol   string
}

// appendEither appends b as a JSON string, or s when b is nil.
func appendEither(dst, b []byte, s string) []byte {
	if b == nil {
		return appendJSONString(dst, s)
	}
	return appendJSONString(dst, b)
}

// write encodes e and queues it for the output.
func (a *accessLog) write(e *accessEntry) {
	bp := accessBufPool.Get().(*[]byte)
	now := time.Now()
	b := appendAccessLine((*bp)[:0], e, now, &a.times)
	a.mu.Lock()
	if a.bw.Available() < len(b) {
		// Whole lines per write: a file shared with the edge of a
		// hand-over (O_APPEND) or rotated never holds half a line.
		_ = a.bw.Flush()
	}
	_, _ = a.bw.Write(b)
	a.mu.Unlock()
	if cap(b) <= 16<<10 {
		*bp = b
		accessBufPool.Put(bp)
	}
}

// appendAccessLine appends e's JSON line (ending in '\n') to b, ending
// at now (the time field; its second formatted once through tc).
func appendAccessLine(b []byte, e *accessEntry, now time.Time, tc *timeCache) []byte {
	b = append(b, `{"time":"`...)
	b = tc.append(b, now)
	b = append(b, `","host":`...)
	b = appendEither(b, e.host, e.hostS)
	b = append(b, `,"method":`...)
	b = appendEither(b, e.method, e.methodS)
	b = append(b, `,"path":`...)
	b = appendEither(b, e.path, e.pathS)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.status), 10)
	b = append(b, `,"duration_ms":`...)
	us := max(now.Sub(e.start).Microseconds(), 0)
	b = strconv.AppendInt(b, us/1000, 10)
	b = append(b, '.', byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10))
	b = append(b, `,"bytes_out":`...)
	b = strconv.AppendInt(b, max(e.bytesOut, 0), 10)
	var app, service, instance string
	if e.rm != nil {
		app, service, instance = e.rm.app, e.rm.service, e.rm.instance
	} else if e.rt != nil {
		app, service = e.rt.app, e.rt.service
	}
	b = append(b, `,"app":`...)
	b = appendJSONString(b, app)
	b = append(b, `,"service":`...)
	b = appendJSONString(b, service)
	b = append(b, `,"instance":`...)
	b = appendJSONString(b, instance)
	b = append(b, `,"client":`...)
	b = appendJSONString(b, e.client)
	b = append(b, `,"request_id":`...)
	b = appendEither(b, e.requestID, e.requestIDS)
	b = append(b, `,"protocol":"`...)
	b = append(b, e.protocol...)
	return append(b, "\"}\n"...)
}

const hexDigits = "0123456789abcdef"

// timeCache formats the time field: the date and second once per second
// (time.Format costs several times the rest of a line), the milliseconds
// per line.
type timeCache struct{ p atomic.Pointer[timePrefix] }

// timePrefix is "2006-01-02T15:04:05." in UTC for the Unix second sec.
type timePrefix struct {
	sec int64
	b   [20]byte
}

// append appends now as RFC 3339 UTC with milliseconds
// ("2006-01-02T15:04:05.000Z").
func (tc *timeCache) append(b []byte, now time.Time) []byte {
	sec := now.Unix()
	p := tc.p.Load()
	if p == nil || p.sec != sec {
		p = &timePrefix{sec: sec}
		now.UTC().AppendFormat(p.b[:0], "2006-01-02T15:04:05.")
		tc.p.Store(p)
	}
	b = append(b, p.b[:]...)
	ms := now.Nanosecond() / 1e6
	return append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString[T string | []byte](b []byte, s T) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// clientAfterTrusted returns the client address of a request from peer:
// peer itself unless it is a trusted proxy; then the rightmost entry of
// the X-Forwarded-For chain xff that is not a trusted proxy (the leftmost
// when all are; peer when the chain is empty).
func clientAfterTrusted(peer string, peerTrusted bool, xff string, trusted []netip.Prefix) string {
	if !peerTrusted || xff == "" {
		return peer
	}
	rest := xff
	last := peer
	for rest != "" {
		i := strings.LastIndexByte(rest, ',')
		entry := strings.TrimSpace(rest[i+1:])
		if i < 0 {
			rest = ""
		} else {
			rest = rest[:i]
		}
		if entry == "" {
			continue
		}
		last = entry
		ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(entry, "["), "]"))
		if err != nil || !prefixesContain(trusted, ip.Unmap()) {
			return entry
		}
	}
	return last
}

// protoName is the protocol field of a net/http request.
func protoName(r *http.Request) string {
	switch {
	case r.ProtoMajor == 2:
		return "HTTP/2"
	case r.ProtoMajor == 1 && r.ProtoMinor == 0:
		return "HTTP/1.0"
	}
	return "HTTP/1.1"
}

// logServeHTTP writes the line of a request ServeHTTP answered: proxied
// to rm's backend, or answered by the edge (rm nil) for route rt (nil: no
// route).
func (a *accessLog) logServeHTTP(r *http.Request, rm *routeMetrics, rt *httpRoute, status int, bytesOut int64, start time.Time, requestID string) {
	peer := r.RemoteAddr
	if ap, err := netip.ParseAddrPort(peer); err == nil {
		peer = ap.Addr().Unmap().String()
	}
	client := peer
	if len(a.trusted) > 0 {
		if ip, err := netip.ParseAddr(peer); err == nil && prefixesContain(a.trusted, ip) {
			client = clientAfterTrusted(peer, true, strings.Join(r.Header.Values("X-Forwarded-For"), ","), a.trusted)
		}
	}
	e := accessEntry{
		hostS: r.Host, methodS: r.Method, pathS: r.RequestURI,
		status: status, start: start, bytesOut: bytesOut, rm: rm, rt: rt,
		client: client, requestIDS: requestID, protocol: protoName(r),
	}
	if e.pathS == "" && r.URL != nil {
		e.pathS = r.URL.RequestURI()
	}
	a.write(&e)
}

// exchangeAccess is what an h1Exchange keeps for its access-log line: the
// HTTP/1.1 connection whose current request it is (hc), or the HTTP/2
// stream and its request's pseudo-headers (fast path); bytesOut is the
// body bytes sent and genID the request id the fast path generated.
type exchangeAccess struct {
	hc                      *h1Conn
	st                      *h2Stream
	method, path, authority string
	bytesOut                int64
	genID                   h1wire.RequestIDBuf
}

// markBody notes that the current answer's head is written: what is
// written from now on is body (finishH1 counts it).
func (hc *h1Conn) markBody() {
	hc.bodyMark = hc.sent + int64(hc.bw.Buffered())
}

// logExchange writes the line of an exchange of the HTTP/1.1 loops or of
// the HTTP/2 fast path (doneH1).
func (a *accessLog) logExchange(ex *h1Exchange, rm *routeMetrics, code int) {
	acc := &ex.acc
	e := accessEntry{status: code, start: ex.start, bytesOut: acc.bytesOut, rm: rm}
	switch {
	case acc.hc != nil:
		hc := acc.hc
		req := &hc.req
		e.host, e.method, e.path, e.protocol = req.Host, req.Method, req.URI, "HTTP/1.1"
		e.client = hc.peer
		var xff []byte
		for _, h := range req.Headers {
			switch h.Kind {
			case h1wire.HdrRequestID:
				if req.RequestID && len(h.Value) > 0 {
					e.requestID = h.Value
				}
			case h1wire.HdrForwarded:
				if hc.trusted && h1wire.ASCIIEqualFold(h.Name, "x-forwarded-for") {
					if len(xff) > 0 {
						xff = append(xff, ',')
					}
					xff = append(xff, h.Value...)
				}
			}
		}
		if !req.RequestID {
			e.requestID = req.GenID.B[:req.GenID.N]
		}
		if hc.trusted {
			e.client = clientAfterTrusted(hc.peer, true, string(xff), a.trusted)
		}
	case acc.st != nil:
		c := acc.st.c
		e.hostS, e.methodS, e.pathS, e.protocol = acc.authority, acc.method, acc.path, "HTTP/2"
		e.client = c.peer
		e.requestID, e.requestIDS = acc.genID.B[:acc.genID.N], acc.genID.Given
		if e.requestIDS != "" {
			e.requestID = nil
		}
	default:
		return
	}
	a.write(&e)
}

// ensureRequestID returns r's X-Request-Id, first setting a generated one
// when it has none, so the id the backend gets (setForwarded keeps it) is
// the one logged; "" without an access log (a nil a).
func (a *accessLog) ensureRequestID(r *http.Request) string {
	if a == nil {
		return ""
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		return id
	}
	id := string(appendRequestID(nil))
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set("X-Request-Id", id)
	return id
}

// answerUnrouted answers 404 for a Host no route matches and counts it.
func (s *Server) answerUnrouted(w http.ResponseWriter, r *http.Request) {
	s.metrics.unrouted.Inc()
	writeEdgeError(w, http.StatusNotFound, "gordon-edge: no route for host "+stripPort(r.Host)+"\n")
}

// accessWriter is ServeHTTP's writer while the access log is on: it
// records what the edge answered itself when the request was not proxied
// (unknown host, stopped or held service, HTTPS redirect, a smuggling
// 400), so that those requests get their line too; rt is the route found
// (nil: none) and logged whether the proxied path wrote the line itself.
type accessWriter struct {
	http.ResponseWriter
	code    int
	written int64
	rt      *httpRoute
	logged  bool
}

var accessWriterPool = sync.Pool{New: func() any { return new(accessWriter) }}

func (w *accessWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *accessWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	return n, err
}

// Flush passes a flush on (streamed answers).
func (w *accessWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer (hijack).
func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// noteRoute records rt as the request's route on w when w is an
// accessWriter.
func noteRoute(w http.ResponseWriter, rt *httpRoute) {
	if aw, ok := w.(*accessWriter); ok {
		aw.rt = rt
	}
}

// noteLogged records on w (an accessWriter) that the line is written.
func noteLogged(w http.ResponseWriter) {
	if aw, ok := w.(*accessWriter); ok {
		aw.logged = true
	}
}

// serveHTTPLogged is serveHTTP with the line of a request the edge
// answered itself.
func (s *Server) serveHTTPLogged(w http.ResponseWriter, r *http.Request) {
	aw := accessWriterPool.Get().(*accessWriter)
	*aw = accessWriter{ResponseWriter: w}
	start := time.Now()
	s.serveHTTP(aw, r)
	if !aw.logged {
		s.metrics.access.logServeHTTP(r, nil, aw.rt, cmp.Or(aw.code, http.StatusOK), aw.written, start, r.Header.Get("X-Request-Id"))
	}
	*aw = accessWriter{}
	accessWriterPool.Put(aw)
}
