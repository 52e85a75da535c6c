package edgeproxy

import (
	"net/http"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// holdRetryAfter is the Retry-After (seconds) of a 503 for a held or
// stopped service.
const holdRetryAfter = "5"

// holdHTTP handles a request whose route on snap has no backends (SPEC
// R58). A stopped or unavailable route answers 503 with Retry-After. A held route waits
// until the next snapshot is swapped in (returns true: route again), the
// hold's Until passes or the route's queue is full (503 with Retry-After),
// or the client goes away; false means the request was answered (or
// abandoned).
func (s *Server) holdHTTP(w http.ResponseWriter, r *http.Request, snap *snapshot, rt *httpRoute) bool {
	host := stripPort(r.Host)
	if rt.unavailable {
		writeUnavailable(w, "gordon-edge: app "+rt.app+" service "+rt.service+" has no ready instance\n")
		return false
	}
	if rt.stopped || rt.hold == nil {
		writeUnavailable(w, "gordon-edge: app "+rt.app+" service "+rt.service+" is stopped\n")
		return false
	}
	now := time.Now()
	if !rt.hold.Holding(now) {
		writeUnavailable(w, "gordon-edge: "+host+" is between generations and the hold bound passed\n")
		return false
	}
	queue := rt.hold.Queue
	if queue == 0 {
		queue = routetable.DefaultHoldQueue
	}
	if rt.held.Add(1) > int64(queue) {
		rt.held.Add(-1)
		writeUnavailable(w, "gordon-edge: "+host+" is between generations and its hold queue is full\n")
		return false
	}
	defer rt.held.Add(-1)
	s.metrics.held.Inc()
	defer s.metrics.held.Dec()
	t := time.NewTimer(rt.hold.Until.Sub(now))
	defer t.Stop()
	select {
	case <-snap.replaced:
		return true
	case <-t.C:
		writeUnavailable(w, "gordon-edge: "+host+" is between generations and the hold bound passed\n")
		return false
	case <-r.Context().Done():
		return false
	}
}

// writeUnavailable answers 503 with Retry-After.
func writeUnavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", holdRetryAfter)
	writeEdgeError(w, http.StatusServiceUnavailable, msg)
}
