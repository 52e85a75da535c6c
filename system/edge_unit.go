package system

// The one-engine edge: the gordon-edge system container's unit, the
// settings of `edge start` and `system start` (remembered in
// <state>/edge/start.json), and those two starts and their stops.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/renameio/v2/maybe"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// DefaultEdgeDrain is gordon-edge's default --shutdown-timeout: how long a
// stopping or superseded edge lets its in-flight requests and streams run.
const DefaultEdgeDrain = 30 * time.Second

// EdgeOptions are the edge's settings as `edge start` and `system start`
// take them: its HTTP and admin addresses, its drain bound (0: the
// default), its HTTPS and its access log.
type EdgeOptions struct {
	HTTPAddr, AdminAddr string
	Drain               time.Duration
	TLS                 TLSOptions
	Access              AccessLogOptions
}

// edgeStartFile (in <state>/edge) remembers the settings of the last
// `edge start` / `system start`, so a later start without flags comes back
// where it was (a demo on 127.0.0.1:8080 must not reappear on :80).
const edgeStartFile = "start.json"

// edgeStartAddrs is edgeStartFile's content.
type edgeStartAddrs struct {
	HTTPAddr  string `json:"http_addr"`
	AdminAddr string `json:"admin_addr,omitempty"`
	// Drain is --drain-timeout in seconds (0: the default).
	Drain float64 `json:"drain_seconds,omitempty"`
	edgeStartTLS
	edgeStartAccess
}

// edgeStartTLS is the HTTPS part of start.json.
type edgeStartTLS struct {
	HTTPSAddr  string `json:"https_addr,omitempty"`
	ACMEEmail  string `json:"acme_email,omitempty"`
	ACMECA     string `json:"acme_ca,omitempty"`
	ACMECARoot string `json:"acme_ca_root,omitempty"`
	NoACME     bool   `json:"no_acme,omitempty"`
}

// loadEdgeStart reads the last start's settings (ok false: none readable).
func loadEdgeStart(stateDir string) (last edgeStartAddrs, ok bool) {
	data, err := os.ReadFile(filepath.Join(stateDir, "edge", edgeStartFile))
	if err != nil || json.Unmarshal(data, &last) != nil {
		return edgeStartAddrs{}, false
	}
	return last, true
}

// Resolve fills the settings not given now (changed reports the flags
// given, by name: http-addr, admin-addr, drain-timeout, the TLS and the
// access log flags) from the last start; it reports whether an address
// came from there.
func (o *EdgeOptions) Resolve(stateDir string, changed func(flag string) bool) bool {
	last, ok := loadEdgeStart(stateDir)
	if !ok {
		return false
	}
	used := false
	if !changed("http-addr") && last.HTTPAddr != "" && last.HTTPAddr != o.HTTPAddr {
		o.HTTPAddr, used = last.HTTPAddr, true
	}
	if !changed("admin-addr") && last.AdminAddr != "" && last.AdminAddr != o.AdminAddr {
		o.AdminAddr, used = last.AdminAddr, true
	}
	if d := time.Duration(last.Drain * float64(time.Second)); !changed("drain-timeout") && d > 0 {
		o.Drain = d
	}
	if o.TLS.resolve(changed, last.edgeStartTLS) {
		used = true
	}
	o.Access.resolve(changed, last.edgeStartAccess)
	return used
}

// Remember records the settings of a successful start (best effort).
func (o *EdgeOptions) Remember(stateDir string) {
	last := edgeStartAddrs{HTTPAddr: o.HTTPAddr, AdminAddr: o.AdminAddr, edgeStartTLS: o.TLS.remembered(), edgeStartAccess: o.Access.remembered()}
	if o.Drain != DefaultEdgeDrain {
		last.Drain = o.Drain.Seconds()
	}
	data, err := json.Marshal(last)
	dir := filepath.Join(stateDir, "edge")
	if err == nil && os.MkdirAll(dir, 0o700) == nil {
		_ = maybe.WriteFile(filepath.Join(dir, edgeStartFile), append(data, '\n'), 0o644)
	}
}

// PrintEdgeAddr says where the edge listens (and that the address is the
// last start's when no flag gave it).
func PrintEdgeAddr(w io.Writer, o EdgeOptions, remembered bool) {
	fmt.Fprintf(w, "gordon-edge: HTTP on %s, admin on %s", o.HTTPAddr, o.AdminAddr)
	if o.TLS.HTTPSAddr != "" {
		fmt.Fprintf(w, ", HTTPS on %s", o.TLS.HTTPSAddr)
	}
	if remembered {
		fmt.Fprint(w, " (as at the last start; --http-addr/--admin-addr change them)")
	}
	fmt.Fprintln(w)
}

// EdgeUnit is the gordon-edge system container: /gordon-edge run on the
// host network with the state directory at the same path, with o's HTTPS
// and access log flags. It may copy --acme-ca-root into the state
// directory and clean the access log's path (o records both, for
// Remember). A missing binary is core.ErrNotFound, a missing HTTP address
// or a bad access log core.ErrInvalid.
func EdgeUnit(env Env, o *EdgeOptions) (docker.Unit, error) {
	stateDir := env.StateDir
	find := env.EdgeBinary
	if find == nil {
		find = FindEdgeBinary
	}
	bin, err := find()
	if err != nil {
		return docker.Unit{}, fmt.Errorf("%w: %w", core.ErrNotFound, err)
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return docker.Unit{}, fmt.Errorf("gordon-edge binary: %w", err)
	}
	if o.HTTPAddr == "" {
		return docker.Unit{}, fmt.Errorf("--http-addr is required: %w", core.ErrInvalid)
	}
	cmd := []string{"run", "--state-dir", stateDir, "--http-addr", o.HTTPAddr}
	if o.AdminAddr != "" {
		cmd = append(cmd, "--admin-addr", o.AdminAddr)
	}
	drain := o.Drain
	if drain <= 0 {
		drain = DefaultEdgeDrain
	}
	if drain != DefaultEdgeDrain {
		cmd = append(cmd, "--shutdown-timeout", drain.String())
	}
	u := docker.Unit{
		Kind:       "edge",
		Name:       docker.EdgeName,
		Binaries:   map[string]string{"/gordon-edge": bin},
		Entrypoint: []string{"/gordon-edge"},
		Cmd:        cmd,
		Env:        []string{"GORDON_STATE_DIR=" + stateDir, "TMPDIR=/tmp"},
		Binds:      []string{stateDir + ":" + stateDir},
		User:       ContainerUser(),
		StateDir:   stateDir,
		StopGrace:  drain + 5*time.Second, // gordon-edge's drain bound, then a margin
		Handover:   true,
	}
	if err := withEdgeTLS(&u, &o.TLS, stateDir); err != nil {
		return docker.Unit{}, err
	}
	if err := withEdgeAccessLog(&u, &o.Access, stateDir); err != nil {
		return docker.Unit{}, err
	}
	return u, nil
}

// StartEdge is `edge start` on one engine: it resolves o against the last
// start (changed: the flags given now), builds and runs gordon-edge
// (idempotent; a different binary or settings replace it without a gap),
// remembers o, runs (watch) or stops edge start's watcher, and says where
// the edge listens. On a swarm's state directory it is core.ErrConflict
// and changes nothing.
func StartEdge(ctx context.Context, env Env, o *EdgeOptions, changed func(string) bool, watch bool) error {
	if env.Platform.OnSwarm() {
		return fmt.Errorf("this state directory serves a swarm: its edge is the global service gordon-edge; use docker gordon system start (or system status): %w", core.ErrConflict)
	}
	remembered := o.Resolve(env.StateDir, changed)
	u, err := EdgeUnit(env, o)
	if err != nil {
		return err
	}
	if err := EnsureStateDir(env.StateDir); err != nil {
		return err
	}
	NoteEdgeBinary(env.Out, env.Err, u)
	r, err := docker.Ensure(ctx, env.API, u)
	if err != nil {
		return err
	}
	o.Remember(env.StateDir)
	PrintStart(env.Out, u.Name, r)
	if watch {
		err = EnsureEdgeWatcher(ctx, env)
	} else {
		err = StopEdgeWatcher(ctx, env)
	}
	if err != nil {
		return err
	}
	PrintEdgeAddr(env.Out, *o, remembered)
	return nil
}

// StopEdge is `edge stop`: edge start's watcher, then gordon-edge.
func StopEdge(ctx context.Context, env Env) error {
	if err := StopEdgeWatcher(ctx, env); err != nil {
		return err
	}
	return StopContainer(ctx, env, docker.EdgeName, 35*time.Second)
}

// StartOptions are system start's settings.
type StartOptions struct {
	// Runtime is auto (a swarm when the engine is a swarm manager),
	// docker or swarm.
	Runtime   string
	Edge      EdgeOptions
	Reconcile ReconcileOptions
	// Swarm are the swarm's own settings (registry, edge nodes, adoption,
	// TCP ports); the rest comes from Edge and Reconcile.
	Swarm SwarmStartOptions
	// Changed reports whether the flag of that name was given now.
	Changed func(flag string) bool
}

// Start is `system start`: on a swarm manager StartSwarm, else gordon-edge
// and gordon-reconcile as containers on this engine (idempotent), then
// the settings are remembered and, on one engine, where the edge listens
// is said. A swarm's state directory with --runtime docker is
// core.ErrConflict and changes nothing.
func Start(ctx context.Context, env Env, o StartOptions) error {
	changed := o.Changed
	if changed == nil {
		changed = func(string) bool { return false }
	}
	remembered := o.Edge.Resolve(env.StateDir, changed)
	nodeID, onSwarm, err := ChooseSwarm(ctx, env.API, o.Runtime)
	if err != nil {
		return err
	}
	if onSwarm && o.Reconcile.Dashboard != "" {
		return fmt.Errorf("--dashboard: on a swarm, run docker gordon dashboard on the manager or through its context instead; nothing was changed: %w", core.ErrInvalid)
	}
	if onSwarm {
		so := o.Swarm
		so.NodeID, so.HTTPAddr, so.Drain, so.TLS, so.Interval, so.Changed = nodeID, o.Edge.HTTPAddr, o.Edge.Drain, o.Edge.TLS, o.Reconcile.Interval, changed
		res, err := StartSwarm(ctx, env, so)
		if res.Ran {
			o.Edge.HTTPAddr, o.Edge.Drain = res.HTTPAddr, res.Drain
			o.Edge.Remember(env.StateDir)
		}
		return err
	}
	if env.Platform.OnSwarm() {
		return fmt.Errorf("this state directory serves a swarm (%s): system start --runtime docker on it would strand its apps' services; use another --state-dir for a one-engine edge: %w",
			filepath.Join(env.StateDir, swarm.ConfigFile), core.ErrConflict)
	}
	eu, err := EdgeUnit(env, &o.Edge)
	if err != nil {
		return err
	}
	NoteEdgeBinary(env.Out, env.Err, eu)
	ru, err := ReconcileUnit(env.StateDir, env.DockerHost, o.Reconcile)
	if err != nil {
		return err
	}
	if err := EnsureStateDir(env.StateDir); err != nil {
		return err
	}
	for _, u := range []docker.Unit{eu, ru} {
		r, err := docker.Ensure(ctx, env.API, u)
		if err != nil {
			return err
		}
		PrintStart(env.Out, u.Name, r)
	}
	o.Edge.Remember(env.StateDir)
	PrintEdgeAddr(env.Out, o.Edge, remembered)
	return nil
}

// Stop is `system stop`: on a swarm StopSwarm (keepEdge: the reconcile
// loop only), else gordon-reconcile then gordon-edge. keepEdge on one
// engine is core.ErrInvalid and changes nothing.
func Stop(ctx context.Context, env Env, keepEdge bool) error {
	if env.Platform.OnSwarm() {
		return StopSwarm(ctx, env, keepEdge)
	}
	if keepEdge {
		return fmt.Errorf("--keep-edge: only on a swarm (to hand the edge to another manager's state directory); nothing was changed: %w", core.ErrInvalid)
	}
	if err := StopContainer(ctx, env, docker.ReconcileName, 30*time.Second); err != nil {
		return err
	}
	return StopContainer(ctx, env, docker.EdgeName, 35*time.Second)
}
