package edgeproxy

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Passive health (issue 24 item 4, SPEC R21), the route's side: a
// backend's ejections are upstream.Health's; a route never ejects its last
// instance not ejected, and picks and retries only admitted ones.

// healthy returns the index of a backend of r not ejected at now, from i
// on round-robin; i itself when all are ejected.
func (r *httpRoute) healthy(i int, now int64) int {
	n := len(r.backends)
	for k := 0; k < n; k++ {
		j := (i + k) % n
		if !r.backends[j].health.Ejected(now) {
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
		if !r.backends[j].health.Ejected(now) {
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
	if b.health.Ejected(now) {
		return false
	}
	until := b.health.Eject(now, reason)
	reg.logger.Info("backend ejected", "backend", b.addr, "app", app, "service", service,
		"reason", reason, "until", time.Unix(0, until).UTC().Format(time.RFC3339))
	if reg.metrics != nil {
		reg.metrics.ejected(b.addr, reason)
	}
	return true
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
