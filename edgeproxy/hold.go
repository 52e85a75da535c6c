package edgeproxy

import (
	"net/http"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
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
func (s *Server) holdHTTP(w http.ResponseWriter, r *http.Request, snap *dataplane.Snapshot, rt *dataplane.HTTPRoute) bool {
	host := dataplane.StripPort(r.Host)
	if rt.Unavailable {
		writeUnavailable(w, "gordon-edge: app "+rt.App+" service "+rt.Service+" has no ready instance\n")
		return false
	}
	if rt.Stopped || rt.Hold == nil {
		writeUnavailable(w, "gordon-edge: app "+rt.App+" service "+rt.Service+" is stopped\n")
		return false
	}
	now := time.Now()
	if !rt.Hold.Holding(now) {
		writeUnavailable(w, "gordon-edge: "+host+" is between generations and the hold bound passed\n")
		return false
	}
	queue := rt.Hold.Queue
	if queue == 0 {
		queue = routetable.DefaultHoldQueue
	}
	if rt.Held.Add(1) > int64(queue) {
		rt.Held.Add(-1)
		writeUnavailable(w, "gordon-edge: "+host+" is between generations and its hold queue is full\n")
		return false
	}
	defer rt.Held.Add(-1)
	s.Metrics.Held.Inc()
	defer s.Metrics.Held.Dec()
	t := time.NewTimer(rt.Hold.Until.Sub(now))
	defer t.Stop()
	select {
	case <-snap.Replaced:
		return true
	case <-t.C:
		writeUnavailable(w, "gordon-edge: "+host+" is between generations and the hold bound passed\n")
		return false
	case <-r.Context().Done():
		return false
	}
}

// holdOrWake is holdHTTP, or for a sleeping service the wake's hold
// (SPEC R81), whose bound *wakeUntil runs from the request's arrival.
func (s *Server) holdOrWake(w http.ResponseWriter, r *http.Request, snap *dataplane.Snapshot, rt *dataplane.HTTPRoute, wakeUntil *time.Time) bool {
	if rt.Asleep != nil {
		return s.wakes.HoldHTTP(w, r, snap, rt, wakeUntil)
	}
	return s.holdHTTP(w, r, snap, rt)
}

// writeUnavailable answers 503 with Retry-After.
func writeUnavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", holdRetryAfter)
	dataplane.WriteEdgeError(w, http.StatusServiceUnavailable, msg)
}
