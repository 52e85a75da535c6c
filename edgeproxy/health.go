package edgeproxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"
)

// Passive health (issue 24 item 4, SPEC R21): the edge ejects an instance
// for a bounded time when an exchange with it fails before any response
// byte (a connect failure, a reset or close before the answer, a response
// header timeout), as nginx's max_fails=1 fail_timeout. The first ejection
// lasts ejectBase; each further one within ejectMax of the end of the
// previous doubles it, up to ejectMax. An instance is never ejected when
// it is the last one of its route not ejected; a route whose instances are
// all ejected (a race) still routes round-robin over them.
const (
	defaultEjectBase = 10 * time.Second
	defaultEjectMax  = 80 * time.Second
)

// Ejection reasons (edge status, metrics label).
const (
	ejectConnect       = "connect failed"
	ejectReset         = "reset before response"
	ejectHeaderTimeout = "response header timeout"
)

// health is one backend's passive health state. The request path reads
// only until (one atomic load); the rest is written on a failure.
type health struct {
	// until is the end of the current ejection (unix nanos); 0 when the
	// backend is admitted. An expired value is cleared by the next pick.
	until atomic.Int64
	// lastEnd is the end of the last ejection (unix nanos), streak the
	// number of ejections in a row (each within ejectMax of the previous).
	lastEnd atomic.Int64
	streak  atomic.Int64
	reason  atomic.Pointer[string]
	// base and max are the registry's bounds, fixed at creation.
	base, max time.Duration
}

// ejected reports whether the backend is ejected at now (unix nanos); an
// expired ejection is cleared (the backend is readmitted).
func (h *health) ejected(now int64) bool {
	u := h.until.Load()
	if u == 0 {
		return false
	}
	if u > now {
		return true
	}
	h.until.CompareAndSwap(u, 0)
	return false
}

// eject ejects the backend from now (unix nanos) for its next bound and
// returns the ejection's end.
func (h *health) eject(now int64, reason string) int64 {
	streak := h.streak.Load()
	if end := h.lastEnd.Load(); end == 0 || now-end > int64(h.max) {
		streak = 0
	}
	d := h.base << uint(min(streak, 16))
	if d > h.max || d <= 0 {
		d = h.max
	}
	until := now + int64(d)
	h.streak.Store(streak + 1)
	h.lastEnd.Store(until)
	h.reason.Store(&reason)
	h.until.Store(until)
	return until
}

// ejectReason classifies a failed exchange for passive health: the reason
// when it ejects the backend (the backend could not be reached, closed or
// reset the connection before any response byte, or sent no response head
// in time), "" when it does not (the client went away, a malformed
// answer).
func ejectReason(err error, dial bool) string {
	if err == nil || errors.Is(err, errClientGone) {
		return ""
	}
	if errors.Is(err, errResponseHeaderTimeout) {
		return ejectHeaderTimeout
	}
	var oe *net.OpError
	if dial || errors.As(err, &oe) && oe.Op == "dial" {
		return ejectConnect
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ejectHeaderTimeout
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, errEvSend) {
		return ejectReset
	}
	return ""
}

// healthy returns the index of a backend of r not ejected at now, from i
// on round-robin; i itself when all are ejected.
func (r *httpRoute) healthy(i int, now int64) int {
	n := len(r.backends)
	for k := 0; k < n; k++ {
		j := (i + k) % n
		if !r.backends[j].health.ejected(now) {
			return j
		}
	}
	return i
}

// other returns the index of a backend of r other than i and not ejected
// at now (the retry's target), or -1.
func (r *httpRoute) other(i int, now int64) int {
	n := len(r.backends)
	for k := 1; k < n; k++ {
		j := (i + k) % n
		if !r.backends[j].health.ejected(now) {
			return j
		}
	}
	return -1
}

// eject ejects backends[i] for reason unless it is the last instance of
// the route not ejected; it reports whether it did.
func (r *httpRoute) eject(reg *registry, i int, reason string) bool {
	if reason == "" {
		return false
	}
	now := time.Now().UnixNano()
	if r.other(i, now) < 0 {
		return false // never the last instance
	}
	return reg.eject(r.backends[i], now, reason, r.app, r.service)
}

// eject records the ejection of b (log, metrics) unless it is ejected
// already.
func (reg *registry) eject(b *backend, now int64, reason, app, service string) bool {
	if b.health.ejected(now) {
		return false
	}
	until := b.health.eject(now, reason)
	reg.logger.Info("backend ejected", "backend", b.addr, "app", app, "service", service,
		"reason", reason, "until", time.Unix(0, until).UTC().Format(time.RFC3339))
	if reg.metrics != nil {
		reg.metrics.ejected(b.addr, reason)
	}
	return true
}

// retryable reports whether a request may be sent again to another
// instance after a failure before any response byte: GET, HEAD and
// OPTIONS always; any other method only when no body byte was sent
// (bodySent false).
func retryable(method string, bodySent bool) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	return !bodySent
}

// retryServeHTTP sends r once more, to another instance of sw.rt not
// ejected, after its backend failed before any answer (deferForRetry set
// sw.retryErr); the in-flight counts (*counter, *rm) move with it. With no
// such instance left, it answers the error page of the first failure.
func (s *Server) retryServeHTTP(sw *statusWriter, r *http.Request, counter **atomic.Int64, rm **routeMetrics) {
	rt, i := sw.rt, sw.idx
	err := sw.retryErr
	sw.retried, sw.retryErr = true, nil
	j := rt.other(i, time.Now().UnixNano())
	if j < 0 {
		s.reg.proxyError(sw, r, rt.backends[i].addr, err)
		return
	}
	if s.reg.metrics != nil {
		s.reg.metrics.retried(rt.backends[i].addr)
	}
	s.logger.Debug("request retried on another instance", "from", rt.backends[i].addr, "to", rt.backends[j].addr, "error", err)
	(*counter).Add(-1)
	(*rm).inFlight.Dec()
	*counter, *rm = &rt.backends[j].inFlight, rt.metrics[j]
	(*counter).Add(1)
	(*rm).inFlight.Inc()
	sw.idx = j
	rt.proxies[j].ServeHTTP(sw, r)
}

// errEvSend is an event loop's failed request write (evloop_upstream_linux.go):
// ejectReason reads it as a reset. Declared here, outside the Linux-only
// files, so the package builds on other systems too.
var errEvSend = errors.New("backend connection: request not written whole")
