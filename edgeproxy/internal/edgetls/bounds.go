package edgetls

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/caddyserver/certmagic"
	"golang.org/x/time/rate"
)

// On-demand order bounds (ACMEConfig), as Caddy's on_demand_tls: a name
// under a routed wildcard starts an order only within them.
const (
	// DefaultOnDemandMaxPending bounds the on-demand orders under way at
	// once (a name counts from its decision until its certificate is
	// obtained or its order failed, at most OnDemandInterval).
	DefaultOnDemandMaxPending = 10
	// DefaultOnDemandPerHour is how many on-demand orders may start an
	// hour (a token bucket of that many, refilled evenly): a third of
	// Let's Encrypt's 300 new orders per account per 3 hours, so managed
	// hosts keep room.
	DefaultOnDemandPerHour = 30
	// onDemandAskTimeout bounds the ask URL's answer.
	onDemandAskTimeout = 5 * time.Second
)

// Challenge lookups (HandleHTTPChallenge).
const (
	// challengeMissTTL is how long a host whose challenge was not found in
	// the storage is answered 404 without another read.
	challengeMissTTL = time.Second
	// challengeMissEntries bounds the remembered misses; when full, the
	// expired ones are dropped, and a miss that still finds no room is not
	// remembered (challengeReadsPerSecond still bounds the reads).
	challengeMissEntries = 10000
	// challengeReadsPerSecond bounds the storage reads of challenge
	// lookups (burst twice as many): on a swarm each is a request to the
	// reconcile container.
	challengeReadsPerSecond = 20
	// unroutedReadsPerSecond bounds the reads for hosts this edge does not
	// serve over HTTPS (burst twice as many): on a swarm another edge may
	// have placed the order before this one's route table arrived.
	unroutedReadsPerSecond = 2
)

// onDemandBounds are the on-demand order bounds beyond the per-name
// interval: pending orders, the rate, the ask URL.
type onDemandBounds struct {
	maxPending int
	// pending are the on-demand names ordered and not yet obtained or
	// failed, with their decision time (c.mu).
	pending map[string]time.Time
	limiter *rate.Limiter
	ask     *url.URL
	client  *http.Client
}

func newOnDemandBounds(ac ACMEConfig) (*onDemandBounds, error) {
	b := &onDemandBounds{maxPending: ac.OnDemandMaxPending, pending: map[string]time.Time{},
		client: &http.Client{Timeout: onDemandAskTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if b.maxPending <= 0 {
		b.maxPending = DefaultOnDemandMaxPending
	}
	perHour := ac.OnDemandPerHour
	if perHour <= 0 {
		perHour = DefaultOnDemandPerHour
	}
	b.limiter = rate.NewLimiter(rate.Every(time.Hour/time.Duration(perHour)), perHour)
	if ac.OnDemandAsk != "" {
		u, err := url.Parse(ac.OnDemandAsk)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("gordon-edge: --on-demand-ask %q: want an http or https URL, such as http://127.0.0.1:5555/check", ac.OnDemandAsk)
		}
		b.ask = u
	}
	return b, nil
}

// pendingLocked counts the pending orders, dropping those older than
// interval (their outcome was never reported) (c.mu held).
func (b *onDemandBounds) pendingLocked(interval time.Duration) int {
	for n, at := range b.pending {
		if time.Since(at) >= interval {
			delete(b.pending, n)
		}
	}
	return len(b.pending)
}

// asks reports whether the ask URL, if set, approves name: GET
// <ask>?domain=<name> answered 200 within onDemandAskTimeout (any other
// answer, or none, refuses).
func (b *onDemandBounds) asks(ctx context.Context, name string) error {
	if b.ask == nil {
		return nil
	}
	u := *b.ask
	q := u.Query()
	q.Set("domain", name)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return fmt.Errorf("gordon-edge: on-demand certificate for %s: the ask URL did not answer: %w", name, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("gordon-edge: on-demand certificate for %s refused by the ask URL (%d)", name, resp.StatusCode)
	}
	return nil
}

// challengeLookups bounds the storage reads of HTTP-01 challenge lookups.
type challengeLookups struct {
	limiter, unrouted *rate.Limiter
	// misses are hosts whose last lookup found nothing, until when (c.mu);
	// missTTL is challengeMissTTL (tests change it).
	misses  map[string]time.Time
	missTTL time.Duration
}

func newChallengeLookups() *challengeLookups {
	return &challengeLookups{limiter: rate.NewLimiter(challengeReadsPerSecond, 2*challengeReadsPerSecond),
		unrouted: rate.NewLimiter(unroutedReadsPerSecond, 2*unroutedReadsPerSecond), misses: map[string]time.Time{}, missTTL: challengeMissTTL}
}

// HandleHTTPChallenge answers an ACME HTTP-01 challenge request (a path
// under /.well-known/acme-challenge/) and reports whether it did: false
// without ACME or without a pending challenge for its token. A challenge
// this edge's own order made is answered from memory. Otherwise the
// storage (on a swarm, shared by every edge) is read for a host the route
// table serves over HTTPS (exactly or under a wildcard), and for any other
// host at most unroutedReadsPerSecond times a second (another edge may
// have ordered it before this edge's table arrived); never again within
// challengeMissTTL of finding nothing for the host, and at most
// challengeReadsPerSecond times a second overall. Any other request gets
// false (404) without a read.
func (c *Certs) HandleHTTPChallenge(w http.ResponseWriter, r *http.Request) bool {
	if c.issuer == nil || !certmagic.LooksLikeHTTPChallenge(r) {
		return false
	}
	name := hostName(r.Host)
	if _, mine := certmagic.GetACMEChallenge(name); mine {
		return c.issuer.HandleHTTPChallenge(w, r)
	}
	now := time.Now()
	c.mu.Lock()
	if until, ok := c.challenges.misses[name]; ok && now.Before(until) {
		c.mu.Unlock()
		return false
	}
	c.mu.Unlock()
	if rt, ok := c.route(name); (!ok || !rt.HTTPS) && !c.challenges.unrouted.Allow() {
		return false
	}
	if !c.challenges.limiter.Allow() {
		return false
	}
	c.challengeReads.Inc()
	if c.issuer.HandleHTTPChallenge(w, r) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.challenges.misses) >= challengeMissEntries {
		for n, until := range c.challenges.misses {
			if now.After(until) {
				delete(c.challenges.misses, n)
			}
		}
	}
	if len(c.challenges.misses) < challengeMissEntries {
		c.challenges.misses[name] = now.Add(c.challenges.missTTL)
	}
	return false
}
