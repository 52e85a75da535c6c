package edgeproxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/wake"
)

// Reload asks Run to re-read the route table now instead of at the next
// poll (SIGHUP, admin POST /reload); the outcome shows in status.json as
// for any apply. It never blocks.
func (s *Server) Reload() {
	select {
	case s.reload <- struct{}{}:
	default: // one is queued already
	}
}

// Apply validates t (LoadTable rules), swaps it in as the serving snapshot,
// retargets the TCP and UDP relays and writes status.json (when StateDir is set).
// A rejected table leaves the previous snapshot serving and is recorded as
// the status error; the error wraps ErrInvalidTable. Run calls it for each
// new routes.json; tests may call it directly (TCP/UDP listeners it binds
// are closed when Run ends, so call it without Run only for HTTP-only
// tables).
func (s *Server) Apply(t routetable.Table) error {
	t.HTTP = append([]routetable.HTTPRoute(nil), t.HTTP...)
	if err := ValidateTable(&t); err != nil {
		s.reject(err, t.Generation)
		return err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	snap, referenced := dataplane.BuildSnapshot(s.narrowAllow(t), s.Reg, s.Metrics)
	if s.tls != nil {
		s.tls.annotate(snap)
	}
	s.tcp.Update(t.TCP)
	s.udp.Update(t.UDP)
	prev := s.Snap.Swap(snap)
	if prev != nil {
		close(prev.Replaced) // held requests re-route on snap
	}
	s.firstTable.Mark() // requests waiting for a first table route on snap
	s.wakes.Routed(wake.RoutedServices(t))
	s.activity.Sample(snap, s.Reg.Status(), s.tcp.LastAccept) // newly routed instances are activity
	if s.Hosts != nil {
		s.Hosts.Clear()
	}
	s.Metrics.Generation.Set(float64(t.Generation))
	s.Reg.Retain(referenced, time.Now())
	if s.ConnSrv != nil {
		// The event loops close their idle connections to backends the
		// switch retired now, not at their next sweep.
		for _, l := range s.ConnSrv.Loops {
			l.Wakeup(false)
		}
	}
	s.lastErr, s.rejectedGen = "", 0
	if s.push != nil {
		s.push.SetApplied(t) // served by GET /routes
	}
	s.Logger.Info("route table applied", "generation", t.Generation, "http", len(t.HTTP), "tcp", len(t.TCP), "udp", len(t.UDP))
	s.writeStatusLocked()
	if s.tls != nil {
		go s.tls.refresh(true) // new hosts get their certificates ordered
	}
	s.nudgeCertShare()
	return nil
}

// retryListeners re-binds listeners that failed to bind for the current
// snapshot (every fullRereadEvery from the watch loop) and rewrites
// status.json when that changed anything.
func (s *Server) retryListeners() {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	snap := s.Snap.Load()
	if snap == nil || s.tcp.FailedCount()+s.udp.FailedCount() == 0 {
		return
	}
	before := s.tcp.ListenerStatus()
	beforeUDP := s.udp.ListenerStatus()
	s.tcp.Update(snap.TCP)
	s.udp.Update(snap.UDP)
	if !sameListeners(before, s.tcp.ListenerStatus()) || !sameListeners(beforeUDP, s.udp.ListenerStatus()) {
		s.writeStatusLocked()
	}
}

func sameListeners(a, b []routetable.ListenerStatus) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[routetable.ListenerStatus]bool, len(a))
	for _, l := range a {
		m[l] = true
	}
	for _, l := range b {
		if !m[l] {
			return false
		}
	}
	return true
}

// reject records a rejected table and rewrites status.json.
func (s *Server) reject(err error, generation uint64) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.lastErr, s.rejectedGen = err.Error(), generation
	s.Logger.Error("route table rejected; last good table keeps serving", "generation", generation, "error", err)
	s.writeStatusLocked()
}

// Status returns the live status: applied generation, last error, listeners
// and per-backend counters at the time of the call.
func (s *Server) Status() routetable.Status {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.statusLocked()
}

func (s *Server) statusLocked() routetable.Status {
	st := routetable.Status{
		PID:                os.Getpid(),
		StartedAt:          s.startedAt,
		UpdatedAt:          time.Now().UTC(),
		Error:              s.lastErr,
		RejectedGeneration: s.rejectedGen,
		AdminAddr:          s.AdminAddr(),
		Backends:           s.Reg.Status(),
		StateID:            edgestate.StateDirID(s.cfg.StateDir),
	}
	if s.cfg.AccessLog != nil {
		st.AccessLog = s.cfg.AccessLogName
	}
	if snap := s.Snap.Load(); snap != nil {
		st.AppliedGeneration = snap.Generation
	}
	if a := s.HTTPAddr(); a != "" {
		st.Listeners = append(st.Listeners, routetable.ListenerStatus{Addr: a, Proto: "http"})
	}
	if a := s.HTTPSAddr(); a != "" {
		st.Listeners = append(st.Listeners, routetable.ListenerStatus{Addr: a, Proto: "https"})
	}
	st.Listeners = append(st.Listeners, s.tcp.ListenerStatus()...)
	st.Listeners = append(st.Listeners, s.udp.ListenerStatus()...)
	sort.SliceStable(st.Listeners, func(i, j int) bool {
		if st.Listeners[i].Proto != st.Listeners[j].Proto {
			return st.Listeners[i].Proto < st.Listeners[j].Proto
		}
		return st.Listeners[i].Addr < st.Listeners[j].Addr
	})
	return st
}

// writeStatusLocked writes status.json atomically (temp file, fsync,
// rename, fsync of the directory). Failures are logged: the edge keeps
// serving.
func (s *Server) writeStatusLocked() {
	if s.cfg.StateDir == "" {
		return
	}
	data, err := json.MarshalIndent(s.statusLocked(), "", "  ")
	if err != nil {
		s.Logger.Error("encode status", "error", err)
		return
	}
	if err := edgestate.WriteFileAtomic(filepath.Join(s.cfg.StateDir, "edge", StatusFile), append(data, '\n')); err != nil {
		s.Logger.Error("write status", "error", err)
	}
}
