package swarm

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/control"
	"github.com/gordon-deploy/docker-gordon/internal/durable"
)

// ControlFile is the manager's record of the control channel's
// credentials (relative to the state directory, mode 0600): the push
// token, the edge token, the CA and its key, the certificates, and what
// the edge service's Docker secret holds.
const ControlFile = "edge/control.json"

// Control is <state>/edge/control.json.
type Control struct {
	// Generation is the credentials' generation (control.Credentials).
	Generation uint64 `json:"generation"`
	// Push is the push token (route push, admin); Edge the edge token
	// (peer pulls, certificate storage). PushPrev and EdgePrev are older
	// ones still accepted while a rotation is under way.
	Push     string   `json:"push"`
	PushPrev []string `json:"push_prev,omitempty"`
	Edge     string   `json:"edge"`
	EdgePrev []string `json:"edge_prev,omitempty"`
	// Baked is what the edge service's Docker secret (SecretName) holds:
	// an edge task starts with it, and the manager brings a task that
	// holds older credentials up to date at its next push.
	Baked      BakedTokens `json:"baked"`
	SecretName string      `json:"secret_name,omitempty"`
	// CA and CAKey are the control CA (PEM); EdgeCert/EdgeKey the edges'
	// server certificate, StorageCert/StorageKey the certificate
	// storage's (gordon-reconcile).
	CA          string `json:"ca"`
	CAKey       string `json:"ca_key"`
	EdgeCert    string `json:"edge_cert"`
	EdgeKey     string `json:"edge_key"`
	StorageCert string `json:"storage_cert"`
	StorageKey  string `json:"storage_key"`
	// MirrorKey seals the state configs (hex, 32 bytes;
	// statemirror_crypt.go).
	MirrorKey string `json:"mirror_key,omitempty"`
}

// BakedTokens are the tokens of the edge service's Docker secret.
type BakedTokens struct {
	Generation uint64 `json:"generation"`
	Push       string `json:"push"`
	Edge       string `json:"edge"`
}

// LoadControl reads <state>/edge/control.json; ok is false when there
// is none (an edge started before split credentials).
func LoadControl(stateDir string) (c Control, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(stateDir, ControlFile))
	if errors.Is(err, os.ErrNotExist) {
		return Control{}, false, nil
	}
	if err != nil {
		return Control{}, false, fmt.Errorf("control credentials: %w: %w", core.ErrUnavailable, err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return Control{}, false, fmt.Errorf("control credentials %s: %w: %w", filepath.Join(stateDir, ControlFile), core.ErrInvalid, err)
	}
	return c, true, nil
}

// SaveControl writes c (0600, atomically, directory fsynced) and the
// push token as TokenFile (the admin calls' token).
func SaveControl(stateDir string, c Control) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(stateDir, ControlFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := durable.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return durable.WriteFile(filepath.Join(stateDir, TokenFile), []byte(c.Push+"\n"), 0o600)
}

// NewControl makes fresh credentials: random 32-byte tokens (hex), a new
// CA, the edges' and the storage's certificates; generation 1, baked.
func NewControl() (Control, error) {
	c := Control{Generation: 1, Push: randomToken(), Edge: randomToken(), MirrorKey: randomToken()}
	var err error
	if c.CA, c.CAKey, err = control.NewCA(); err != nil {
		return c, err
	}
	if c.EdgeCert, c.EdgeKey, err = control.Issue(c.CA, c.CAKey, control.EdgeServerName); err != nil {
		return c, err
	}
	if c.StorageCert, c.StorageKey, err = control.Issue(c.CA, c.CAKey, control.StorageServerName); err != nil {
		return c, err
	}
	c.Baked = BakedTokens{Generation: 1, Push: c.Push, Edge: c.Edge}
	return c, nil
}

// EnsureControl returns the state directory's credentials, making and
// saving them when there are none.
func EnsureControl(stateDir string) (Control, error) {
	c, ok, err := LoadControl(stateDir)
	if err != nil {
		return c, err
	}
	if ok {
		if c.MirrorKey == "" {
			c.MirrorKey = randomToken()
			err = SaveControl(stateDir, c)
		}
		return c, err
	}
	if c, err = NewControl(); err != nil {
		return c, fmt.Errorf("control credentials: %w", err)
	}
	return c, SaveControl(stateDir, c)
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// SecretData is the edge service's Docker secret: the baked tokens (the
// push token as its hash only), the CA and the edges' certificate.
func (c Control) SecretData() ([]byte, error) {
	return json.Marshal(control.Credentials{Generation: c.Baked.Generation,
		PushSHA256: []string{control.HashToken(c.Baked.Push)}, EdgeTokens: []string{c.Baked.Edge},
		CA: c.CA, Cert: c.EdgeCert, Key: c.EdgeKey})
}

// Current is what a running edge must hold now (PUT /control): every
// push token and edge token accepted (current first), no TLS material.
func (c Control) Current() control.Credentials {
	out := control.Credentials{Generation: c.Generation, EdgeTokens: append([]string{c.Edge}, c.EdgePrev...)}
	for _, p := range append([]string{c.Push}, c.PushPrev...) {
		out.PushSHA256 = append(out.PushSHA256, control.HashToken(p))
	}
	return out
}

// PushTokens are the push tokens to try on an edge, in order: the current
// one, the older ones of a rotation, then the baked one (a task started
// from the Docker secret holds only that).
func (c Control) PushTokens() []string {
	out := append([]string{c.Push}, c.PushPrev...)
	if !slices.Contains(out, c.Baked.Push) {
		out = append(out, c.Baked.Push)
	}
	return out
}

// EdgeTokens are the edge tokens the certificate storage accepts: the
// current one, a rotation's older ones and the baked one.
func (c Control) EdgeTokens() []string {
	out := append([]string{c.Edge}, c.EdgePrev...)
	if !slices.Contains(out, c.Baked.Edge) {
		out = append(out, c.Baked.Edge)
	}
	return out
}

// ClientTLS is the TLS configuration of a client of serverName (an
// edge's admin address, the certificate storage): the control CA pinned.
func (c Control) ClientTLS(serverName string) (*tls.Config, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(c.CA)) {
		return nil, fmt.Errorf("control credentials: the CA is not PEM: %w", core.ErrInvalid)
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: serverName}, nil
}

// StorageTLS is the certificate storage's server TLS configuration.
func (c Control) StorageTLS() (*tls.Config, error) {
	cert, err := tls.X509KeyPair([]byte(c.StorageCert), []byte(c.StorageKey))
	if err != nil {
		return nil, fmt.Errorf("control credentials: the storage certificate: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}, nil
}
