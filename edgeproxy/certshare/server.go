package certshare

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Directory names under the certs root (as edgeproxy/certstore names them).
const (
	ACMEDir   = "acme"
	StaticDir = "static"
)

// MaxValueBytes bounds a request body (a stored value) and a static file.
const MaxValueBytes = 1 << 20

// Defaults of Server.LeaseTTL and Server.MaxWait.
const (
	DefaultLeaseTTL = 30 * time.Second
	DefaultMaxWait  = 20 * time.Second
)

// ErrNoToken is returned by NewServer and NewClient for an empty token.
var ErrNoToken = errors.New("certshare: no token: every request must be authorized")

// Server is the http.Handler serving one certs root (see the package
// documentation for its requests). Create it with NewServer; set LeaseTTL
// and MaxWait before it serves.
type Server struct {
	// LeaseTTL is how long a lock stays held without a renewal (default
	// DefaultLeaseTTL); clients renew every third of it.
	LeaseTTL time.Duration
	// MaxWait bounds one POST /v1/lock wait (default DefaultMaxWait).
	MaxWait time.Duration
	// MaxKeys and MaxBytes bound what acme/ holds (files, and their bytes
	// in total): a store past them is refused with 507 (defaults
	// DefaultMaxKeys, DefaultMaxBytes). MaxLocks bounds the leases held at
	// once: a lock past it is refused with 503 (default DefaultMaxLocks).
	MaxKeys  int
	MaxBytes int64
	MaxLocks int
	// Accept, when set, decides which bearer tokens are authorized instead
	// of NewServer's token (a swarm's edge tokens, which rotate).
	Accept func(tok string) bool

	root      string
	acme      fileStore
	tokenHash [32]byte
	mux       *http.ServeMux

	mu        sync.Mutex
	locks     map[string]*lease
	nextSweep time.Time
	used      usage
}

// lease is one held lock: its holder's id, when it lapses without a
// renewal, and a channel closed when it is released.
type lease struct {
	id       string
	expires  time.Time
	released chan struct{}
}

// NewServer returns a Server over certsRoot (the directory holding acme/
// and static/; acme/ is created on the first Store). It fails with
// ErrNoToken when token is empty (after trimming white space).
func NewServer(certsRoot, token string) (*Server, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, ErrNoToken
	}
	s := &Server{
		LeaseTTL: DefaultLeaseTTL, MaxWait: DefaultMaxWait,
		MaxKeys: DefaultMaxKeys, MaxBytes: DefaultMaxBytes, MaxLocks: DefaultMaxLocks,
		root:      certsRoot,
		acme:      fileStore{dir: filepath.Join(certsRoot, ACMEDir)},
		tokenHash: sha256.Sum256([]byte(token)),
		locks:     map[string]*lease{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/acme", s.serveLoad)
	mux.HandleFunc("PUT /v1/acme", s.serveStore)
	mux.HandleFunc("DELETE /v1/acme", s.serveDelete)
	mux.HandleFunc("GET /v1/stat", s.serveStat)
	mux.HandleFunc("GET /v1/list", s.serveList)
	mux.HandleFunc("POST /v1/lock", s.serveLock)
	mux.HandleFunc("POST /v1/renew", s.serveRenew)
	mux.HandleFunc("POST /v1/unlock", s.serveUnlock)
	mux.HandleFunc("GET /v1/static", s.serveStaticList)
	mux.HandleFunc("GET /v1/static/file", s.serveStaticFile)
	s.mux = mux
	return s, nil
}

// ServeHTTP authorizes the request, then serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gordon-certshare"`)
		http.Error(w, "missing or wrong token", http.StatusUnauthorized)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorized reports whether r carries "Authorization: Bearer <token>";
// both sides are hashed first, so the comparison takes the same time
// whatever the presented token.
func (s *Server) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	if s.Accept != nil {
		return s.Accept(strings.TrimSpace(tok))
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) == 1
}

// validKey reports whether key is a relative slash-separated path that
// stays under its root: no "..", ".", empty element, leading slash or
// backslash. allowRoot also accepts "" (the root itself).
func validKey(key string, allowRoot bool) bool {
	if key == "" {
		return allowRoot
	}
	return len(key) <= 1024 && fs.ValidPath(key) && key != "." && !strings.ContainsAny(key, "\\\x00")
}

// keyParam returns the request's key, or answers 400 and returns false.
func keyParam(w http.ResponseWriter, r *http.Request, allowRoot bool) (string, bool) {
	key := r.URL.Query().Get("key")
	if !validKey(key, allowRoot) {
		http.Error(w, "bad key: want a relative path without \"..\"", http.StatusBadRequest)
		return "", false
	}
	return key, true
}

// fail answers err: 404 for a missing key, 500 otherwise.
func fail(w http.ResponseWriter, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

func (s *Server) serveLoad(w http.ResponseWriter, r *http.Request) {
	key, ok := keyParam(w, r, false)
	if !ok {
		return
	}
	b, err := s.acme.load(key)
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}

func (s *Server) serveStore(w http.ResponseWriter, r *http.Request) {
	key, ok := keyParam(w, r, false)
	if !ok {
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxValueBytes))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	s.mu.Lock()
	err = s.reserveLocked(key, int64(len(b)))
	if err == nil {
		if err = s.acme.store(key, b); err != nil {
			s.used.known = false // recount: the write may have failed half-way
		}
	}
	s.mu.Unlock()
	switch {
	case errors.Is(err, errQuota):
		http.Error(w, err.Error(), http.StatusInsufficientStorage)
	case err != nil:
		fail(w, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request) {
	key, ok := keyParam(w, r, false)
	if !ok {
		return
	}
	s.mu.Lock()
	err := s.acme.delete(key)
	s.used.known = false // a directory may have gone with everything under it
	s.mu.Unlock()
	if err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) serveStat(w http.ResponseWriter, r *http.Request) {
	key, ok := keyParam(w, r, true)
	if !ok {
		return
	}
	ki, err := s.acme.stat(key)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, ki)
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request) {
	key, ok := keyParam(w, r, true)
	if !ok {
		return
	}
	keys, err := s.acme.list(r.Context(), key, r.URL.Query().Get("recursive") == "1")
	if err != nil {
		fail(w, err)
		return
	}
	if keys == nil {
		keys = []string{}
	}
	writeJSON(w, keys)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
