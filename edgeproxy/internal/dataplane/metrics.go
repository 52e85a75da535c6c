package dataplane

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/handoff"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the Prometheus series the admin endpoint serves on GET
// /Metrics. Label children are resolved when a snapshot is
// built (routeMetrics), so the request path does no label hashing: it
// increments precomputed counters and observes a precomputed histogram.
//
// Series (all prefixed gordon_edge_):
//   - http_requests_total{app,service,backend,code}  code is the class "2xx".."5xx"
//   - http_request_duration_seconds{app,service,backend}  histogram, until the
//     handler returns (for an upgrade: the tunnel's life)
//   - http_in_flight_requests{app,service,backend}
//   - http_proxy_errors_total{app,service,backend,status}  edge-generated 502/503/504
//   - http_unrouted_requests_total  404s for unknown hosts
//   - held  HTTP requests and TCP connections held for a service between
//     generations (SPEC R58)
//   - applied_generation  the route table generation serving
//   - event_loop_requests_total, event_loop_handoffs_total  requests the
//     event loops served whole, connections they handed to a goroutine
type Metrics struct {
	Reg          *prometheus.Registry
	Requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	InFlight     *prometheus.GaugeVec
	proxyErrs    *prometheus.CounterVec
	Unrouted     prometheus.Counter
	Held         prometheus.Gauge
	Generation   prometheus.Gauge
	LoopRequests prometheus.Counter
	LoopHandoffs prometheus.Counter
	// ejections counts passive-health ejections by backend and reason,
	// retries the requests sent again to another instance (health.go).
	ejections *prometheus.CounterVec
	retries   *prometheus.CounterVec
	// Access is the access log every routeMetrics writes to (nil: off).
	Access *accessLog
}

func NewMetrics() *Metrics {
	m := &Metrics{
		Reg: prometheus.NewRegistry(),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gordon_edge", Name: "http_requests_total",
			Help: "HTTP requests proxied, by route, backend and status class.",
		}, []string{"app", "service", "backend", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "gordon_edge", Name: "http_request_duration_seconds",
			Help:    "Time from routing a request until its response was fully sent.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"app", "service", "backend"}),
		InFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "gordon_edge", Name: "http_in_flight_requests",
			Help: "HTTP requests (and upgraded connections) being proxied.",
		}, []string{"app", "service", "backend"}),
		proxyErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gordon_edge", Name: "http_proxy_errors_total",
			Help: "Error pages the edge answered itself because the backend failed (502, 503, 504).",
		}, []string{"app", "service", "backend", "status"}),
		Unrouted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "gordon_edge", Name: "http_unrouted_requests_total",
			Help: "Requests answered 404 because no route matched the Host.",
		}),
		Held: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "gordon_edge", Name: "held",
			Help: "HTTP requests and TCP connections held for a service between generations.",
		}),
		Generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "gordon_edge", Name: "applied_generation",
			Help: "Generation of the route table being served.",
		}),
		LoopRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "gordon_edge", Name: "event_loop_requests_total",
			Help: "HTTP requests an event loop served whole.",
		}),
		LoopHandoffs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "gordon_edge", Name: "event_loop_handoffs_total",
			Help: "Client connections an event loop handed to a goroutine (a request or answer it does not serve whole, a slow client).",
		}),
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gordon_edge", Name: "backend_ejections_total",
			Help: "Times a backend (instance) was ejected by passive health, by reason.",
		}, []string{"backend", "reason"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gordon_edge", Name: "backend_retries_total",
			Help: "Requests and TCP connects sent again to another instance after this backend failed before any response byte.",
		}, []string{"backend"}),
	}
	m.Reg.MustRegister(m.Requests, m.duration, m.InFlight, m.proxyErrs, m.Unrouted, m.Held, m.Generation, m.LoopRequests, m.LoopHandoffs,
		m.ejections, m.retries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Reg, promhttp.HandlerOpts{})
}

// RouteMetrics are the precomputed series of one (route, backend) pair.
type RouteMetrics struct {
	// byClass[c] counts responses with status c×100..c×100+99 (1..5);
	// byClass[0] counts anything else.
	byClass  [6]prometheus.Counter
	duration prometheus.Observer
	InFlight prometheus.Gauge
	errs     map[int]prometheus.Counter
	// app, service and instance (the container) name the pair in the
	// access log, written to access (nil: off).
	app, service, instance string
	Access                 *accessLog
	// backend receives the cumulative request and error counts (nil in
	// unit tests).
	backend *Backend
}

var classLabels = [6]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

// forRoute resolves the children for app/service/backend (at snapshot
// build).
func (m *Metrics) forRoute(app, service, backend string) *RouteMetrics {
	rm := &RouteMetrics{
		duration: m.duration.WithLabelValues(app, service, backend),
		InFlight: m.InFlight.WithLabelValues(app, service, backend),
		errs:     make(map[int]prometheus.Counter, 3),
		app:      app, service: service, Access: m.Access,
	}
	for i, c := range classLabels {
		rm.byClass[i] = m.Requests.WithLabelValues(app, service, backend, c)
	}
	for _, code := range []int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		rm.errs[code] = m.proxyErrs.WithLabelValues(app, service, backend, classCode(code))
	}
	return rm
}

func classCode(code int) string {
	switch code {
	case http.StatusBadGateway:
		return "502"
	case http.StatusServiceUnavailable:
		return "503"
	default:
		return "504"
	}
}

// forget drops every series of backend (when the registry evicts it), so
// series do not pile up across deploys.
func (m *Metrics) forget(backend string) {
	l := prometheus.Labels{"backend": backend}
	m.Requests.DeletePartialMatch(l)
	m.duration.DeletePartialMatch(l)
	m.InFlight.DeletePartialMatch(l)
	m.proxyErrs.DeletePartialMatch(l)
	m.ejections.DeletePartialMatch(l)
	m.retries.DeletePartialMatch(l)
}

// ejected counts an ejection of backend for reason.
func (m *Metrics) ejected(backend, reason string) {
	m.ejections.WithLabelValues(backend, reason).Inc()
}

// Retried counts a request (or connect) retried away from backend.
func (m *Metrics) Retried(backend string) {
	m.retries.WithLabelValues(backend).Inc()
}

// StatusWriter records the status a handler wrote, and whether the edge
// wrote an error page itself. It unwraps for http.ResponseController, so
// flushing and hijacking (upgrades) reach the server's writer.
type StatusWriter struct {
	http.ResponseWriter
	Code     int
	ProxyErr int
	// Written counts the body bytes written (the access log's bytes_out).
	Written int64
	// Route is the request's route (error pages name its app and service);
	// guard its request body's guard (nil: no body).
	Route *HTTPRoute
	Guard *handoff.BodyGuard
	// HSTS is the Strict-Transport-Security value set on the final
	// answer in place of the backend's ("": none; HTTPS only).
	HSTS string
	// left is what remains of a declared Content-Length body, counted
	// when sized; whole once it is written whole.
	left         int64
	sized, whole bool
	// Idx is the request's backend (into rt.backends); RetryErr the
	// failure the error handler left for a retry on another instance
	// (nil: none), retried set once it was retried (health.go).
	Idx      int
	RetryErr error
	Retried  bool
}

var StatusWriterPool = sync.Pool{New: func() any { return new(StatusWriter) }}

func (w *StatusWriter) WriteHeader(code int) {
	if w.Code == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		w.Code = code
		if w.HSTS != "" && code >= 200 {
			w.Header().Set("Strict-Transport-Security", w.HSTS)
		}
		if cl := w.Header()["Content-Length"]; len(cl) == 1 && code >= 200 {
			if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && n >= 0 {
				w.left, w.sized, w.whole = n, true, n == 0
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(p []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.Written += int64(n)
	if w.sized {
		w.left -= int64(n)
		w.whole = w.left <= 0
	}
	return n, err
}

// Flush is here so that ReverseProxy's flushes stay cheap (no Unwrap walk).
// Once a declared Content-Length body is written whole, a flush is left to
// the end of the handler, which sends what is buffered with the end of
// the response: over HTTP/2 one HEADERS and one DATA frame with
// END_STREAM, not a third, empty one (and one write fewer).
func (w *StatusWriter) Flush() {
	if w.whole {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Observe records one finished request.
func (rm *RouteMetrics) Observe(code int, proxyErr int, start time.Time) {
	c := code / 100
	if c < 1 || c > 5 {
		c = 0
	}
	rm.byClass[c].Inc()
	if b := rm.backend; b != nil {
		b.requests.Add(1)
		if c == 5 || proxyErr != 0 {
			b.errors.Add(1)
		}
	}
	rm.duration.Observe(time.Since(start).Seconds())
	if proxyErr != 0 {
		if e, ok := rm.errs[proxyErr]; ok {
			e.Inc()
		}
	}
}
