package policy

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/access"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"golang.org/x/crypto/bcrypt"
)

// Guard is a route's access rules (SPEC R73), built once per snapshot by
// NewGuard: the client must be in allow (403 otherwise), then present the
// credentials of one of users (401 otherwise). A route with a guard is
// always served by the edge's ServeHTTP (the event loop, the HTTP/1.1 loop
// and the HTTP/2 fast path hand its requests there), which calls Check.
type Guard struct {
	// restrict says allow is in force (allow may not be empty then).
	restrict bool
	allow    []netip.Prefix
	// users maps a user name to its bcrypt hash; nil: no basic auth.
	users map[string][]byte
	// decoy is compared for an unknown user, so the answer's timing does
	// not tell which users exist.
	decoy []byte
	// challenge is the WWW-Authenticate value of a 401.
	challenge string
	// slots are the route's own password check slots (authRouteSlots): a
	// flood of checks on one route never takes another route's.
	slots chan struct{}
}

// NewGuard builds the guard of a route ValidateAccess accepted; nil when
// the route has neither allow nor basic_auth. Entries that do not parse
// are skipped (ValidateAccess refused them).
func NewGuard(hr routetable.HTTPRoute) *Guard {
	if len(hr.Allow) == 0 && len(hr.BasicAuth) == 0 {
		return nil
	}
	g := &Guard{restrict: len(hr.Allow) > 0}
	for _, e := range hr.Allow {
		if p, err := access.ParseAllow(e); err == nil {
			g.allow = append(g.allow, p)
		}
	}
	if len(hr.BasicAuth) > 0 {
		g.users = make(map[string][]byte, len(hr.BasicAuth))
		for _, e := range hr.BasicAuth {
			if u, h, err := access.ParseBasicAuth(e); err == nil {
				g.users[u] = []byte(h)
				if g.decoy == nil {
					g.decoy = []byte(h)
				}
			}
		}
		g.slots = make(chan struct{}, authRouteSlots())
		realm := strings.ReplaceAll(strings.ReplaceAll(hr.Host, `\`, ``), `"`, ``)
		g.challenge = `Basic realm="` + realm + `", charset="UTF-8"`
	}
	return g
}

// ValidateAccess checks a route's allow and basic_auth entries (SPEC R73:
// the rules of access.ParseAllow and ParseBasicAuth; users distinct). An
// error names the route and the entry ("route table: http host ...") and
// never carries a hash; the edge wraps it with its ErrInvalidTable.
func ValidateAccess(r *routetable.HTTPRoute) error {
	users := make(map[string]struct{}, len(r.BasicAuth))
	for i, e := range r.BasicAuth {
		u, _, err := access.ParseBasicAuth(e)
		if err != nil {
			return fmt.Errorf("route table: http host %q (app %q, service %q): basic_auth entry %d: %v", r.Host, r.App, r.Service, i, err)
		}
		if _, dup := users[u]; dup {
			return fmt.Errorf("route table: http host %q (app %q, service %q): basic_auth lists user %q twice", r.Host, r.App, r.Service, u)
		}
		users[u] = struct{}{}
	}
	for i, e := range r.Allow {
		if _, err := access.ParseAllow(e); err != nil {
			return fmt.Errorf("route table: http host %q (app %q, service %q): allow entry %d: %v", r.Host, r.App, r.Service, i, err)
		}
	}
	return nil
}

// Check applies g to r (SPEC R73) and returns 0 when the request goes on,
// else the status of its refusal, in this order: 403 when the client
// address (clientAddr: the peer, or after trusted proxies the X-Forwarded-For
// hop that is not one) is outside allow, client then being that address
// (the zero Addr when it does not parse); then, with basic auth, 429 when
// every password check slot of the route (or of v, the edge's) stays busy for authSlotWait (or r's
// context ends) while checking r's credentials, and 401 when r has no
// valid credentials (answer it with WWW-Authenticate: Challenge). It
// writes nothing: the caller answers, and removes the Authorization
// header of an admitted request when HasUsers (the backend never sees
// the password). Credentials are never logged or echoed.
func (g *Guard) Check(r *http.Request, trusted []netip.Prefix, v *Verifier) (status int, client netip.Addr) {
	if g.restrict {
		ip := clientAddr(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), trusted)
		if !prefixesContain(g.allow, ip) {
			return http.StatusForbidden, ip
		}
	}
	if g.users == nil {
		return 0, netip.Addr{}
	}
	if user, pass, ok := r.BasicAuth(); ok {
		switch v.verify(r.Context(), g, user, pass) {
		case authOK:
			return 0, netip.Addr{}
		case authBusy:
			return http.StatusTooManyRequests, netip.Addr{}
		}
	}
	return http.StatusUnauthorized, netip.Addr{}
}

// HasUsers reports whether g asks for basic auth (the route has
// basic_auth entries).
func (g *Guard) HasUsers() bool { return g.users != nil }

// Challenge is the WWW-Authenticate value of g's 401: Basic with the
// route's host as realm (quotes and backslashes removed) and charset UTF-8.
func (g *Guard) Challenge() string { return g.challenge }

// clientAddr is the client address of a request from remoteAddr ("IP:port")
// with the X-Forwarded-For values xff: the peer when it is not a trusted
// proxy; otherwise the right-most X-Forwarded-For address that is not a
// trusted proxy (the left-most when all are; the peer when there is no
// X-Forwarded-For). The zero Addr when an address needed does not parse.
func clientAddr(remoteAddr string, xff []string, trusted []netip.Prefix) netip.Addr {
	peer := parseHop(remoteAddr)
	if !peer.IsValid() || !prefixesContain(trusted, peer) {
		return peer
	}
	client := peer
	for i := len(xff) - 1; i >= 0; i-- {
		hops := strings.Split(xff[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			a := parseHop(hops[j])
			if !a.IsValid() || !prefixesContain(trusted, a) {
				return a
			}
			client = a
		}
	}
	return client
}

// parseHop parses an address as peers and X-Forwarded-For write it: "IP",
// "IP:port", "[IPv6]:port" (unmapped; zero when it does not parse).
func parseHop(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// prefixesContain reports whether a is valid and in one of ps.
func prefixesContain(ps []netip.Prefix, a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Password check outcomes.
const (
	authDenied = iota
	authOK
	authBusy
)

// authRouteSlots is how many password checks of one route run at once:
// half the CPUs, at least one.
func authRouteSlots() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// authRoutesAtOnce is how many routes' checks may run at once at their
// full share (the edge's bound, Verifier.cpu): floods on fewer routes
// never make another route's check wait for the edge's bound.
const authRoutesAtOnce = 8

// Bounds of the password checks (SPEC R73).
const (
	// authCacheEntries bounds the verified-credentials cache.
	authCacheEntries = 4096
	// authSlotWait is how long a check waits for a free slot before the
	// request gets 429.
	authSlotWait = time.Second
)

// Verifier checks basic-auth passwords against bcrypt hashes (SPEC R73);
// one, made by NewVerifier, serves every route of an edge. A successful
// check is remembered (at most authCacheEntries; keyed by an HMAC, with a
// per-process random key, of user, password and hash, so a changed hash
// misses and the cache holds no password), so a client sending the same
// credentials again costs a hash, not a bcrypt. Each route (Guard) has
// its own check slots (half the CPUs, at least one), so a flood of wrong
// passwords on one host never gives 429 to another host's first login;
// the edge as a whole runs at most authRoutesAtOnce routes' worth at once
// (cpu), which bounds the CPU a flood on many hosts takes.
type Verifier struct {
	key  [32]byte
	mu   sync.Mutex
	ok   map[[32]byte]struct{}
	cpu  chan struct{}
	wait time.Duration
}

// NewVerifier returns a verifier with an empty cache, a fresh random
// cache key and authRoutesAtOnce routes' worth of check slots.
func NewVerifier() *Verifier {
	a := &Verifier{
		ok:   make(map[[32]byte]struct{}),
		cpu:  make(chan struct{}, authRoutesAtOnce*authRouteSlots()),
		wait: authSlotWait,
	}
	_, _ = rand.Read(a.key[:])
	return a
}

// verify checks user's password on g: authOK, authDenied (unknown user or
// wrong password) or authBusy (no check slot within a.wait, or ctx ended).
func (a *Verifier) verify(ctx context.Context, g *Guard, user, pass string) int {
	hash, known := g.users[user]
	if !known {
		hash = g.decoy
	}
	k := a.cacheKey(user, pass, hash)
	if known {
		a.mu.Lock()
		_, hit := a.ok[k]
		a.mu.Unlock()
		if hit {
			return authOK
		}
	}
	deadline := time.NewTimer(a.wait)
	defer deadline.Stop()
	if !acquire(ctx, g.slots, deadline.C) {
		return authBusy
	}
	if !acquire(ctx, a.cpu, deadline.C) {
		<-g.slots
		return authBusy
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(pass))
	<-a.cpu
	<-g.slots
	if err != nil || !known {
		return authDenied
	}
	a.mu.Lock()
	if len(a.ok) >= authCacheEntries {
		for old := range a.ok { // evict one arbitrary entry
			delete(a.ok, old)
			break
		}
	}
	a.ok[k] = struct{}{}
	a.mu.Unlock()
	return authOK
}

// acquire takes a slot of slots, waiting until deadline fires or ctx ends.
func acquire(ctx context.Context, slots chan struct{}, deadline <-chan time.Time) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	select {
	case slots <- struct{}{}:
		return true
	case <-deadline:
		return false
	case <-ctx.Done():
		return false
	}
}

// cacheKey is HMAC-SHA256(a.key, len(user) user len(pass) pass hash).
func (a *Verifier) cacheKey(user, pass string, hash []byte) [32]byte {
	m := hmac.New(sha256.New, a.key[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(user)))
	m.Write(n[:])
	m.Write([]byte(user))
	binary.BigEndian.PutUint64(n[:], uint64(len(pass)))
	m.Write(n[:])
	m.Write([]byte(pass))
	m.Write(hash)
	var k [32]byte
	m.Sum(k[:0])
	return k
}
