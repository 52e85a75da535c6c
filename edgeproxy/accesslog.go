package edgeproxy

import (
	"cmp"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/accesslog"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
)

// Access log destinations (gordon-edge --access-log; internal/accesslog).
const (
	AccessLogOff    = accesslog.Off
	AccessLogStdout = accesslog.Stdout
	// DefaultAccessLogMaxSize is the size at which an access log file is
	// rotated (--access-log-max-size), DefaultAccessLogKeep how many
	// rotated files are kept (--access-log-keep).
	DefaultAccessLogMaxSize = accesslog.DefaultMaxSize
	DefaultAccessLogKeep    = accesslog.DefaultKeep
)

// OpenAccessLog opens the access log destination dest: "off" (nil, no
// access log), "stdout", or a file path rotated by size (maxSize <= 0:
// DefaultAccessLogMaxSize, keep < 0: DefaultAccessLogKeep; see
// accesslog.Open). The caller closes what it returns.
func OpenAccessLog(dest string, maxSize int64, keep int) (io.WriteCloser, error) {
	return accesslog.Open(dest, maxSize, keep)
}

// accessLog is the edge's access log (Config.AccessLog): the line
// format and the buffered writer are internal/accesslog's; this side
// fills a line from the request the edge served.
type accessLog struct{ *accesslog.Log }

func newAccessLog(out io.Writer, trusted []netip.Prefix) *accessLog {
	return &accessLog{accesslog.New(out, trusted)}
}

// routeNames are the app, service and instance of a line: rm's when the
// request was proxied, else the route rt's (nil: unknown host).
func routeNames(e *accesslog.Entry, rm *routeMetrics, rt *httpRoute) {
	if rm != nil {
		e.App, e.Service, e.Instance = rm.app, rm.service, rm.instance
	} else if rt != nil {
		e.App, e.Service = rt.app, rt.service
	}
}

// logServeHTTP writes the line of a request ServeHTTP answered: proxied
// to rm's backend, or answered by the edge (rm nil) for route rt (nil: no
// route).
func (a *accessLog) logServeHTTP(r *http.Request, rm *routeMetrics, rt *httpRoute, status int, bytesOut int64, start time.Time, requestID string) {
	e := accesslog.Entry{Status: status, Start: start, BytesOut: bytesOut, RequestIDS: requestID}
	routeNames(&e, rm, rt)
	a.WriteRequest(r, &e)
}

// exchangeAccess is what an h1Exchange keeps for its access-log line: the
// HTTP/1.1 connection whose current request it is (hc), or the HTTP/2
// stream and its request's pseudo-headers (fast path); bytesOut is the
// body bytes sent and genID the request id the fast path generated.
type exchangeAccess struct {
	hc                      *h1Conn
	h2                      *h2Edge
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
	e := accesslog.Entry{Status: code, Start: ex.start, BytesOut: acc.bytesOut}
	routeNames(&e, rm, nil)
	switch {
	case acc.hc != nil:
		hc := acc.hc
		req := &hc.req
		e.Host, e.Method, e.Path, e.Protocol = req.Host, req.Method, req.URI, "HTTP/1.1"
		e.Client = hc.peer
		var xff []byte
		for _, h := range req.Headers {
			switch h.Kind {
			case h1wire.HdrRequestID:
				if req.RequestID && len(h.Value) > 0 {
					e.RequestID = h.Value
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
			e.RequestID = req.GenID.B[:req.GenID.N]
		}
		if hc.trusted {
			e.Client = a.ClientBehind(hc.peer, string(xff))
		}
	case acc.h2 != nil:
		c := acc.h2
		e.HostS, e.MethodS, e.PathS, e.Protocol = acc.authority, acc.method, acc.path, "HTTP/2"
		e.Client = c.peer
		e.RequestID, e.RequestIDS = acc.genID.B[:acc.genID.N], acc.genID.Given
		if e.RequestIDS != "" {
			e.RequestID = nil
		}
	default:
		return
	}
	a.Write(&e)
}

// ensureRequestID returns r's X-Request-Id, first setting a generated one
// when it has none, so the id the backend gets (policy.SetForwarded keeps it) is
// the one logged; "" without an access log (a nil a).
func (a *accessLog) ensureRequestID(r *http.Request) string {
	if a == nil {
		return ""
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		return id
	}
	id := string(policy.AppendRequestID(nil))
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
