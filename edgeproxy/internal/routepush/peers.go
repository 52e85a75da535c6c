package routepush

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// peerTimeout bounds the lookup of Config.Peers and each request to a
// peer (connect, answer and body).
const peerTimeout = time.Second

// peersAskedAtOnce bounds the requests of one round in flight together.
const peersAskedAtOnce = 8

// newPeerClient is the HTTP client of the peer requests: no proxy, no
// redirects, every request bounded by peerTimeout.
func newPeerClient(tlsCfg *tls.Config) *http.Client {
	return &http.Client{
		Timeout: peerTimeout,
		Transport: &http.Transport{
			TLSClientConfig:       tlsCfg,
			DialContext:           (&net.Dialer{Timeout: peerTimeout}).DialContext,
			ResponseHeaderTimeout: peerTimeout,
			MaxIdleConnsPerHost:   1,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// peerTable is a table a peer answered with.
type peerTable struct {
	peer       string
	generation uint64
	data       []byte
}

// RunPeers asks the peers for a newer table at once and then every
// Config.Interval, adopting the newest (syncPeers), until ctx ends. It
// returns at once without Config.Peers. Failures are logged at debug
// level and never end it.
func (p *Pusher) RunPeers(ctx context.Context) {
	if p.cfg.Peers == "" {
		return
	}
	defer p.client.CloseIdleConnections()
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		p.syncPeers(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// syncPeers is one round of RunPeers: resolve Config.Peers, ask every
// peer but this edge for a table newer than the applied one (GET
// /routes?after=N), and publish the newest answer as a PUT would. Only
// RunPeers' goroutine may call it.
func (p *Pusher) syncPeers(ctx context.Context) {
	targets := p.peerTargets(ctx)
	if len(targets) == 0 {
		return
	}
	after := p.tried
	if cur := p.cur.Load(); cur != nil {
		after = max(after, cur.generation)
	}
	best := p.askPeers(ctx, targets, after, after > 0 || p.cur.Load() != nil)
	if best == nil {
		return
	}
	out, err := p.publish(ctx, best.data, best.generation)
	if err != nil {
		p.cfg.Logger.Warn("route table from a peer not written", "peer", best.peer, "generation", best.generation, "error", err)
		return
	}
	if out == tooFar {
		return // far ahead of what the edge applied meanwhile: not adopted
	}
	p.tried = best.generation
	if out == unchanged || out == older {
		return // a PUT brought it (or a newer one) meanwhile
	}
	if st := p.edge.Status(); st.AppliedGeneration >= best.generation {
		p.cfg.Logger.Info("route table adopted from a peer", "peer", best.peer, "generation", best.generation)
	} else {
		p.cfg.Logger.Warn("route table from a peer written but not applied", "peer", best.peer, "generation", best.generation, "error", st.Error)
	}
}

// peerTargets resolves Config.Peers into "ip:port" admin addresses,
// without this edge's own (a local address on this edge's admin port).
func (p *Pusher) peerTargets(ctx context.Context) []string {
	_, ownPort, err := net.SplitHostPort(p.cfg.AdminAddr())
	if err != nil {
		return nil // the admin listener is not bound yet
	}
	lctx, cancel := context.WithTimeout(ctx, peerTimeout)
	addrs, err := p.cfg.Lookup(lctx, p.cfg.Peers)
	cancel()
	if err != nil {
		p.cfg.Logger.Debug("peers not resolved", "name", p.cfg.Peers, "error", err)
		return nil
	}
	local := localAddrs()
	var targets []string
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			host, port = a, ownPort
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			p.cfg.Logger.Debug("peer address skipped", "addr", a, "error", err)
			continue
		}
		ip = ip.Unmap()
		if port == ownPort && local[ip.WithZone("")] {
			continue
		}
		if t := net.JoinHostPort(ip.String(), port); !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	return targets
}

// localAddrs are the addresses of this host's (container's) interfaces.
func localAddrs() map[netip.Addr]bool {
	local := map[netip.Addr]bool{}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return local
	}
	for _, a := range ifaddrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				local[ip.Unmap()] = true
			}
		}
	}
	return local
}

// askPeers asks every target for a table newer than after (hasAfter
// false: any table) and returns the newest answer, nil when none is
// newer.
func (p *Pusher) askPeers(ctx context.Context, targets []string, after uint64, hasAfter bool) *peerTable {
	var (
		mu   sync.Mutex
		best *peerTable
		wg   sync.WaitGroup
		sem  = make(chan struct{}, peersAskedAtOnce)
	)
	for _, target := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			t, err := p.askPeer(ctx, target, after, hasAfter)
			if err != nil {
				p.cfg.Logger.Debug("peer not asked", "peer", target, "error", err)
				return
			}
			if t != nil && routetable.FarAhead(t.generation, p.appliedGeneration()) {
				p.cfg.Logger.Warn("route table from a peer refused: its generation is far ahead of the applied one",
					"peer", target, "generation", t.generation, "applied", p.appliedGeneration())
				return
			}
			mu.Lock()
			if t != nil && (!hasAfter || t.generation > after) && (best == nil || t.generation > best.generation) {
				best = t
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return best
}

// askPeer is one GET /routes to target; nil, nil when the peer has no
// newer table (204) or none at all (404).
func (p *Pusher) askPeer(ctx context.Context, target string, after uint64, hasAfter bool) (*peerTable, error) {
	scheme := "http://"
	if p.cfg.PeerTLS != nil {
		scheme = "https://"
	}
	url := scheme + target + "/routes"
	if hasAfter {
		url += "?after=" + strconv.FormatUint(after, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.cfg.Auth.EdgeToken())
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent, http.StatusNotFound:
		return nil, nil
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("GET /routes answered %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxTableBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxTableBytes {
		return nil, fmt.Errorf("route table over %d bytes", MaxTableBytes)
	}
	gen, err := generationOf(data)
	if err != nil {
		return nil, err
	}
	return &peerTable{peer: target, generation: gen, data: data}, nil
}
