package edgeproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/handoff"
	"github.com/hashicorp/go-hclog"
)

// Run binds the HTTP and admin listeners, applies the current route table,
// then watches it until ctx ends, and shuts down gracefully: listeners
// close, in-flight HTTP requests get up to ShutdownTimeout, relayed TCP
// connections and UDP sessions are closed. It returns nil after a shutdown
// caused by ctx, an error if the configuration is incomplete, a listener
// cannot be bound or a server fails. Call it once per Server.
func (s *Server) Run(ctx context.Context) error {
	lc, err := s.prepareRun()
	if err != nil {
		return err
	}
	// An edge already serving this state directory hands its listeners
	// over (SPEC R60); it keeps serving until this one confirms.
	handover := s.requestHandover()
	if handover != nil {
		defer handover.Close() // unconfirmed: the old edge keeps serving
	}
	r, err := s.bindListeners(lc)
	if err != nil {
		return err
	}
	r.httpSrv, r.adminSrv = s.newHTTPServers()
	w := s.applyFirstTable(r)
	s.startServers(r)
	if hln := s.handOverNext(handover); hln != nil {
		defer hln.Close()
	}
	close(s.ready)
	s.Logger.Info("gordon-edge serving", "http", r.httpAddr, "admin", r.adminAddr, "state_dir", s.cfg.StateDir)

	stopPeers := s.startPeers(ctx)
	stopCertShare := s.startCertShare(ctx)
	runErr, handedOver := s.watchTable(ctx, w, r.errc)
	if handedOver {
		s.stopAccepting(r)
	}
	stopCertShare()
	stopPeers()
	s.shutdownRun(r, handedOver)
	return runErr
}

// runSet is what Run binds and serves: the public, HTTPS and admin
// listeners with their servers, errc (each server's end, serveErr) and
// h1Stopped (closed when the public accept loop has returned).
type runSet struct {
	httpLn, adminLn, httpsLn    net.Listener
	httpAddr, adminAddr         string
	httpSrv, adminSrv, httpsSrv *http.Server
	errc                        chan error
	h1Stopped                   chan struct{}
}

// prepareRun checks the configuration Run needs (state directory, HTTP
// address, admin address, peers and certificate storage against the
// routes token,
// --reuse-port only where supported), creates <state>/edge and
// returns the listen configuration of the public listeners.
func (s *Server) prepareRun() (net.ListenConfig, error) {
	var lc net.ListenConfig
	if s.cfg.StateDir == "" {
		return lc, errors.New("gordon-edge: state directory is required")
	}
	if s.cfg.HTTPAddr == "" {
		return lc, errors.New("gordon-edge: HTTP listen address is required")
	}
	if err := s.checkAdminAccess(); err != nil {
		return lc, err
	}
	if err := s.newCertShare(); err != nil {
		return lc, err
	}
	if err := os.MkdirAll(filepath.Join(s.cfg.StateDir, "edge"), 0o700); err != nil {
		return lc, fmt.Errorf("gordon-edge: state directory: %w", err)
	}
	if s.cfg.ReusePort {
		if !reusePortSupported {
			return lc, errors.New("gordon-edge: --reuse-port is supported on Linux only")
		}
		lc.Control = reusePortControl
	}
	return lc, nil
}

// requestHandover asks an edge already serving this state directory for
// its listeners (SPEC R60); nil when there is none, when NoHandover is set
// or when the hand-over failed (logged: the listeners are bound anew).
func (s *Server) requestHandover() *net.UnixConn {
	if s.cfg.NoHandover {
		return nil
	}
	handover, herr := s.takeOver()
	if herr != nil {
		s.Logger.Warn("listener hand-over failed; binding anew", "error", herr)
	}
	return handover
}

// bindListeners binds (or takes from the previous edge) the public HTTP,
// admin and HTTPS listeners and publishes their addresses (HTTPAddr,
// AdminAddr). On an error nothing stays bound.
func (s *Server) bindListeners(lc net.ListenConfig) (*runSet, error) {
	httpLn, err := s.listenStream("http", s.cfg.HTTPAddr, lc)
	if err != nil {
		s.socks.dropInherited()
		return nil, fmt.Errorf("gordon-edge: listen http %s: %w", s.cfg.HTTPAddr, err)
	}
	adminLn, err := s.listenStream("admin", s.cfg.AdminAddr, net.ListenConfig{})
	if err != nil {
		_ = httpLn.Close()
		s.socks.dropInherited()
		return nil, fmt.Errorf("gordon-edge: listen admin %s: %w", s.cfg.AdminAddr, err)
	}
	httpsLn, httpsSrv, err := s.startTLS(lc, httpLn.Addr())
	if err != nil {
		_ = httpLn.Close()
		_ = adminLn.Close()
		return nil, err
	}
	httpAddr, adminAddr := httpLn.Addr().String(), adminLn.Addr().String()
	s.httpAddr.Store(&httpAddr)
	s.adminAddr.Store(&adminAddr)
	return &runSet{
		httpLn: httpLn, adminLn: adminLn, httpsLn: httpsLn,
		httpAddr: httpAddr, adminAddr: adminAddr,
		httpsSrv: httpsSrv,
	}, nil
}

// newHTTPServers returns the net/http server of handed-off public
// connections (ServeHTTP) and the admin server (adminHandler).
func (s *Server) newHTTPServers() (httpSrv, adminSrv *http.Server) {
	httpSrv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    dataplane.MaxRequestHead - 4096,
		// The framing of handed-off connections is followed (internal/handoff).
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*handoff.TrackedConn); ok {
				return context.WithValue(ctx, handoff.TrackedConnKey{}, tc)
			}
			return ctx
		},
		ErrorLog: s.Logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		// No WriteTimeout: responses stream for as long as the backend sends.
	}
	adminSrv = &http.Server{
		Handler:           s.adminHandler(),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	return httpSrv, adminSrv
}

// applyFirstTable creates the public connection loop (with its event
// loops), applies the route table on disk and closes the listeners
// inherited from the previous edge that this configuration does not name.
// It returns the table's watcher.
func (s *Server) applyFirstTable(r *runSet) *watcher {
	s.ConnSrv = dataplane.NewConnServer(&s.Core, r.httpLn.Addr(), r.httpSrv.IdleTimeout, s.cfg.ReadHeaderTimeout)
	s.ConnSrv.StartLoops(dataplane.EvLoopCount(s.cfg.EventLoops))
	w := &watcher{path: filepath.Join(s.cfg.StateDir, "edge", RoutesFile)}
	s.poll(w, true)
	if dropped := s.socks.dropInherited(); len(dropped) > 0 {
		s.Logger.Info("listeners of the previous edge not in this configuration closed", "listeners", dropped)
	}
	return w
}

// startServers serves the HTTPS, public, hand-off and admin listeners,
// each on its own goroutine reporting its end on r.errc.
func (s *Server) startServers(r *runSet) {
	r.errc = make(chan error, 4)
	r.h1Stopped = make(chan struct{})
	if r.httpsSrv != nil {
		go func() { r.errc <- serveErr("https", s.tls.serve(r.httpsSrv, r.httpsLn)) }()
	}
	go func() { r.errc <- serveErr("http", s.ConnSrv.Serve(r.httpLn)); close(r.h1Stopped) }()
	go func() { r.errc <- serveErr("http handoff", r.httpSrv.Serve(s.ConnSrv.Handoff)) }()
	adminLn := r.adminLn
	if c := s.cfg.Control; c != nil {
		adminLn = tls.NewListener(adminLn, c.ServerTLS())
	}
	go func() { r.errc <- serveErr("admin", r.adminSrv.Serve(adminLn)) }()
}

// handOverNext confirms a hand-over taken from the previous edge (which
// then stops serving) and opens the socket a next edge takes this one's
// listeners over (nil: NoHandover, or it could not be opened: logged).
func (s *Server) handOverNext(handover *net.UnixConn) net.Listener {
	if s.cfg.NoHandover {
		return nil
	}
	if handover != nil {
		s.confirmTakeOver(handover)
	}
	hln, err := s.listenHandover()
	if err != nil {
		s.Logger.Warn("no listener hand-over for the next edge", "error", err)
		return nil
	}
	return hln
}

// watchTable polls the route table (and the certificate state) every
// PollInterval and at once on Reload, until ctx ends, the listeners were
// handed to a next edge (handedOver) or a server failed (runErr).
func (s *Server) watchTable(ctx context.Context, w *watcher, errc <-chan error) (runErr error, handedOver bool) {
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, false
		case <-s.handedOver:
			return nil, true
		case err := <-errc:
			return err, false
		case <-tick.C:
			s.poll(w, false)
			s.tlsTick()
			s.Reg.SweepIdle(time.Now())
		case <-s.reload:
			s.pollReload(w)
		}
	}
}

// stopAccepting closes every listener of an edge that handed them over
// (the new edge accepts on the same sockets) and then acceptStopped, on
// which the hand-over's last step waits: once the new edge reports ready,
// a new connection (HTTP, HTTPS, TCP relay, admin) or UDP datagram reaches
// the new edge, never this one. UDP sessions end here (they re-form on the
// new edge); requests in flight and relayed TCP connections continue
// (shutdownRun drains them).
func (s *Server) stopAccepting(r *runSet) {
	if s.stopAcceptHook != nil {
		s.stopAcceptHook()
	}
	// Each Close returns once no accept is under way on that descriptor.
	_ = r.httpLn.Close()
	s.closeTLSListener()
	_ = r.adminSrv.Close()
	s.tcp.StopAccepting()
	s.udp.Close()
	s.markAcceptStopped()
}

// markAcceptStopped closes acceptStopped (once).
func (s *Server) markAcceptStopped() {
	s.acceptStoppedOnce.Do(func() { close(s.acceptStopped) })
}

// shutdownRun stops what Run started, within ShutdownTimeout: the public
// listener closes, in-flight HTTP requests (loop, net/http and HTTPS)
// drain together, relayed TCP connections and UDP sessions close. After a
// hand-over every listener has stopped already (stopAccepting) and
// relayed TCP connections drain first.
func (s *Server) shutdownRun(r *runSet, handedOver bool) {
	defer s.markAcceptStopped()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	_ = r.httpLn.Close()
	// A connection accepted while the listener closed is registered and
	// served (its request answered), not dropped by the drain below.
	select {
	case <-r.h1Stopped:
	case <-sctx.Done():
	}
	tcpDrained := make(chan struct{})
	if handedOver {
		// Relayed TCP connections stay on this edge until they end or the
		// drain bound passes.
		go func() { s.tcp.Drain(sctx); close(tcpDrained) }()
	} else {
		close(tcpDrained)
	}
	s.closeTLSListener()
	// The loops drain first: until they are done they may still hand a
	// request (a body, an upgrade, HTTP/1.0) to net/http, which serves it
	// on a connection it keeps alive meanwhile. Then net/http's servers
	// drain (their idle connections close, their requests are answered).
	// All of it within the one ShutdownTimeout.
	if err := s.ConnSrv.Shutdown(sctx); err != nil {
		s.Logger.Warn("http shutdown incomplete", "error", err)
	}
	httpsDone := s.shutdownTLS(sctx, r.httpsSrv)
	if err := r.httpSrv.Shutdown(sctx); err != nil {
		s.Logger.Warn("http shutdown incomplete", "error", err)
		_ = r.httpSrv.Close()
	}
	<-httpsDone
	_ = r.adminSrv.Close()
	<-tcpDrained
	s.tcp.Close()
	s.udp.Close()
	s.Reg.CloseIdle()
	if a := s.Metrics.Access; a != nil {
		_ = a.Close()
	}
	s.Logger.Info("gordon-edge stopped")
}

func serveErr(what string, err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("gordon-edge: %s server: %w", what, err)
}
