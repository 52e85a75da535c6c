package edgeproxy

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
)

// Passive health (SPEC R21), the route's side: a
// backend's ejections are upstream.Health's; a route never ejects its last
// instance not ejected, and picks and retries only admitted ones.

// healthy returns the index of a backend of r not ejected at now, from i
// on round-robin; i itself when all are ejected.
// other returns the index of a backend of r other than i and not ejected
// at now (the retry's target), or -1.
// eject ejects backends[i] for reason unless it is the last instance of
// the route not ejected; it reports whether it did.
// eject records the ejection of b (log, metrics) unless it is ejected
// already.
// retryServeHTTP sends r once more, to another instance of sw.rt not
// ejected, after its backend failed before any answer (deferForRetry set
// sw.retryErr); the in-flight counts (*counter, *rm) move with it. With no
// such instance left, it answers the error page of the first failure.
func (s *Server) retryServeHTTP(sw *dataplane.StatusWriter, r *http.Request, counter **atomic.Int64, rm **dataplane.RouteMetrics) {
	rt, i := sw.Route, sw.Idx
	err := sw.RetryErr
	sw.Retried, sw.RetryErr = true, nil
	j := rt.Other(i, time.Now().UnixNano())
	if j < 0 {
		s.Reg.ProxyError(sw, r, rt.Backends[i].Addr, err)
		return
	}
	if s.Reg.Metrics != nil {
		s.Reg.Metrics.Retried(rt.Backends[i].Addr)
	}
	s.Logger.Debug("request retried on another instance", "from", rt.Backends[i].Addr, "to", rt.Backends[j].Addr, "error", err)
	(*counter).Add(-1)
	(*rm).InFlight.Dec()
	*counter, *rm = &rt.Backends[j].InFlight, rt.Metrics[j]
	(*counter).Add(1)
	(*rm).InFlight.Inc()
	sw.Idx = j
	rt.Proxies[j].ServeHTTP(sw, r)
}
