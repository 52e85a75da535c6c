package control

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
)

// Names the TLS certificates are issued for; clients dial addresses and
// verify these names against the pinned CA.
const (
	EdgeServerName    = "gordon-edge"
	StorageServerName = "gordon-reconcile"
)

// Credentials are what an edge holds: the Docker secret's content (JSON)
// and the body of PUT /control.
type Credentials struct {
	// Generation orders updates: an edge takes only a higher one.
	Generation uint64 `json:"generation"`
	// PushSHA256 are the hex SHA-256 of every push token accepted.
	PushSHA256 []string `json:"push_sha256"`
	// EdgeTokens are the edge tokens accepted (GET /routes); the first is
	// the one this edge sends to its peers and the certificate storage.
	EdgeTokens []string `json:"edge_tokens"`
	// CA is the control channel's CA (PEM); Cert and Key this edge's
	// server certificate for EdgeServerName (PEM). An update may leave
	// them empty: the edge keeps its own.
	CA   string `json:"ca,omitempty"`
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
}

// HashToken is the hex SHA-256 of a push token (Credentials.PushSHA256).
func HashToken(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// Keyring is an edge's current credentials. Safe for concurrent use.
type Keyring struct {
	mu    sync.RWMutex
	upd   sync.Mutex // serializes ServeUpdate
	cur   Credentials
	push  [][sha256.Size]byte
	edge  [][sha256.Size]byte
	cert  *tls.Certificate
	roots *x509.CertPool
	// persist, when set, keeps an update across a restart of the process
	// (the task's private state directory).
	persist func([]byte) error
}

// Load reads the credentials at path (the Docker secret), then, when
// saved exists and holds a higher generation with the same CA (an update
// this task took before its process restarted), that one. persist
// writes later updates to saved.
func Load(path, saved string, persist func([]byte) error) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("control credentials: %w", err)
	}
	var c Credentials
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("control credentials %s: %w", path, err)
	}
	k, err := New(c)
	if err != nil {
		return nil, fmt.Errorf("control credentials %s: %w", path, err)
	}
	if saved != "" {
		if b, err := os.ReadFile(saved); err == nil {
			var s Credentials
			if json.Unmarshal(b, &s) == nil && s.Generation > c.Generation && (s.CA == "" || s.CA == c.CA) {
				_ = k.apply(s)
			}
		}
	}
	k.persist = persist
	return k, nil
}

// New returns a Keyring holding c, which must carry a push hash, an edge
// token, and the CA, certificate and key.
func New(c Credentials) (*Keyring, error) {
	k := &Keyring{}
	if err := k.apply(c); err != nil {
		return nil, err
	}
	return k, nil
}

// apply installs c (under no lock held by the caller).
func (k *Keyring) apply(c Credentials) error {
	k.mu.RLock()
	old := k.cur
	k.mu.RUnlock()
	if c.CA == "" {
		c.CA, c.Cert, c.Key = old.CA, old.Cert, old.Key
	}
	if len(c.PushSHA256) == 0 || len(c.EdgeTokens) == 0 || c.EdgeTokens[0] == "" {
		return errors.New("credentials without a push token hash or an edge token")
	}
	var push, edge [][sha256.Size]byte
	for _, h := range c.PushSHA256 {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return fmt.Errorf("push token hash %q is not a hex SHA-256", h)
		}
		push = append(push, [sha256.Size]byte(b))
	}
	for _, t := range c.EdgeTokens {
		edge = append(edge, sha256.Sum256([]byte(t)))
	}
	cert, err := tls.X509KeyPair([]byte(c.Cert), []byte(c.Key))
	if err != nil {
		return fmt.Errorf("the edge's certificate: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(c.CA)) {
		return errors.New("the control CA is not a PEM certificate")
	}
	k.mu.Lock()
	k.cur, k.push, k.edge, k.cert, k.roots = c, push, edge, &cert, roots
	k.mu.Unlock()
	return nil
}

// Generation is the generation of the credentials held.
func (k *Keyring) Generation() uint64 {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.cur.Generation
}

// AcceptsPush reports whether tok is an accepted push token (compared
// as hashes, in constant time).
func (k *Keyring) AcceptsPush(tok string) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return anyMatch(k.push, tok)
}

// AcceptsEdge reports whether tok is an accepted edge token.
func (k *Keyring) AcceptsEdge(tok string) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return anyMatch(k.edge, tok)
}

func anyMatch(set [][sha256.Size]byte, tok string) bool {
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	ok := 0
	for _, want := range set {
		ok |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return tok != "" && ok == 1
}

// EdgeToken is the edge token this edge sends.
func (k *Keyring) EdgeToken() string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.cur.EdgeTokens[0]
}

// ServerTLS is the admin listener's TLS configuration: this edge's
// certificate (the current one at each handshake), TLS 1.3 only.
func (k *Keyring) ServerTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		k.mu.RLock()
		defer k.mu.RUnlock()
		return k.cert, nil
	}}
}

// ClientTLS is a client's TLS configuration toward serverName: only a
// certificate the pinned CA issued for that name is accepted.
func (k *Keyring) ClientTLS(serverName string) *tls.Config {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: k.roots, ServerName: serverName}
}

// ServeUpdate is PUT /control: a push token holder sends newer
// Credentials (JSON, at most 1 MiB). 401 without an accepted push token,
// 409 for a generation not above the held one (the held generation in
// the body), 400 for credentials that do not load; 200 once installed
// (and persisted).
func (k *Keyring) ServeUpdate(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !k.AcceptsPush(tok) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gordon-edge control"`)
		http.Error(w, "missing or wrong push token", http.StatusUnauthorized)
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var c Credentials
	if err := json.Unmarshal(data, &c); err != nil {
		http.Error(w, "credentials: "+err.Error(), http.StatusBadRequest)
		return
	}
	k.upd.Lock()
	defer k.upd.Unlock()
	if held := k.Generation(); c.Generation <= held {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, "%d\n", held)
		return
	}
	if err := k.apply(c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if k.persist != nil {
		if b, err := json.Marshal(k.snapshot()); err == nil {
			_ = k.persist(b)
		}
	}
	fmt.Fprintf(w, "%d\n", c.Generation)
}

func (k *Keyring) snapshot() Credentials {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.cur
}
