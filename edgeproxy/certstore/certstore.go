package certstore

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// Directory and file names under <state>/edge.
const (
	Dir       = "certs"
	StaticDir = "static"
	ACMEDir   = "acme"
	StateFile = "state.json"
	certFile  = "cert.pem"
	keyFile   = "key.pem"
)

// Sources of a certificate.
const (
	SourceACME   = "acme"
	SourceStatic = "static"
)

// States of a host's certificate.
const (
	StateValid   = "valid"
	StatePending = "pending"
	StateFailed  = "failed"
)

// ErrInvalid marks a certificate or key that is refused (does not parse,
// does not match, does not cover the host, expired); ErrNotFound a host
// without a static certificate.
var (
	ErrInvalid  = errors.New("invalid certificate")
	ErrNotFound = errors.New("no such certificate")
)

// maxPEM bounds a certificate or key file (a chain of a few certificates).
const maxPEM = 1 << 20

// Info is one host's certificate as certs ls and status show it.
type Info struct {
	Host   string `json:"host"`
	Source string `json:"source"`
	Issuer string `json:"issuer,omitempty"`
	// NotAfter is the leaf's expiry (zero while none is held).
	NotAfter time.Time `json:"not_after,omitzero"`
	// State is StateValid, StatePending or StateFailed.
	State string `json:"state"`
	// Error is the last failure (StateFailed) and RetryAt when the next
	// attempt is due (zero when unknown).
	Error   string    `json:"error,omitempty"`
	RetryAt time.Time `json:"retry_at,omitzero"`
}

// Root returns <state>/edge/certs.
func Root(stateDir string) string { return filepath.Join(stateDir, "edge", Dir) }

// NameFor returns the directory name of host ("*" → "wildcard_").
func NameFor(host string) string {
	if rest, ok := strings.CutPrefix(host, "*"); ok {
		return "wildcard_" + rest
	}
	return host
}

// HostFor is the inverse of NameFor.
func HostFor(name string) string {
	if rest, ok := strings.CutPrefix(name, "wildcard_"); ok {
		return "*" + rest
	}
	return name
}

// validHost accepts a lowercase DNS name, optionally "*."-prefixed, the
// shapes a manifest host can take.
func validHost(host string) bool {
	h := strings.TrimPrefix(host, "*.")
	if h == "" || len(host) > 253 || strings.Contains(h, "*") || strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") || strings.Contains(h, "..") {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// ParsePair parses a PEM certificate chain and a PEM private key for host
// and checks them: both parse, the key matches the leaf, the leaf covers
// host (a wildcard host needs the same wildcard name) and is valid at now.
// Errors wrap ErrInvalid and say which check failed.
func ParsePair(host string, certPEM, keyPEM []byte, now time.Time) (*tls.Certificate, error) {
	if !validHost(host) {
		return nil, fmt.Errorf("%w: host %q: want a lowercase DNS name such as app.example.com or *.example.com", ErrInvalid, host)
	}
	if len(certPEM) > maxPEM || len(keyPEM) > maxPEM {
		return nil, fmt.Errorf("%w: certificate or key larger than %d bytes", ErrInvalid, maxPEM)
	}
	var chain [][]byte
	rest := certPEM
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, b.Bytes)
		}
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("%w: the certificate file has no PEM \"CERTIFICATE\" block", ErrInvalid)
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return nil, fmt.Errorf("%w: the first certificate does not parse: %v", ErrInvalid, err)
	}
	for i, der := range chain[1:] {
		if _, err := x509.ParseCertificate(der); err != nil {
			return nil, fmt.Errorf("%w: chain certificate %d does not parse: %v", ErrInvalid, i+2, err)
		}
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !publicKeyMatches(leaf.PublicKey, key) {
		return nil, fmt.Errorf("%w: the private key does not match the certificate's public key", ErrInvalid)
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return nil, fmt.Errorf("%w: the certificate does not cover %s (it names %s)", ErrInvalid, host, strings.Join(leaf.DNSNames, ", "))
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("%w: the certificate expired on %s", ErrInvalid, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("%w: the certificate is not valid before %s", ErrInvalid, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}, nil
}

func parseKey(keyPEM []byte) (crypto.Signer, error) {
	rest := keyPEM
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("%w: the key file has no PEM private key block", ErrInvalid)
		}
		var k any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: the private key does not parse: %v", ErrInvalid, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%w: unsupported private key type %T", ErrInvalid, k)
		}
		return s, nil
	}
}

func publicKeyMatches(pub any, key crypto.Signer) bool {
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		return p.Equal(key.Public())
	case *rsa.PublicKey:
		return p.Equal(key.Public())
	case ed25519.PublicKey:
		return p.Equal(key.Public())
	}
	return false
}

// IssuerName is the short issuer shown for a leaf (its issuer's CN, else
// the whole issuer DN).
func IssuerName(leaf *x509.Certificate) string {
	if leaf.Issuer.CommonName != "" {
		return leaf.Issuer.CommonName
	}
	return leaf.Issuer.String()
}

// AddStatic checks the pair (ParsePair) and stores it as host's static
// certificate, replacing any previous one. The certificate is written
// before the key's rename so a reader sees the old pair, the new pair, or
// (for an instant) a mismatch it refuses for that host only. A refusal
// writes nothing.
func AddStatic(stateDir, host string, certPEM, keyPEM []byte, now time.Time) (Info, error) {
	c, err := ParsePair(host, certPEM, keyPEM, now)
	if err != nil {
		return Info{}, err
	}
	dir := filepath.Join(Root(stateDir), StaticDir, NameFor(host))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Info{}, fmt.Errorf("certificate store %s: %w", dir, err)
	}
	for _, d := range []string{Root(stateDir), filepath.Join(Root(stateDir), StaticDir), dir} {
		_ = os.Chmod(d, 0o700)
	}
	if err := writeFile0600(filepath.Join(dir, keyFile), keyPEM); err != nil {
		return Info{}, err
	}
	if err := writeFile0600(filepath.Join(dir, certFile), certPEM); err != nil {
		return Info{}, err
	}
	return Info{Host: host, Source: SourceStatic, Issuer: IssuerName(c.Leaf), NotAfter: c.Leaf.NotAfter.UTC(), State: StateValid}, nil
}

func writeFile0600(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Chmod(0o600); err == nil {
		if _, err = tmp.Write(data); err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(name, path)
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	} else {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// RemoveStatic deletes host's static certificate; ErrNotFound when there
// is none.
func RemoveStatic(stateDir, host string) error {
	dir := filepath.Join(Root(stateDir), StaticDir, NameFor(host))
	if !validHost(host) {
		return fmt.Errorf("%w: host %q", ErrNotFound, host)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s has no static certificate", ErrNotFound, host)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove certificate of %s: %w", host, err)
	}
	return nil
}

// Static is one loaded static certificate, or the error that keeps it out
// (which affects that host only, R63).
type Static struct {
	Host string
	Cert *tls.Certificate
	Err  error
	// Stamp changes when either file changes (mtime and size).
	Stamp string
}

// LoadStatic reads every static certificate; a pair that is unreadable or
// refused is returned with Err set and no Cert. A missing store is empty.
func LoadStatic(stateDir string, now time.Time) []Static {
	base := filepath.Join(Root(stateDir), StaticDir)
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var out []Static
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		host := HostFor(e.Name())
		st := Static{Host: host, Stamp: StaticStamp(stateDir, host)}
		c, err := readPair(filepath.Join(base, e.Name()), host, now)
		if err != nil {
			st.Err = err
		} else {
			st.Cert = c
		}
		out = append(out, st)
	}
	return out
}

// StaticStamp returns a string that changes whenever host's static files
// change ("" when there are none).
func StaticStamp(stateDir, host string) string {
	dir := filepath.Join(Root(stateDir), StaticDir, NameFor(host))
	var b strings.Builder
	for _, f := range []string{certFile, keyFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%d/%d/", fi.ModTime().UnixNano(), fi.Size())
	}
	return b.String()
}

func readPair(dir, host string, now time.Time) (*tls.Certificate, error) {
	cert, err := readLimited(filepath.Join(dir, certFile))
	if err != nil {
		return nil, err
	}
	key, err := readLimited(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, err
	}
	return ParsePair(host, cert, key, now)
}

func readLimited(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if fi.Size() > maxPEM {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalid, path, maxPEM)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// WriteState writes the edge's per-host view (sorted by host) to
// certs/state.json atomically.
func WriteState(stateDir string, infos []Info) error {
	sort.Slice(infos, func(i, j int) bool { return infos[i].Host < infos[j].Host })
	data, err := json.MarshalIndent(infos, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(Root(stateDir), 0o700); err != nil {
		return err
	}
	return edgestate.WriteFileAtomic(filepath.Join(Root(stateDir), StateFile), append(data, '\n'))
}

// ReadState reads certs/state.json (empty when absent).
func ReadState(stateDir string) ([]Info, error) {
	b, err := os.ReadFile(filepath.Join(Root(stateDir), StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Info
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", StateFile, err)
	}
	return out, nil
}

// List returns every host's certificate: the static store read now
// (authoritative for static certificates, also while no edge runs) merged
// with the edge's state.json for ACME hosts. Sorted by host.
func List(stateDir string, now time.Time) ([]Info, error) {
	byHost := map[string]Info{}
	state, err := ReadState(stateDir)
	if err != nil {
		return nil, err
	}
	for _, in := range state {
		if in.Source == SourceACME {
			byHost[in.Host] = in
		}
	}
	for _, st := range LoadStatic(stateDir, now) {
		in := Info{Host: st.Host, Source: SourceStatic, State: StateValid}
		if st.Err != nil {
			in.State, in.Error = StateFailed, st.Err.Error()
		} else {
			in.Issuer, in.NotAfter = IssuerName(st.Cert.Leaf), st.Cert.Leaf.NotAfter.UTC()
		}
		byHost[st.Host] = in
	}
	out := make([]Info, 0, len(byHost))
	for _, in := range byHost {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out, nil
}
