package routepush

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// MaxTableBytes bounds a pushed or pulled route table document (16 MiB);
// a larger PUT body is answered 413.
const MaxTableBytes = 16 << 20

// DefaultPeerInterval is how often RunPeers asks the peers when
// Config.Interval is zero.
const DefaultPeerInterval = time.Second

// Edge is what the pusher needs of the edge it serves.
type Edge interface {
	// Publish writes data (a route table document) as the edge's
	// routes.json and asks for it to be applied now; answered is true
	// when the apply (or its rejection) is done, false when it was queued
	// but not seen within the edge's reload bound or ctx ended. err is a
	// failed write (nothing changed).
	Publish(ctx context.Context, data []byte) (answered bool, err error)
	// Status is the edge's live status.
	Status() routetable.Status
}

// Auth decides who may push and pull, and what this edge sends its peers
// (a swarm's control credentials, edgeproxy/control.Keyring).
type Auth interface {
	// AcceptsPush reports whether tok may PUT /routes (and GET /routes).
	AcceptsPush(tok string) bool
	// AcceptsEdge reports whether tok may GET /routes (a peer).
	AcceptsEdge(tok string) bool
	// EdgeToken is the token this edge sends to its peers.
	EdgeToken() string
}

// Config configures a Pusher.
type Config struct {
	// Token is the bearer token every request must carry, when Auth is
	// nil: then one token both pushes and pulls.
	Token string
	// Auth, when set, replaces Token: pushes need a push token, pulls an
	// edge token (or a push token), and the peers get EdgeToken.
	Auth Auth
	// PeerTLS, when set, asks the peers over HTTPS with it (the control
	// CA pinned); nil asks over HTTP.
	PeerTLS *tls.Config
	// Peers is the DNS name of every edge task's admin address (e.g.
	// "tasks.gordon-edge" on a swarm); "" asks no peer.
	Peers string
	// Interval is how often RunPeers asks the peers (default
	// DefaultPeerInterval).
	Interval time.Duration
	// Lookup resolves Peers into addresses, each "ip" (the peer's admin
	// port is this edge's own) or "ip:port" (default: the DNS A/AAAA
	// records, net.DefaultResolver.LookupHost).
	Lookup func(ctx context.Context, name string) ([]string, error)
	// AdminAddr returns this edge's bound admin address ("host:port"):
	// its port is the peers', and a peer at a local address on that port
	// is this edge itself.
	AdminAddr func() string
	// Logger defaults to a null logger.
	Logger hclog.Logger
}

// Pusher serves PUT and GET /routes and asks the peers (package doc).
// Create it with New.
type Pusher struct {
	cfg    Config
	edge   Edge
	client *http.Client
	// mu serializes publishes (PUTs and tables adopted from peers), so the
	// generation check and the write are one step.
	mu sync.Mutex
	// cur is the last table the edge applied (SetApplied); nil before.
	cur atomic.Pointer[appliedTable]
	// tried is the highest generation adopted from a peer, so a table this
	// edge refuses is not written again every interval.
	tried uint64
}

type appliedTable struct {
	generation uint64
	data       []byte
}

// New returns a Pusher serving edge with cfg (cfg.Token or cfg.Auth
// must be set).
func New(cfg Config, edge Edge) *Pusher {
	if cfg.Auth == nil {
		cfg.Auth = tokenAuth{tok: sha256.Sum256([]byte(cfg.Token)), raw: cfg.Token}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPeerInterval
	}
	if cfg.Lookup == nil {
		cfg.Lookup = net.DefaultResolver.LookupHost
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.AdminAddr == nil {
		cfg.AdminAddr = func() string { return "" }
	}
	return &Pusher{
		cfg:    cfg,
		edge:   edge,
		client: newPeerClient(cfg.PeerTLS),
	}
}

// tokenAuth is one token for everything (Config.Token).
type tokenAuth struct {
	tok [sha256.Size]byte
	raw string
}

// AcceptsPush compares hashes, so the comparison takes the same time
// whatever the length or content of the presented token.
func (a tokenAuth) AcceptsPush(tok string) bool {
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], a.tok[:]) == 1
}
func (a tokenAuth) AcceptsEdge(tok string) bool { return a.AcceptsPush(tok) }
func (a tokenAuth) EdgeToken() string           { return a.raw }

// SetApplied records t as the table the edge applied (the edge calls it
// after every successful apply, from any source: routes.json, a PUT, a
// peer, applied.json at start). GET /routes serves it as JSON.
func (p *Pusher) SetApplied(t routetable.Table) {
	data, err := json.Marshal(t)
	if err != nil {
		p.cfg.Logger.Error("encode applied route table", "generation", t.Generation, "error", err)
		return
	}
	p.cur.Store(&appliedTable{generation: t.Generation, data: data})
}

// Register adds PUT /routes and GET /routes to mux.
func (p *Pusher) Register(mux *http.ServeMux) {
	mux.HandleFunc("PUT /routes", p.servePut)
	mux.HandleFunc("GET /routes", p.serveGet)
}

// authorized reports whether r carries "Authorization: Bearer <token>"
// with a push token, or, when pull, an edge token.
func (p *Pusher) authorized(r *http.Request, pull bool) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	tok = strings.TrimSpace(tok)
	return p.cfg.Auth.AcceptsPush(tok) || (pull && p.cfg.Auth.AcceptsEdge(tok))
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="gordon-edge"`)
	http.Error(w, "missing or wrong routes token", http.StatusUnauthorized)
}

// servePut is PUT /routes (package doc).
func (p *Pusher) servePut(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r, false) {
		unauthorized(w)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxTableBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("route table over %d bytes", MaxTableBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	gen, err := generationOf(data)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, err := p.publish(r.Context(), data, gen)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case out == queued:
		w.WriteHeader(http.StatusAccepted)
	case out == older:
		p.writeStatus(w, http.StatusConflict)
	case out == tooFar:
		http.Error(w, fmt.Sprintf("generation %d is more than %d above the applied generation %d: refused (the edge keeps its table)",
			gen, routetable.MaxGenerationStep, p.appliedGeneration()), http.StatusUnprocessableEntity)
	default:
		p.writeStatus(w, http.StatusOK)
	}
}

func (p *Pusher) writeStatus(w http.ResponseWriter, code int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(p.edge.Status())
}

// serveGet is GET /routes[?after=N] (package doc).
func (p *Pusher) serveGet(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r, true) {
		unauthorized(w)
		return
	}
	var after uint64
	hasAfter := r.URL.Query().Has("after")
	if hasAfter {
		n, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
		if err != nil {
			http.Error(w, "after: not an unsigned integer", http.StatusBadRequest)
			return
		}
		after = n
	}
	cur := p.cur.Load()
	switch {
	case cur == nil:
		http.Error(w, "no route table applied yet", http.StatusNotFound)
	case hasAfter && cur.generation <= after:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(cur.data)
	}
}

// outcome is what publish did.
type outcome int

const (
	applied   outcome = iota // written and applied (or refused by the edge's validation)
	unchanged                // same generation as applied: nothing written
	older                    // lower generation than applied: nothing written
	queued                   // written, apply not seen within the bound
	tooFar                   // more than MaxGenerationStep above applied: nothing written
)

// appliedGeneration is the generation of the table the edge applied, 0
// before any.
func (p *Pusher) appliedGeneration() uint64 {
	if cur := p.cur.Load(); cur != nil {
		return cur.generation
	}
	return 0
}

// publish writes and applies data (generation gen) unless the edge
// applied gen or a higher generation already, or gen is far ahead of the
// applied one (routetable.FarAhead).
func (p *Pusher) publish(ctx context.Context, data []byte, gen uint64) (outcome, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if routetable.FarAhead(gen, p.appliedGeneration()) {
		return tooFar, nil
	}
	if cur := p.cur.Load(); cur != nil {
		if gen < cur.generation {
			return older, nil
		}
		if gen == cur.generation {
			return unchanged, nil
		}
	}
	answered, err := p.edge.Publish(ctx, data)
	if err != nil {
		return applied, fmt.Errorf("write route table: %w", err)
	}
	if !answered {
		return queued, nil
	}
	return applied, nil
}

// generationOf reads the generation of a route table document; an error
// when it is not a JSON object with an unsigned integer generation.
func generationOf(data []byte) (uint64, error) {
	var g struct {
		Generation *uint64 `json:"generation"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		return 0, fmt.Errorf("not a route table: %w", err)
	}
	if g.Generation == nil {
		return 0, errors.New("not a route table: no generation")
	}
	return *g.Generation, nil
}
