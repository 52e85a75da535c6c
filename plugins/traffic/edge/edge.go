// Package edge is the traffic/edge backend: it implements core.Traffic by
// publishing the route graph as gordon-edge's route table
// (<state>/edge/routes.json) and waiting until the edge confirms that
// generation: in its answer to POST /reload, else by polling its admin
// status or <state>/edge/status.json (ARCHITECTURE §5, SPEC decision 11).
package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/gofrs/flock"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// File names inside <state>/edge, shared with gordon-edge.
const (
	routesFile = edgestate.RoutesFile
	statusFile = edgestate.StatusFile
	lockFile   = "lock"
)

// Traffic publishes route graphs to gordon-edge through the state directory.
// It is safe for concurrent use; publishers in different processes are
// serialized by the file lock <state>/edge/lock (SPEC section 5, decision 2).
type Traffic struct {
	stateDir     string
	dir          string // <state>/edge
	applyTimeout time.Duration
	pollInterval time.Duration
	adminTimeout time.Duration
	client       *http.Client
	// swarm lists the edge tasks when the state directory has a swarm
	// configuration (swarm.go); pushClient PUTs tables to them.
	swarm      swarmEdges
	pushClient *http.Client
	// tls are the clients of the swarm's control CA (control.go).
	tls *tlsClients
}

var (
	_ core.Traffic       = (*Traffic)(nil)
	_ core.TrafficRoutes = (*Traffic)(nil)
)

// Option configures a Traffic.
type Option func(*Traffic)

// WithApplyTimeout bounds the wait for the edge to confirm a generation
// (default 10 s).
func WithApplyTimeout(d time.Duration) Option { return func(t *Traffic) { t.applyTimeout = d } }

// WithPollInterval sets how often the edge's status is re-read while
// waiting for a generation when the edge did not answer POST /reload with
// it (an old or restarting edge; default 5 ms).
func WithPollInterval(d time.Duration) Option { return func(t *Traffic) { t.pollInterval = d } }

// WithAdminTimeout bounds one request to the edge admin endpoint (GET
// /status, POST /reload; default 1 s).
func WithAdminTimeout(d time.Duration) Option { return func(t *Traffic) { t.adminTimeout = d } }

// New returns the edge traffic backend for the state directory stateDir.
func New(stateDir string, opts ...Option) *Traffic {
	t := &Traffic{
		stateDir:     stateDir,
		dir:          filepath.Join(stateDir, "edge"),
		applyTimeout: 10 * time.Second,
		pollInterval: 5 * time.Millisecond,
		adminTimeout: time.Second,
	}
	for _, o := range opts {
		o(t)
	}
	t.client = &http.Client{Timeout: t.adminTimeout}
	t.swarm = &apiEdges{}
	t.pushClient = &http.Client{}
	return t
}

// Apply writes graph as the next generation of the route table and waits
// until the edge reports it applied (SPEC decision 11). The table is
// sorted (HTTP by host, TCP/UDP by listen) and stamped with schema 1 and
// generation max(current table, applied)+1; the write is atomic (temp file,
// fsync, rename, fsync of the directory) under the global publisher lock.
//
// Errors: the edge rejected that generation → core.ErrInvalid with the
// edge's reason; no confirmation within the apply timeout →
// core.ErrUnavailable ("edge did not apply generation N within 10s: …");
// ctx ended → core.ErrUnavailable wrapping ctx's error; state directory
// failures → core.ErrUnavailable. Any error is a rejected rebuild (R21b).
func (t *Traffic) Apply(ctx context.Context, graph routetable.Graph) (uint64, error) {
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return 0, fmt.Errorf("traffic/edge: state directory %s: %w: %w", t.dir, core.ErrUnavailable, err)
	}
	lock := flock.New(filepath.Join(t.dir, lockFile))
	locked, err := lock.TryLockContext(ctx, t.pollInterval)
	if err != nil || !locked {
		return 0, fmt.Errorf("traffic/edge: route table lock %s: %w: %w", lock.Path(), core.ErrUnavailable, errOrCtx(err, ctx))
	}
	defer func() { _ = lock.Unlock() }()

	cur, st := t.currentGeneration()
	cfg, onSwarm, err := t.swarmConfig()
	if err != nil {
		return 0, fmt.Errorf("traffic/edge: %w", err)
	}
	var edges []swarm.EdgeTask
	if onSwarm {
		// Edges answer a lower generation with the one they hold, so a
		// table of record that restarts (another manager adopted the
		// state, a restored backup) must outrank what they applied.
		if edges, err = t.targets(ctx, cfg); err != nil {
			return 0, err
		}
		cur = max(cur, t.swarmGeneration(ctx, cfg, edges, cur))
	}
	if cur == math.MaxUint64 {
		// Never wraps: an edge answers a lower generation with the one
		// it holds.
		return 0, fmt.Errorf("traffic/edge: the route table generation in %s is at its maximum (%d), which no deploy reaches: remove %s and %s there, then run the command again: %w",
			t.dir, cur, routesFile, statusFile, core.ErrConflict)
	}
	gen := cur + 1
	table := routetable.Table{Schema: routetable.Schema, Generation: gen, Graph: sortedGraph(graph)}
	data, err := json.MarshalIndent(table, "", "  ")
	if err != nil {
		return 0, fmt.Errorf("traffic/edge: encode route table generation %d: %w: %w", gen, core.ErrInvalid, err)
	}
	if err := edgestate.WriteFileAtomic(filepath.Join(t.dir, routesFile), append(data, '\n')); err != nil {
		return 0, fmt.Errorf("traffic/edge: write route table generation %d: %w: %w", gen, core.ErrUnavailable, err)
	}
	deadline := time.Now().Add(t.applyTimeout)
	if onSwarm {
		return gen, t.pushSwarm(ctx, cfg, edges, table, deadline)
	}
	if live, ok := t.reload(ctx, st.AdminAddr); ok {
		if done, err := t.confirmed(live, true, table); done {
			return gen, err
		}
	}
	return gen, t.waitApplied(ctx, deadline, table, st.AdminAddr)
}

// reload asks a running edge to read the new table now (POST /reload on
// admin, the address status.json names; "" when none) instead of at its
// next poll, which is up to 150 ms away, and returns the edge's status
// after that read (ok). ok is false when the edge does not answer with
// it within the admin timeout (an edge that only queues the read answers
// 202, an old or crashed one nothing): waitApplied then polls.
func (t *Traffic) reload(ctx context.Context, admin string) (routetable.Status, bool) {
	if admin == "" {
		return routetable.Status{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, t.adminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+admin+"/reload", nil)
	if err != nil {
		return routetable.Status{}, false
	}
	t.authorize(req)
	resp, err := t.client.Do(req)
	if err != nil {
		return routetable.Status{}, false
	}
	defer resp.Body.Close()
	var st routetable.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return routetable.Status{}, false
	}
	return st, true
}

// confirmed judges one status of the edge for table: done with nil when
// the edge applied table's generation (exactly: a later one is another
// publisher's table, not this one) with every TCP/UDP
// listener it asks for bound; done with an error when the edge rejected
// that generation, cannot bind a listener of it, or (live) serves another
// state directory; not done otherwise.
func (t *Traffic) confirmed(st routetable.Status, live bool, table routetable.Table) (bool, error) {
	gen := table.Generation
	switch {
	case live && st.StateID != "" && st.StateID != t.stateID():
		return true, t.foreignEdge(st)
	case st.AppliedGeneration == gen:
		return true, listenerErr(st, table)
	case st.Error != "" && st.RejectedGeneration == gen:
		return true, fmt.Errorf("traffic/edge: edge rejected generation %d: %w: %s", gen, core.ErrInvalid, st.Error)
	}
	return false, nil
}

// waitApplied is the fallback when the edge did not answer POST /reload
// with the outcome: it polls until the edge confirms table (confirmed) or
// deadline passes. The edge itself answers (GET /status on its admin
// address, checked to serve this state directory); status.json is only
// the fallback when the admin address is unknown or does not answer,
// since an edge that cannot write the file (a full disk) still applies
// and serves the table.
func (t *Traffic) waitApplied(ctx context.Context, deadline time.Time, table routetable.Table, admin string) error {
	gen := table.Generation
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	tick := time.NewTicker(t.pollInterval)
	defer tick.Stop()
	var last routetable.Status
	for {
		st, live, err := t.edgeStatus(ctx, admin)
		if err == nil {
			last = st
			if done, err := t.confirmed(st, live, table); done {
				return err
			}
			if st.AdminAddr != "" {
				admin = st.AdminAddr
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("traffic/edge: waiting for the edge to apply generation %d: %w: %w", gen, core.ErrUnavailable, ctx.Err())
		case <-timer.C:
			reason := "is gordon-edge running? docker gordon edge start"
			if last.Error != "" {
				reason = last.Error
			} else if last.AdminAddr != "" {
				reason = "the edge at " + last.AdminAddr + " does not answer (docker gordon edge status)"
			}
			return fmt.Errorf("traffic/edge: edge did not apply generation %d within %s: %s: %w", gen, t.applyTimeout, reason, core.ErrUnavailable)
		case <-tick.C:
		}
	}
}

// edgeStatus asks the edge at admin for its live status (live = true); if
// that is not possible it reads status.json.
func (t *Traffic) edgeStatus(ctx context.Context, admin string) (routetable.Status, bool, error) {
	if admin != "" {
		if st, err := t.fetchLive(ctx, admin); err == nil {
			return st, true, nil
		}
	}
	st, err := t.readStatusFile()
	return st, false, err
}

// listenerErr fails a confirmation while a TCP or UDP listener the table
// asks for could not be bound (the port was taken after preflight).
func listenerErr(st routetable.Status, table routetable.Table) error {
	want := map[string]bool{}
	for _, r := range table.TCP {
		want["tcp "+r.Listen] = true
	}
	for _, r := range table.UDP {
		want["udp "+r.Listen] = true
	}
	for _, l := range st.Listeners {
		if l.Error != "" && want[l.Proto+" "+l.Addr] {
			return fmt.Errorf("traffic/edge: generation %d applied but the edge cannot listen on %s/%s: %s: %w (free the port, then docker gordon reconcile)",
				table.Generation, l.Addr, l.Proto, l.Error, core.ErrConflict)
		}
	}
	return nil
}

// stateID is this backend's state directory identity.
func (t *Traffic) stateID() string { return edgestate.StateDirID(t.stateDir) }

// foreignEdge is the error for an edge that serves another state directory.
func (t *Traffic) foreignEdge(st routetable.Status) error {
	return fmt.Errorf("traffic/edge: the edge at %s (pid %d) serves another state directory (id %s; %s is %s): %w; start an edge for this one (docker gordon --state-dir %s edge start) or use the state directory that edge serves",
		st.AdminAddr, st.PID, st.StateID, t.stateDir, t.stateID(), core.ErrConflict, t.stateDir)
}

// Status returns the edge's applied generation, last error, listeners and
// per-backend counters. When status.json names an admin address, the live
// figures are fetched from GET http://<admin>/status (bounded by the admin
// timeout); if that fails the file's figures are returned with Stale set
// (the edge is taken as not running). UpdatedAt is when the edge last
// wrote status.json; RetiredBackends are the backends no route of the
// last table written (routes.json) leads to. A missing or unreadable
// status.json is core.ErrUnavailable (the edge never ran here); an edge
// serving another state directory, core.ErrConflict.
func (t *Traffic) Status(ctx context.Context) (core.TrafficStatus, error) {
	if cfg, onSwarm, err := t.swarmConfig(); err != nil {
		return core.TrafficStatus{}, fmt.Errorf("traffic/edge: %w", err)
	} else if onSwarm {
		return t.swarmStatus(ctx, cfg)
	}
	file, err := t.readStatusFile()
	if err != nil {
		return core.TrafficStatus{}, fmt.Errorf("traffic/edge: %w (is gordon-edge running? docker gordon edge start)", err)
	}
	st, stale := file, true
	if file.AdminAddr != "" {
		if live, err := t.fetchLive(ctx, file.AdminAddr); err == nil {
			if live.StateID != "" && live.StateID != t.stateID() {
				return core.TrafficStatus{}, t.foreignEdge(live)
			}
			st, stale = live, false
		}
	}
	return core.TrafficStatus{
		AppliedGeneration: st.AppliedGeneration, Error: st.Error, Backends: st.Backends,
		Stale: stale, UpdatedAt: file.UpdatedAt, Listeners: st.Listeners, RetiredBackends: t.retired(st.Backends),
	}, nil
}

// retired lists the backends of bs that no route of routes.json leads to
// (nil when routes.json is unreadable).
func (t *Traffic) retired(bs []routetable.BackendStatus) []string {
	data, err := os.ReadFile(filepath.Join(t.dir, routesFile))
	if err != nil {
		return nil
	}
	var tbl routetable.Table
	if json.Unmarshal(data, &tbl) != nil {
		return nil
	}
	routed := map[string]bool{}
	for _, rt := range tbl.HTTP {
		for _, b := range rt.Backends {
			routed[b.Addr] = true
		}
	}
	for _, rt := range append(tbl.TCP, tbl.UDP...) {
		routed[rt.Backend] = true
	}
	var out []string
	for _, b := range bs {
		if !routed[b.Addr] {
			out = append(out, b.Addr)
		}
	}
	return out
}

// Routes returns the route graph the edge last applied (edge/applied.json,
// else the last table written, edge/routes.json): the last good routes the
// engine keeps for an app whose record it cannot read. Errors wrap
// core.ErrUnavailable (neither file readable). On a swarm the table of
// record is routes.json, and it is returned only while every running edge
// has applied it (swarmLagging): an edge that restarted with no table,
// when no peer had one either, makes this an error, so the reconcile pass
// applies the table again instead of taking it as served.
func (t *Traffic) Routes(ctx context.Context) (routetable.Graph, error) {
	if cfg, onSwarm, err := t.swarmConfig(); err == nil && onSwarm {
		if err := t.swarmLagging(ctx, cfg); err != nil {
			return routetable.Graph{}, err
		}
	}
	var firstErr error
	for _, name := range []string{"applied.json", routesFile} {
		data, err := os.ReadFile(filepath.Join(t.dir, name))
		if err == nil {
			var tbl routetable.Table
			if err = json.Unmarshal(data, &tbl); err == nil {
				return tbl.Graph, nil
			}
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return routetable.Graph{}, fmt.Errorf("traffic/edge: last applied routes in %s: %w: %w", t.dir, core.ErrUnavailable, firstErr)
}

func (t *Traffic) fetchLive(ctx context.Context, admin string) (routetable.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, t.adminTimeout)
	defer cancel()
	scheme, client, _, _, _ := t.adminClients()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+admin+"/status", nil)
	if err != nil {
		return routetable.Status{}, err
	}
	t.authorize(req)
	resp, err := client.Do(req)
	if err != nil {
		return routetable.Status{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return routetable.Status{}, fmt.Errorf("edge admin %s: HTTP %d", admin, resp.StatusCode)
	}
	var st routetable.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return routetable.Status{}, fmt.Errorf("edge admin %s: decode: %w", admin, err)
	}
	return st, nil
}

// authorize adds the edge admin API's bearer token to req: on a swarm the
// route-push token (swarm.Token), on one engine the edge's
// <state>/edge/admin.token; none when it cannot be read (an edge that has
// not started yet then answers 401, taken as no answer).
func (t *Traffic) authorize(req *http.Request) {
	var tok string
	if _, onSwarm, err := t.swarmConfig(); err == nil && onSwarm {
		tok, _ = swarm.Token(t.stateDir)
	} else {
		tok, _ = edgestate.ReadAdminToken(t.dir)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
}

// readStatusFile reads status.json. Errors wrap core.ErrUnavailable.
func (t *Traffic) readStatusFile() (routetable.Status, error) {
	path := filepath.Join(t.dir, statusFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return routetable.Status{}, fmt.Errorf("edge status %s: %w: %w", path, core.ErrUnavailable, err)
	}
	var st routetable.Status
	if err := json.Unmarshal(data, &st); err != nil {
		return routetable.Status{}, fmt.Errorf("edge status %s: unreadable: %w: %w", path, core.ErrUnavailable, err)
	}
	return st, nil
}

// currentGeneration is the larger of the route table's generation and the
// edge's applied generation (0 when neither is readable), so a new table
// always outranks whatever the edge last saw. An unreadable routes.json is
// replaced: it is derived data, recomputed whole from ACTIVE records.
func (t *Traffic) currentGeneration() (uint64, routetable.Status) {
	var gen uint64
	if data, err := os.ReadFile(filepath.Join(t.dir, routesFile)); err == nil {
		var tbl struct {
			Generation uint64 `json:"generation"`
		}
		if json.Unmarshal(data, &tbl) == nil {
			gen = tbl.Generation
		}
	}
	st, err := t.readStatusFile()
	if err == nil {
		gen = max(gen, st.AppliedGeneration, st.RejectedGeneration)
	}
	return gen, st
}

// sortedGraph copies g with HTTP routes sorted by host, L4 routes by listen
// and nil lists replaced by empty ones.
func sortedGraph(g routetable.Graph) routetable.Graph {
	out := routetable.Graph{
		HTTP: append([]routetable.HTTPRoute{}, g.HTTP...),
		TCP:  append([]routetable.L4Route{}, g.TCP...),
		UDP:  append([]routetable.L4Route{}, g.UDP...),
	}
	for i := range out.HTTP {
		out.HTTP[i].Backends = append([]routetable.Backend{}, out.HTTP[i].Backends...)
	}
	sort.SliceStable(out.HTTP, func(i, j int) bool { return out.HTTP[i].Host < out.HTTP[j].Host })
	sort.SliceStable(out.TCP, func(i, j int) bool { return out.TCP[i].Listen < out.TCP[j].Listen })
	sort.SliceStable(out.UDP, func(i, j int) bool { return out.UDP[i].Listen < out.UDP[j].Listen })
	return out
}

func errOrCtx(err error, ctx context.Context) error {
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("not acquired")
}

var _ core.CertStore = (*Traffic)(nil)

// AddCert implements core.CertStore: the pair is checked
// (certstore.ParsePair) and written to <state>/edge/certs/static/<host>/
// (0700 directory, 0600 files, atomic renames); the edge serves it within
// its next refresh (2 s) without a restart. A refusal wraps
// core.ErrInvalid and writes nothing.
func (t *Traffic) AddCert(_ context.Context, host string, certPEM, keyPEM []byte) (core.CertInfo, error) {
	info, err := certstore.AddStatic(filepath.Dir(t.dir), host, certPEM, keyPEM, time.Now())
	if errors.Is(err, certstore.ErrInvalid) {
		return core.CertInfo{}, fmt.Errorf("traffic/edge: certificate for %s refused: %w: %w", host, core.ErrInvalid, err)
	}
	if err != nil {
		return core.CertInfo{}, fmt.Errorf("traffic/edge: store certificate for %s: %w: %w", host, core.ErrUnavailable, err)
	}
	return core.CertInfo(info), nil
}

// RemoveCert implements core.CertStore (core.ErrNotFound when host has no
// operator certificate). The host falls back to ACME (tls "auto" or
// "always") at the edge's next refresh.
func (t *Traffic) RemoveCert(_ context.Context, host string) error {
	err := certstore.RemoveStatic(filepath.Dir(t.dir), host)
	if errors.Is(err, certstore.ErrNotFound) {
		return fmt.Errorf("traffic/edge: %w: %w", core.ErrNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("traffic/edge: %w: %w", core.ErrUnavailable, err)
	}
	return nil
}

// ListCerts implements core.CertStore: operator certificates read from the
// store now, ACME ones as the edge last reported them (certs/state.json).
func (t *Traffic) ListCerts(context.Context) ([]core.CertInfo, error) {
	out, err := certstore.List(filepath.Dir(t.dir), time.Now())
	if err != nil {
		return nil, fmt.Errorf("traffic/edge: list certificates: %w: %w", core.ErrUnavailable, err)
	}
	infos := make([]core.CertInfo, len(out))
	for i, in := range out {
		infos[i] = core.CertInfo(in)
	}
	return infos, nil
}
