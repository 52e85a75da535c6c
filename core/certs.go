package core

import (
	"context"
	"time"
)

// CertInfo is one host's HTTPS certificate as the edge holds it (SPEC
// R63). The traffic/edge backend converts edgeproxy/certstore's Info, which
// has the same fields, into it.
type CertInfo struct {
	// Host is the exact host or "*.suffix" the certificate covers.
	Host string `json:"host"`
	// Source is where it comes from: "static" (operator) or "acme".
	Source string `json:"source"`
	Issuer string `json:"issuer,omitempty"`
	// NotAfter is the leaf's expiry (zero while none is held).
	NotAfter time.Time `json:"not_after,omitzero"`
	// State is "valid", "pending" or "failed".
	State string `json:"state"`
	// Error is the last failure (state "failed") and RetryAt when the next
	// attempt is due (zero when unknown).
	Error   string    `json:"error,omitempty"`
	RetryAt time.Time `json:"retry_at,omitzero"`
}

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
