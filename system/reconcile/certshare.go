// Package reconcile holds the parts of the reconcile daemon that run
// beside the engine's passes: the edges' shared certificate storage on a
// swarm.
package reconcile

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certshare"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
	"github.com/gordon-deploy/docker-gordon/internal/subnetaddr"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// The edges' shared certificate storage on a swarm (reconcile
// --cert-storage-addr): the reconcile loop on the manager, which has the
// persistent state directory, serves <state>/edge/certs to the edge
// tasks (gordon-edge --cert-storage http://gordon-reconcile:PORT) with
// the route-push token as bearer token (edgeproxy/certshare).

// certStorageDrain bounds the storage server's shutdown.
const certStorageDrain = 5 * time.Second

// ServeCertStorage serves certshare.Server over <stateDir>/edge/certs
// (created 0700 when missing) on addr until the returned stop is called
// (which cancels lock waits under way and closes the server within
// certStorageDrain). It fails, serving nothing, when there is no
// route-push token (<stateDir>/edge/swarm-token; core.ErrUnavailable)
// or addr cannot be bound. The bound address is returned and written to
// out.
func ServeCertStorage(stateDir, addr string, out io.Writer, logger hclog.Logger) (bound net.Addr, stop func(), err error) {
	token, err := swarm.Token(stateDir)
	if err == nil && token == "" {
		err = fmt.Errorf("%w: %s is empty", core.ErrUnavailable, swarm.TokenFile)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--cert-storage-addr: the edges authenticate with the route-push token, and there is none: %w", err)
	}
	root := certstore.Root(stateDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, nil, fmt.Errorf("--cert-storage-addr: %w", err)
	}
	h, err := certshare.NewServer(root, token)
	if err != nil {
		return nil, nil, fmt.Errorf("--cert-storage-addr: %w", err)
	}
	tlsCfg, err := controlStorage(stateDir, h)
	if err != nil {
		return nil, nil, fmt.Errorf("--cert-storage-addr: %w", err)
	}
	// "CIDR:PORT": this container's address on the control network only
	// (never on the app networks it joins for its probes).
	if addr, err = subnetaddr.Resolve(context.Background(), addr, 30*time.Second); err != nil {
		return nil, nil, fmt.Errorf("--cert-storage-addr: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--cert-storage-addr: %w: %w", core.ErrUnavailable, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("certificate storage server failed", "error", err)
		}
	}()
	fmt.Fprintf(out, "certificate storage: serving %s on %s\n", root, ln.Addr())
	return ln.Addr(), func() {
		cancel()
		ctx, done2 := context.WithTimeout(context.Background(), certStorageDrain)
		defer done2()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-done
	}, nil
}

// controlStorage sets the storage's authorization from the control
// credentials (<state>/edge/control.json: the edge tokens, current,
// rotating and baked, re-read when the file changes) and returns its TLS
// configuration (the storage certificate the control CA issued). Without
// that record (an edge from before split credentials) the route-push
// token authorizes, over plain HTTP: nil, nil.
func controlStorage(stateDir string, h *certshare.Server) (*tls.Config, error) {
	ctl, ok, err := swarm.LoadControl(stateDir)
	if err != nil || !ok {
		return nil, err
	}
	tlsCfg, err := ctl.StorageTLS()
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	tokens, stamp := ctl.EdgeTokens(), fileStamp(filepath.Join(stateDir, swarm.ControlFile))
	h.Accept = func(tok string) bool {
		mu.Lock()
		if st := fileStamp(filepath.Join(stateDir, swarm.ControlFile)); st != stamp {
			if c, ok, err := swarm.LoadControl(stateDir); err == nil && ok {
				tokens, stamp = c.EdgeTokens(), st
			}
		}
		set := tokens
		mu.Unlock()
		ok := 0
		for _, want := range set {
			ok |= subtle.ConstantTimeCompare([]byte(tok), []byte(want))
		}
		return tok != "" && ok == 1
	}
	return tlsCfg, nil
}

// fileStamp is a file's modification time and size ("" when it cannot
// be read).
func fileStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprint(st.ModTime().UnixNano(), st.Size())
}
