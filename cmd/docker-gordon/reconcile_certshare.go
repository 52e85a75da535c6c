package main

import (
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/reconcile"
)

// serveCertStorage serves the certificate storage when
// --cert-storage-addr is set (stop does nothing otherwise); the flag
// needs --watch (core.ErrInvalid).
func (o reconcileOptions) serveCertStorage(env *cliEnv) (stop func(), err error) {
	if o.certStorageAddr == "" {
		return func() {}, nil
	}
	if !o.watch {
		return nil, fmt.Errorf("%w: --cert-storage-addr serves the edges' certificate storage while the loop runs: it needs --watch", core.ErrInvalid)
	}
	_, stop, err = reconcile.ServeCertStorage(env.opts.stateDir, o.certStorageAddr, env.dockerCli.Err(), env.logger.Named("certshare"))
	return stop, err
}
