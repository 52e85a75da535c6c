package system

import (
	"os"

	"github.com/gordon-deploy/docker-gordon/core"

	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// Kind is what serves a state directory's apps: one Docker engine or a
// Docker Swarm.
type Kind string

const (
	// OneEngine: the apps run as containers on one engine (the default).
	OneEngine Kind = "docker"
	// Swarm: `system start` ran on a swarm manager and wrote
	// <state>/swarm.json; the apps run as Swarm services.
	Swarm Kind = "swarm"
)

// EnvOnEdgeNetwork is set in the containers that already run on a swarm's
// edge overlay (the swarm reconcile loop): their verbs run in place
// instead of in a runner container.
const EnvOnEdgeNetwork = "GORDON_ON_EDGE_NETWORK"

// Platform is what a state directory is served by, resolved once from
// the state directory (Resolve). It is the one place the choice between
// one engine and a swarm is made: every other package asks it.
type Platform struct {
	// StateDir is the state directory it was resolved from.
	StateDir string
	// Kind is OneEngine or Swarm.
	Kind Kind
	// Config is <state>/swarm.json (the zero Config on one engine).
	Config swarm.Config
	// configured: <state>/swarm.json exists (a file that does not read
	// still marks the state directory as a swarm's, so nothing treats its
	// apps as one engine's).
	configured bool
}

// Resolve reads the state directory's platform: a swarm's when
// <state>/swarm.json exists, else one engine's. A swarm.json that does
// not read leaves Config zero (its readers say why when they need it).
func Resolve(stateDir string) Platform {
	p := Platform{StateDir: stateDir, Kind: OneEngine, configured: swarm.Present(stateDir)}
	if cfg, ok, err := swarm.Load(stateDir); err == nil && ok {
		p.Config = cfg
	}
	if p.Config.Network != "" {
		p.Kind = Swarm
	}
	return p
}

// OnSwarm reports whether the state directory serves a swarm: its
// swarm.json exists (the system is started, stopped or adopted as a
// swarm's; one-engine commands are refused on it).
func (p Platform) OnSwarm() bool { return p.configured }

// RuntimeName is the runtime backend the state directory's apps use:
// "swarm" once its swarm.json names an edge overlay, else "docker".
func (p Platform) RuntimeName() string { return string(p.Kind) }

// EdgeNetwork is the swarm's edge overlay ("" on one engine).
func (p Platform) EdgeNetwork() string { return p.Config.Network }

// PluginEnv is the backends' extra environment: on a swarm, the edge's
// control overlay and service, which runtime/swarm joins to each app's
// overlay (none on one engine).
func (p Platform) PluginEnv() []string {
	if n := p.EdgeNetwork(); n != "" {
		return []string{swarm.EnvEdgeNetwork + "=" + n, swarm.EnvEdgeService + "=" + p.Config.Service}
	}
	return nil
}

// EngineOptions are the engine's settings that differ on a swarm.
type EngineOptions struct {
	// EdgeNetwork: the engine routes instances at their address on this
	// overlay ("" on one engine; R18).
	EdgeNetwork string
	// CreateWithRestartPolicy: a restart policy change replaces the
	// instance (Swarm replaces a task whose restart policy changes, R59).
	CreateWithRestartPolicy bool
	// RegistryOnly: images must come from a registry every node pulls from.
	RegistryOnly bool
}

// EngineOptions returns the engine's settings for this platform.
func (p Platform) EngineOptions() EngineOptions {
	swarmRT := p.Kind == Swarm
	return EngineOptions{EdgeNetwork: p.EdgeNetwork(), CreateWithRestartPolicy: swarmRT, RegistryOnly: swarmRT}
}

// NeedsRunner reports whether a verb in this process must run in a runner
// container on the swarm's edge overlay: the state directory is a swarm's
// and this process is neither a runner (inRunner) nor already on the
// overlay (EnvOnEdgeNetwork).
func (p Platform) NeedsRunner(inRunner bool) bool {
	return !inRunner && os.Getenv(EnvOnEdgeNetwork) == "" && p.configured
}

// CheckBinds refuses, before anything changes, a TCP or UDP bind of spec
// the swarm edge does not publish (nil on one engine).
func (p Platform) CheckBinds(spec core.AppSpec) error {
	if p.Config.Network == "" {
		return nil
	}
	return p.Config.CheckBinds(spec)
}
