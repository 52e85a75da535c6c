package accesslog

import (
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Log is the access log (R74): one JSON object per line for
// every HTTP request, proxied or answered by the edge itself (unknown
// host, stopped or held service, redirect). A line is encoded by appending
// into a pooled buffer (no reflection, no per-field allocation), copied
// into one buffered writer under a mutex, and the writer is flushed every
// flushEvery and on Close. Fields, in this order:
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
type Log struct {
	mu  sync.Mutex
	out io.Writer
	// buf holds whole lines not yet written (at most bufSize bytes);
	// failing, torn, errs, dropped and report are writer.go's.
	buf     []byte
	failing bool
	torn    bool
	errs    atomic.Int64
	dropped atomic.Int64
	report  func(err error)
	// trusted are the proxies whose X-Forwarded-For is followed (the
	// edge's Config.TrustedProxies).
	trusted []netip.Prefix
	times   timeCache
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// flushEvery bounds how long a line waits in the buffer.
const flushEvery = 500 * time.Millisecond

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// New starts an access log writing to out (buffered, bufSize) with its
// periodic flush; Close flushes and stops it. A failed write keeps its
// lines buffered and is retried by the periodic flush (writer.go). trusted are the proxies
// whose X-Forwarded-For names the client.
func New(out io.Writer, trusted []netip.Prefix) *Log {
	a := &Log{
		out: out, buf: make([]byte, 0, bufSize), trusted: trusted,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go a.flushLoop()
	return a
}

func (a *Log) flushLoop() {
	defer close(a.done)
	t := time.NewTicker(flushEvery)
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

// Flush writes the buffered lines out (a retry while writes fail).
func (a *Log) Flush() {
	a.mu.Lock()
	_ = a.flushLocked()
	a.mu.Unlock()
}

// Close stops the periodic flush and flushes. The output is the caller's
// to close. Idempotent.
func (a *Log) Close() error {
	var err error
	a.once.Do(func() {
		close(a.stop)
		<-a.done
		a.mu.Lock()
		defer a.mu.Unlock()
		err = a.flushLocked()
	})
	return err
}

// Entry is one request's line before encoding. The byte slices point
// into the connection's buffers and are only read while the entry is
// encoded (Write).
type Entry struct {
	Host, Method, Path []byte
	// HostS, MethodS, PathS are used when the []byte forms are nil.
	HostS, MethodS, PathS string
	Status                int
	// Start is when the request was routed (duration_ms runs from it).
	Start    time.Time
	BytesOut int64
	// App and Service are the route's ("" for an unknown host),
	// Instance the container that answered ("" when none did).
	App, Service, Instance string
	Client                 string
	// RequestID is the X-Request-Id sent to the backend; RequestIDS is
	// used when it is nil.
	RequestID  []byte
	RequestIDS string
	Protocol   string
}

// appendEither appends b as a JSON string, or s when b is nil.
func appendEither(dst, b []byte, s string) []byte {
	if b == nil {
		return appendJSONString(dst, s)
	}
	return appendJSONString(dst, b)
}

// Write encodes e and queues it for the output.
func (a *Log) Write(e *Entry) {
	bp := bufPool.Get().(*[]byte)
	now := time.Now()
	b := appendLine((*bp)[:0], e, now, &a.times)
	a.mu.Lock()
	a.queueLocked(b)
	a.mu.Unlock()
	if cap(b) <= 16<<10 {
		*bp = b
		bufPool.Put(bp)
	}
}

// appendLine appends e's JSON line (ending in '\n') to b, ending at now
// (the time field; its second formatted once through tc).
func appendLine(b []byte, e *Entry, now time.Time, tc *timeCache) []byte {
	b = append(b, `{"time":"`...)
	b = tc.append(b, now)
	b = append(b, `","host":`...)
	b = appendEither(b, e.Host, e.HostS)
	b = append(b, `,"method":`...)
	b = appendEither(b, e.Method, e.MethodS)
	b = append(b, `,"path":`...)
	b = appendEither(b, e.Path, e.PathS)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"duration_ms":`...)
	us := max(now.Sub(e.Start).Microseconds(), 0)
	b = strconv.AppendInt(b, us/1000, 10)
	b = append(b, '.', byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10))
	b = append(b, `,"bytes_out":`...)
	b = strconv.AppendInt(b, max(e.BytesOut, 0), 10)
	b = append(b, `,"app":`...)
	b = appendJSONString(b, e.App)
	b = append(b, `,"service":`...)
	b = appendJSONString(b, e.Service)
	b = append(b, `,"instance":`...)
	b = appendJSONString(b, e.Instance)
	b = append(b, `,"client":`...)
	b = appendJSONString(b, e.Client)
	b = append(b, `,"request_id":`...)
	b = appendEither(b, e.RequestID, e.RequestIDS)
	b = append(b, `,"protocol":"`...)
	b = append(b, e.Protocol...)
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
		if err != nil || !contains(trusted, ip.Unmap()) {
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

// contains reports whether a is in one of ps.
func contains(ps []netip.Prefix, a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientBehind is the client of a request that came through peer, a
// trusted proxy, with the X-Forwarded-For chain xff (comma-joined): the
// rightmost entry that is not a trusted proxy (clientAfterTrusted).
func (a *Log) ClientBehind(peer, xff string) string {
	return clientAfterTrusted(peer, true, xff, a.trusted)
}

// WriteRequest writes the line of r, a request a net/http server
// answered: the host, method, path, client and protocol come from r, the
// rest from e.
func (a *Log) WriteRequest(r *http.Request, e *Entry) {
	peer := r.RemoteAddr
	if ap, err := netip.ParseAddrPort(peer); err == nil {
		peer = ap.Addr().Unmap().String()
	}
	e.Client = peer
	if len(a.trusted) > 0 {
		if ip, err := netip.ParseAddr(peer); err == nil && contains(a.trusted, ip) {
			e.Client = a.ClientBehind(peer, strings.Join(r.Header.Values("X-Forwarded-For"), ","))
		}
	}
	e.HostS, e.MethodS, e.PathS, e.Protocol = r.Host, r.Method, r.RequestURI, protoName(r)
	if e.PathS == "" && r.URL != nil {
		e.PathS = r.URL.RequestURI()
	}
	a.Write(e)
}
