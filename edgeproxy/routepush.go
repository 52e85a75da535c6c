package edgeproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/control"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/routepush"
)

// The route table pushed over the admin endpoint (Config.RoutesToken,
// Config.Peers; the requests and answers are internal/routepush's). A
// pushed table is written as this edge's own routes.json and read by the
// same watch and apply as a table written by a publisher, so it survives
// a restart; GET /routes serves the last table applied.

// newPusher returns the pushed route table's server, nil without
// RoutesToken.
func (s *Server) newPusher() *routepush.Pusher {
	if s.cfg.RoutesToken == "" && s.cfg.Control == nil {
		return nil
	}
	cfg := routepush.Config{Token: s.cfg.RoutesToken, Peers: s.cfg.Peers, Interval: s.cfg.PeerInterval,
		Lookup: s.cfg.PeerLookup, AdminAddr: s.AdminAddr, Logger: s.cfg.Logger}
	if c := s.cfg.Control; c != nil {
		cfg.Auth, cfg.PeerTLS = c, c.ClientTLS(control.EdgeServerName)
	}
	return routepush.New(cfg, pushEdge{s})
}

// pushEdge is the Server as routepush.Edge.
type pushEdge struct{ *Server }

// Publish writes data as <state>/edge/routes.json (atomically) and waits
// for the read it asks for, as POST /reload does (awaitReload).
func (e pushEdge) Publish(ctx context.Context, data []byte) (bool, error) {
	if err := edgestate.WriteFileAtomic(filepath.Join(e.cfg.StateDir, "edge", RoutesFile), data); err != nil {
		return false, err
	}
	return e.awaitReload(ctx), nil
}

// startPeers runs the peer requests (Config.Peers) until ctx ends or
// the returned stop is called; stop waits for them to end.
func (s *Server) startPeers(ctx context.Context) (stop func()) {
	if s.push == nil || s.cfg.Peers == "" {
		return func() {}
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.push.RunPeers(pctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// checkAdminAccess refuses Peers without RoutesToken, and an admin
// address other than loopback without RoutesToken (the admin endpoint
// then has no authentication at all).
func (s *Server) checkAdminAccess() error {
	if s.cfg.RoutesToken != "" || s.cfg.Control != nil {
		return nil
	}
	if s.cfg.Peers != "" {
		return errors.New("gordon-edge: --peers needs a routes token (--routes-token-file or GORDON_EDGE_ROUTES_TOKEN)")
	}
	if !loopbackAddr(s.cfg.AdminAddr) {
		return fmt.Errorf("gordon-edge: admin address %s is not a loopback address and the admin endpoint has no authentication without a routes token: bind it to 127.0.0.1, or set --routes-token-file", s.cfg.AdminAddr)
	}
	return nil
}

// loopbackAddr reports whether addr ("host:port") names a loopback
// address: a loopback IP literal or "localhost".
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
