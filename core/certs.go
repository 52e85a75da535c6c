package core

import (
	"context"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// CertInfo is one host's HTTPS certificate as the edge holds it (source,
// issuer, expiry, state with the last error and the next retry; SPEC R63).
type CertInfo = certstore.Info

// CertStore is implemented by traffic backends that hold HTTPS
// certificates (traffic/edge; optional for other backends). It is how
// `docker gordon certs` reaches them (SPEC R63).
type CertStore interface {
	// AddCert stores certPEM/keyPEM as host's operator certificate (host
	// exact or "*.suffix"). A pair that does not parse, does not match or
	// does not cover host is refused with ErrInvalid and nothing changes.
	AddCert(ctx context.Context, host string, certPEM, keyPEM []byte) (CertInfo, error)
	// RemoveCert deletes host's operator certificate (ErrNotFound if none).
	RemoveCert(ctx context.Context, host string) error
	// ListCerts returns every host's certificate, sorted by host.
	ListCerts(ctx context.Context) ([]CertInfo, error)
}
