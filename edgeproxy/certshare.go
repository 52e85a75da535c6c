package edgeproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certshare"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/control"
)

// Certificates shared by the edges of a swarm (Config.CertStorage,
// edgeproxy/certshare): certmagic's storage is the certshare server's,
// and the server's static certificates are mirrored into this edge's
// own <state>/edge/certs/static at start, after each route table apply
// and every certShareEvery, the served certificates refreshed when the
// mirror changed.

// certShareEvery is the longest time between two static mirrors.
const certShareEvery = 10 * time.Second

// certShareBound bounds one static mirror.
const certShareBound = 10 * time.Second

// newCertShare creates the certshare client of Config.CertStorage (none
// without it). It refuses a CertStorage without RoutesToken (its bearer
// token) and a malformed URL.
func (s *Server) newCertShare() error {
	if s.cfg.CertStorage == "" {
		return nil
	}
	tok, hc := s.cfg.RoutesToken, s.cfg.CertStorageClient
	if ctl := s.cfg.Control; ctl != nil {
		tok = ctl.EdgeToken()
		if hc == nil {
			hc = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: ctl.ClientTLS(control.StorageServerName)}}
		}
	}
	if tok == "" {
		return errors.New("gordon-edge: --cert-storage needs the routes token as its bearer token (GORDON_EDGE_ROUTES_TOKEN or --routes-token-file), and it is empty")
	}
	c, err := certshare.NewClient(s.cfg.CertStorage, tok, hc)
	if err != nil {
		return fmt.Errorf("gordon-edge: --cert-storage: %w", err)
	}
	if ctl := s.cfg.Control; ctl != nil {
		c.Token = ctl.EdgeToken
	}
	if s.cfg.HTTPSAddr == "" {
		s.Logger.Warn("--cert-storage without an HTTPS address: certificates are neither ordered nor served")
	}
	s.certShare = c
	return nil
}

// certStorage is certmagic's storage: the certshare client, or nil (the
// local file storage).
func (s *Server) certStorage() certmagic.Storage {
	if s.certShare == nil {
		return nil
	}
	return sharedStorage{s.certShare}
}

// sharedStorage is a certshare client as certmagic's Storage (the client
// has its methods but Stat, which returns certshare.KeyInfo: certshare
// links no certmagic).
type sharedStorage struct{ *certshare.Client }

var _ certmagic.LockLeaseRenewer = sharedStorage{}

// Stat returns key's information; an error wrapping fs.ErrNotExist when
// it does not exist.
func (s sharedStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	ki, err := s.Client.Stat(ctx, key)
	return certmagic.KeyInfo{Key: ki.Key, Modified: ki.Modified, Size: ki.Size, IsTerminal: ki.IsTerminal}, err
}

// nudgeCertShare asks for a static mirror now (after an apply).
func (s *Server) nudgeCertShare() {
	if s.certShare == nil {
		return
	}
	select {
	case s.certShareNow <- struct{}{}:
	default:
	}
}

// syncStatic mirrors the server's static certificates (certShareBound)
// and refreshes the served certificates when that changed anything. An
// error is logged when it differs from the previous one; the certificates
// held stay served.
func (s *Server) syncStatic(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, certShareBound)
	defer cancel()
	changed, err := s.certShare.SyncStatic(ctx, certstore.Root(s.cfg.StateDir))
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg != s.certShareErr {
		if err != nil {
			s.Logger.Warn("static certificates not mirrored from the certificate storage; the ones held stay served", "storage", s.cfg.CertStorage, "error", err)
		} else {
			s.Logger.Info("static certificates mirrored from the certificate storage again", "storage", s.cfg.CertStorage)
		}
		s.certShareErr = msg
	}
	if changed && s.tls != nil {
		s.tls.refresh(true)
	}
}

// startCertShare mirrors the static certificates every certShareEvery
// and when nudged, until ctx ends or the returned stop is called (which
// waits for the mirror under way).
func (s *Server) startCertShare(ctx context.Context) (stop func()) {
	if s.certShare == nil {
		return func() {}
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(certShareEvery)
		defer t.Stop()
		for {
			select {
			case <-cctx.Done():
				return
			case <-t.C:
			case <-s.certShareNow:
			}
			s.syncStatic(cctx)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
