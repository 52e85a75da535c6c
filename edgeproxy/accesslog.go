package edgeproxy

import (
	"cmp"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/accesslog"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
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
// routeNames are the app, service and instance of a line: rm's when the
// request was proxied, else the route rt's (nil: unknown host).
// LogServeHTTP writes the line of a request ServeHTTP answered: proxied
// to rm's backend, or answered by the edge (rm nil) for route rt (nil: no
// route).
// ExchangeAccess is what an Exchange keeps for its access-log line: the
// HTTP/1.1 connection whose current request it is (hc), or the HTTP/2
// stream and its request's pseudo-headers (fast path); BytesOut is the
// body bytes sent and GenID the request id the fast path generated.
// markBody notes that the current answer's head is written: what is
// written from now on is body (finishH1 counts it).
// logExchange writes the line of an exchange of the HTTP/1.1 loops or of
// the HTTP/2 fast path (DoneH1).
// EnsureRequestID returns r's X-Request-Id, first setting a generated one
// when it has none, so the id the backend gets (policy.SetForwarded keeps it) is
// the one logged; "" without an access log (a nil a).
// answerUnrouted answers 404 for a Host no route matches and counts it.
func (s *Server) answerUnrouted(w http.ResponseWriter, r *http.Request) {
	s.Metrics.Unrouted.Inc()
	dataplane.WriteEdgeError(w, http.StatusNotFound, "gordon-edge: no route for host "+dataplane.StripPort(r.Host)+"\n")
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
	rt      *dataplane.HTTPRoute
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
func noteRoute(w http.ResponseWriter, rt *dataplane.HTTPRoute) {
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
		s.Metrics.Access.LogServeHTTP(r, nil, aw.rt, cmp.Or(aw.code, http.StatusOK), aw.written, start, r.Header.Get("X-Request-Id"))
	}
	*aw = accessWriter{}
	accessWriterPool.Put(aw)
}

// watchAccessLog reports the access log's failing writes: the first of a
// run is logged (error), and the recovery (info); the series
// gordon_edge_access_log_write_errors_total and
// gordon_edge_access_log_dropped_lines_total count failed writes and lines
// dropped while the output failed.
func watchAccessLog(reg *prometheus.Registry, a *accesslog.Log, logger hclog.Logger, name string) {
	a.SetReporter(func(err error) {
		if err != nil {
			logger.Error("access log: writing failed; lines are kept (up to 64 KiB) and retried every 500 ms", "destination", name, "error", err)
			return
		}
		logger.Info("access log: writing again", "destination", name)
	})
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "gordon_edge", Name: "access_log_write_errors_total",
			Help: "Writes to the access log that failed (a full disk, a closed pipe); each is retried."}, func() float64 { return float64(a.WriteErrors()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "gordon_edge", Name: "access_log_dropped_lines_total",
			Help: "Access log lines dropped because the buffer was full while writes failed."}, func() float64 { return float64(a.Dropped()) }),
	)
}
